package inject

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
)

// Object is one document of an offline input (or one item of a List) with
// the decision taken for its pod (template), if it carries one.
type Object struct {
	Kind, Namespace, Name string
	// Report is nil for kinds that carry no pod, and for a List.
	Report *Report
	// Items are a List's objects, in order.
	Items []*Object
	// Output is the document to write: the input with the patch applied
	// (order and comments kept), or the input as it is.
	Output []byte
	// Hints are likely mistakes in how the object opts in that the decision
	// cannot see (explain prints them).
	Hints []string
}

// ID names the object in messages.
func (o *Object) ID() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// templatePaths is where each workload kind keeps its pod; an empty path
// means the object is the pod.
var templatePaths = map[string][]string{
	"v1/Pod":              {},
	"apps/v1/Deployment":  {"spec", "template"},
	"apps/v1/StatefulSet": {"spec", "template"},
	"apps/v1/ReplicaSet":  {"spec", "template"},
	"apps/v1/DaemonSet":   {"spec", "template"},
	"batch/v1/Job":        {"spec", "template"},
	"batch/v1/CronJob":    {"spec", "jobTemplate", "spec", "template"},
}

// TemplatePath is where an object of apiVersion and kind keeps its pod
// (empty: it is the pod); ok is false for kinds that carry none.
func TemplatePath(apiVersion, kind string) (path []string, ok bool) {
	path, ok = templatePaths[apiVersion+"/"+kind]
	return path, ok
}

// IntoResources runs every YAML document of r through the webhook's decision,
// the offline twin of admission (like Istio's IntoResourceFile). The namespace
// is ns if set, else the object's own, else "default". It writes nothing: the
// caller decides what to do with denials.
func IntoResources(r io.Reader, cat *catalog.Catalog, ns string) ([]*Object, error) {
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
		o, err := intoDocument(doc, cat, ns)
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

// intoDocument decides for one document, a List's items included, and patches
// the document's own YAML so that what the decision did not touch stays as
// written.
func intoDocument(doc []byte, cat *catalog.Catalog, ns string) (*Object, error) {
	var obj map[string]any
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		return nil, err
	}
	var patches []located
	o, err := decide(obj, nil, cat, ns, &patches)
	if err != nil {
		return nil, err
	}
	o.Output = doc
	if len(patches) > 0 {
		if o.Output, err = patchYAML(doc, patches); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// located is a pod's JSON Patch and where in the document that pod stands.
type located struct {
	at    []string
	patch []byte
}

func decide(obj map[string]any, at []string, cat *catalog.Catalog, ns string, patches *[]located) (*Object, error) {
	meta, _ := obj["metadata"].(map[string]any)
	kind, _ := obj["kind"].(string)
	apiVersion, _ := obj["apiVersion"].(string)
	o := &Object{Kind: kind}
	o.Name, _ = meta["name"].(string)
	o.Namespace, _ = meta["namespace"].(string)
	if apiVersion == "v1" && kind == "List" {
		items, _ := obj["items"].([]any)
		for i, it := range items {
			item, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("item %d of the List is not an object", i)
			}
			child, err := decide(item, append(append([]string{}, at...), "items", strconv.Itoa(i)), cat, ns, patches)
			if err != nil {
				return nil, fmt.Errorf("item %d of the List: %w", i, err)
			}
			o.Items = append(o.Items, child)
		}
		return o, nil
	}
	tpath, ok := TemplatePath(apiVersion, kind)
	if !ok {
		return o, nil
	}
	if ns == "" {
		ns = o.Namespace
	}
	if ns == "" {
		ns = "default"
	}
	if err := stringMetadata(obj, tpath); err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, o.Name, err)
	}
	podJSON, err := PodJSON(obj, tpath)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, o.Name, err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(podJSON, &pod); err != nil {
		return nil, fmt.Errorf("%s %s: pod template: %w", kind, o.Name, err)
	}
	o.Report = Inject(&pod, ns, cat)
	o.Hints = optInHints(meta, &pod, tpath)
	if o.Report.Decision == Injected {
		*patches = append(*patches, located{at: append(append([]string{}, at...), tpath...), patch: o.Report.Patch})
	}
	return o, nil
}

// PodJSON extracts the pod (metadata and spec) at path in obj, as the JSON the
// API server would send in an AdmissionReview.
func PodJSON(obj map[string]any, path []string) ([]byte, error) {
	if len(path) == 0 {
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

// Flatten lists the objects with the items of Lists in their place.
func Flatten(objs []*Object) []*Object {
	var out []*Object
	for _, o := range objs {
		if o.Items != nil || (o.Kind == "List" && o.Report == nil) {
			out = append(out, Flatten(o.Items)...)
			continue
		}
		out = append(out, o)
	}
	return out
}

// DeniedCount is how many objects (List items included) are denied.
func DeniedCount(objs []*Object) int {
	n := 0
	for _, o := range Flatten(objs) {
		if o.Report != nil && o.Report.Decision == Denied {
			n++
		}
	}
	return n
}

// Denials joins the messages of every denied object, one per line; nil when
// none is denied.
func Denials(objs []*Object) error {
	var msgs []string
	for _, o := range Flatten(objs) {
		if o.Report != nil && o.Report.Decision == Denied {
			msgs = append(msgs, o.ID()+": "+o.Report.Message())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "\n"))
}
