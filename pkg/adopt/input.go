package adopt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// object is one input document (or one item of a v1 List) as a generic
// map, so that what adopt does not change is written back as it was read.
type object struct {
	doc                               map[string]any
	apiVersion, kind, name, namespace string
	// changed: written to workload.yaml.
	changed bool
}

func (o *object) id() string {
	if o.namespace == "" {
		return o.kind + " " + o.name
	}
	return o.kind + " " + o.namespace + "/" + o.name
}

// maxDocuments bounds the input: helm template of argo-helm is about a
// hundred documents; a stream of a million empty ones is a mistake.
const maxDocuments = 10000

// readObjects splits a multi-document YAML stream into objects, Lists
// flattened. Documents that are empty or only comments are skipped.
func readObjects(data []byte) ([]*object, error) {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*object
	for i := 1; ; i++ {
		if i > maxDocuments {
			return nil, fmt.Errorf("more than %d documents", maxDocuments)
		}
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		objs, err := flatten(m)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, objs...)
	}
}

func flatten(m map[string]any) ([]*object, error) {
	o := newObject(m)
	if o.apiVersion != "v1" || o.kind != "List" {
		return []*object{o}, nil
	}
	items, _ := m["items"].([]any)
	var out []*object
	for i, it := range items {
		item, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("item %d of the List is not an object", i)
		}
		out = append(out, newObject(item))
	}
	return out, nil
}

func newObject(m map[string]any) *object {
	o := &object{doc: m}
	o.apiVersion, _ = m["apiVersion"].(string)
	o.kind, _ = m["kind"].(string)
	meta, _ := m["metadata"].(map[string]any)
	o.name, _ = meta["name"].(string)
	o.namespace, _ = meta["namespace"].(string)
	return o
}

// child is the map at path under m, created when create is set; nil when
// absent (or not a map) and not created.
func child(m map[string]any, create bool, path ...string) map[string]any {
	for _, k := range path {
		next, ok := m[k].(map[string]any)
		if !ok {
			if !create {
				return nil
			}
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	return m
}

// decodeInto converts a generic value into a typed one through JSON, the
// way the API server reads it.
func decodeInto(v any, into any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// stringData is a ConfigMap's data with string values only.
func stringData(o *object) map[string]string {
	data, _ := o.doc["data"].(map[string]any)
	out := make(map[string]string, len(data))
	for k, v := range data {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// isArgoCDResource: argocd-operator's ArgoCD resource (v1alpha1 or v1beta1).
func isArgoCDResource(o *object) bool {
	return o.kind == "ArgoCD" && strings.HasPrefix(o.apiVersion, "argoproj.io/")
}

func isConfigMap(o *object) bool { return o.apiVersion == "v1" && o.kind == "ConfigMap" }
