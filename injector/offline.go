package injector

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/inject"
)

// Object is one document of an offline input with the decision taken for its
// pod (template), if it has one.
type Object struct {
	Kind, Namespace, Name string
	// Report is nil for kinds that carry no pod.
	Report *inject.Report
	// Output is the document to write: the patched object, or the input as is.
	Output []byte
}

// ID names the object in messages.
func (o *Object) ID() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// templatePath is where each workload kind keeps its pod; nil means the object
// is the pod.
var templatePath = map[string][]string{
	"v1/Pod":              nil,
	"apps/v1/Deployment":  {"spec", "template"},
	"apps/v1/StatefulSet": {"spec", "template"},
	"apps/v1/ReplicaSet":  {"spec", "template"},
	"apps/v1/DaemonSet":   {"spec", "template"},
}

// Process runs every YAML document of r through the webhook's decision. The
// namespace is ns if set, else the object's own, else "default". It never
// writes; the caller decides what to do with denials.
func Process(r io.Reader, cat *catalog.Catalog, ns string) ([]*Object, error) {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var out []*Object
	for i := 1; ; i++ {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		o, err := processDoc(doc, cat, ns)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, o)
	}
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(line)
		}
	}
	return b.Bytes()
}

func processDoc(doc []byte, cat *catalog.Catalog, ns string) (*Object, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return nil, err
	}
	meta, _ := obj["metadata"].(map[string]any)
	kind, _ := obj["kind"].(string)
	apiVersion, _ := obj["apiVersion"].(string)
	o := &Object{Kind: kind, Output: doc}
	o.Name, _ = meta["name"].(string)
	o.Namespace, _ = meta["namespace"].(string)
	tpath, ok := templatePath[apiVersion+"/"+kind]
	if !ok {
		return o, nil
	}
	if ns == "" {
		ns = o.Namespace
	}
	if ns == "" {
		ns = "default"
	}
	podJSON, err := PodJSON(obj, tpath)
	if err != nil {
		return nil, err
	}
	var pod corev1.Pod
	if err := json.Unmarshal(podJSON, &pod); err != nil {
		return nil, fmt.Errorf("%s %s: pod template: %w", kind, o.Name, err)
	}
	o.Report = inject.Inject(&pod, ns, cat)
	if o.Report.Decision != inject.Injected {
		return o, nil
	}
	patched, err := jsonpatch.DecodePatch(o.Report.Patch)
	if err != nil {
		return nil, err
	}
	newPod, err := patched.Apply(podJSON)
	if err != nil {
		return nil, fmt.Errorf("%s %s: applying patch: %w", kind, o.Name, err)
	}
	if o.Output, err = WithPod(obj, tpath, newPod); err != nil {
		return nil, err
	}
	return o, nil
}

// PodJSON extracts the pod (metadata and spec) at path in obj, as the JSON the
// API server would send in an AdmissionReview.
func PodJSON(obj map[string]any, path []string) ([]byte, error) {
	if path == nil {
		return json.Marshal(obj)
	}
	tmpl, ok := nested(obj, path)
	if !ok {
		return nil, fmt.Errorf("no %s", strings.Join(path, "."))
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod"}
	for _, k := range []string{"metadata", "spec"} {
		if v, ok := tmpl[k]; ok {
			pod[k] = v
		}
	}
	return json.Marshal(pod)
}

// WithPod puts a (patched) pod back at path in obj and renders the object as YAML.
func WithPod(obj map[string]any, path []string, podJSON []byte) ([]byte, error) {
	var pod map[string]any
	if err := json.Unmarshal(podJSON, &pod); err != nil {
		return nil, err
	}
	if path == nil {
		return yaml.Marshal(pod)
	}
	tmpl, _ := nested(obj, path)
	for _, k := range []string{"metadata", "spec"} {
		if v, ok := pod[k]; ok {
			tmpl[k] = v
		}
	}
	return yaml.Marshal(obj)
}

func nested(obj map[string]any, path []string) (map[string]any, bool) {
	cur := obj
	for _, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// DeniedCount is how many objects are denied.
func DeniedCount(objs []*Object) int {
	n := 0
	for _, o := range objs {
		if o.Report != nil && o.Report.Decision == inject.Denied {
			n++
		}
	}
	return n
}

// Denials joins the messages of every denied object, one per line.
func Denials(objs []*Object) error {
	var msgs []string
	for _, o := range objs {
		if o.Report != nil && o.Report.Decision == inject.Denied {
			msgs = append(msgs, o.ID()+": "+o.Report.Message())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "\n"))
}

// WriteObjects writes the outputs as one YAML stream.
func WriteObjects(w io.Writer, objs []*Object) error {
	for i, o := range objs {
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		out := o.Output
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
	return nil
}

// Explain writes, per object, whether it would be injected, denied or skipped and why.
func Explain(w io.Writer, objs []*Object) error {
	for _, o := range objs {
		if o.Report == nil {
			if _, err := fmt.Fprintf(w, "%s: no pod template, passed through\n", o.ID()); err != nil {
				return err
			}
			continue
		}
		r := o.Report
		what := r.Message()
		if r.Decision == inject.Denied {
			what = string(r.Decision) // the problems follow, one a line
		}
		fmt.Fprintf(w, "%s: %s [%s]\n", o.ID(), what, reasonList(r.Reasons))
		switch r.Decision {
		case inject.Injected:
			fmt.Fprintf(w, "  plugins: %s\n  init containers: %s\n  containers: %s\n  volumes: %s\n  catalog revision: %s\n",
				strings.Join(r.Status.Plugins, ", "), strings.Join(r.Status.InitContainers, ", "),
				noneIfEmpty(r.Status.Containers), strings.Join(r.Status.Volumes, ", "), r.Status.Revision)
		case inject.Denied:
			for _, p := range r.Problems {
				fmt.Fprintf(w, "  - %s: %s\n", p.Reason, p.Message)
			}
		}
	}
	return nil
}

func reasonList(rs []inject.Reason) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

func noneIfEmpty(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}
