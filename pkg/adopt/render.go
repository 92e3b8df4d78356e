package adopt

import (
	"bytes"
	"sort"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// catalogFile is catalog.yaml as adopt writes it.
type catalogFile struct {
	APIVersion string                     `json:"apiVersion"`
	Kind       string                     `json:"kind"`
	Defaults   catalog.Defaults           `json:"defaults"`
	Plugins    map[string]*catalog.Plugin `json:"plugins"`
	Namespaces map[string][]string        `json:"namespaces,omitempty"`
}

const (
	catalogHeader  = "# Written by cmp-injector adopt. Read its report before you use it.\n"
	workloadHeader = "# Written by cmp-injector adopt: the objects it changed. Read its report before you apply them.\n"
)

// result renders the catalog and the workload, and loads the catalog with
// the real loader: what does not load is an essential finding.
func (a *adopter) result() (*Result, error) {
	r := &Result{Plugins: a.adopted, Removed: a.removed}
	if len(a.adopted) > 0 {
		f := catalogFile{APIVersion: catalog.APIVersion, Kind: catalog.Kind, Defaults: a.defaults, Plugins: a.plugins, Namespaces: a.namespaces}
		y, err := yaml.Marshal(f)
		if err != nil {
			return nil, err
		}
		r.Catalog = append([]byte(catalogHeader), y...)
		c, err := catalog.Parse(r.Catalog)
		if err != nil {
			a.f.add(Essential, CodeCatalogInvalid, "", "", "the written catalog does not load: "+err.Error(),
				"fix catalog.yaml where the loader says")
		} else {
			for _, w := range c.Warnings {
				if a.f.reported(CodeSpecVersion, w) {
					continue // said per plugin, with what to do
				}
				a.f.add(Warning, CodeCatalogInvalid, "", "", "the written catalog loads with a warning: "+w, "")
			}
		}
	}
	var w bytes.Buffer
	for _, o := range a.objects {
		if !o.changed {
			continue
		}
		y, err := yaml.Marshal(o.doc)
		if err != nil {
			return nil, err
		}
		if w.Len() == 0 {
			w.WriteString(workloadHeader)
		} else {
			w.WriteString("---\n")
		}
		w.Write(y)
	}
	r.Workload = w.Bytes()
	r.Findings = a.f
	sort.SliceStable(r.Findings, func(i, j int) bool { return r.Findings[i].Severity.rank() < r.Findings[j].Severity.rank() })
	return r, nil
}
