package inject

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// FuzzSlimDecodeMatchesFull: for any pod JSON that decodes into corev1.Pod,
// the webhook's slim decode, injected in place, gives the same decision,
// reasons, messages, status and patch bytes as the whole pod through Inject.
// Seeds: the golden pods and pods exercising every field the slim decode keeps.
func FuzzSlimDecodeMatchesFull(f *testing.F) {
	cat := testCat(f)
	uid := int64(1234)
	seeds := []*corev1.Pod{
		pod(map[string]string{keys.PluginsAnnotation: "helm, kustomize"}, nil),
		pod(map[string]string{keys.PluginsAnnotation: "helm", keys.ImageAnnotationPrefix + "helm": "alpine/helm:3.17"}, func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid}
			p.Spec.Volumes = []corev1.Volume{{Name: keys.VarFilesVolume}, {Name: "other"}}
			p.Spec.InitContainers = []corev1.Container{{Name: "copyutil", Image: "argocd"}}
			c := &p.Spec.Containers[0]
			c.Env = []corev1.EnvVar{{Name: keys.EnvCMPChunkSize, Value: "1"}, {Name: "X", ValueFrom: &corev1.EnvVarSource{}}}
			c.VolumeMounts = []corev1.VolumeMount{{Name: "a", MountPath: "/a"}}
			c.SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
			c.Resources.Limits = corev1.ResourceList{}
		}),
		pod(map[string]string{keys.PluginsAnnotation: "helm"}, func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "cmp-helm"})
			p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: keys.PluginsVolume, MountPath: keys.PluginSocketDir + "/"}}
		}),
		pod(map[string]string{keys.PluginsAnnotation: "helm", keys.StatusAnnotation: `{"plugins":["helm"],"containers":[],"initContainers":["cmp-helm"],"volumes":[],"revision":"x"}`}, func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "cmp-helm", Image: "evil"}}
		}),
	}
	for _, p := range seeds {
		b, err := json.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	goldens, _ := filepath.Glob("../../injector/testdata/golden/*.yaml")
	for _, g := range goldens {
		y, err := os.ReadFile(g)
		if err != nil {
			f.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(y)
		if err == nil && bytes.Contains(j, []byte(`"kind":"Pod"`)) {
			f.Add(j)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var whole corev1.Pod
		if json.Unmarshal(raw, &whole) != nil {
			return
		}
		slim, err := decodeSlimPod(raw)
		if err != nil {
			t.Fatalf("the whole pod decodes but the slim one does not: %v", err)
		}
		want := Inject(&whole, "argocd", cat)
		got := injectPod(slim, "argocd", cat, true)
		if got.Decision != want.Decision || !reflect.DeepEqual(got.Reasons, want.Reasons) ||
			!reflect.DeepEqual(got.Problems, want.Problems) || !reflect.DeepEqual(got.Plugins, want.Plugins) {
			t.Fatalf("decision differs:\nslim  %v %v %v\nwhole %v %v %v", got.Decision, got.Reasons, got.Problems, want.Decision, want.Reasons, want.Problems)
		}
		if !bytes.Equal(got.Patch, want.Patch) || !reflect.DeepEqual(got.Status, want.Status) {
			t.Fatalf("patch differs:\nslim  %s\nwhole %s", got.Patch, want.Patch)
		}
	})
}

// The hand-written patch encoding is json.Marshal's, for every kind of value
// apply adds (HTML-sensitive characters included).
func TestPatchMarshalIsJSONMarshal(t *testing.T) {
	raw := json.RawMessage(`{"name":"a\u003cb","value":"x\u0026y"}`)
	var p patch
	p.add("/spec/volumes", []json.RawMessage{raw, raw})
	p.add("/spec/containers/-", raw)
	p.add("/spec/containers/0/env", []corev1.EnvVar{{Name: "A", Value: "<&>"}})
	p.add("/metadata/annotations", map[string]string{"b": "2", "a": "<1>"})
	p.add("/metadata/annotations/cmp-injector.io~1status", `{"plugins":["x"]}`)
	// Strings written directly and those that go through json.Marshal.
	for _, s := range []string{"", "plain text ~0~1", "line\nbreak", `quote " and \ backslash`, "<html>&amp;", "\u00e9t\u00e9", "\x7f\x01", "\u2028", "bad \xff utf-8"} {
		p.add("/metadata/annotations/"+EscapePointer(s), s)
	}
	want, err := json.Marshal([]Operation(p))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.marshal(); !bytes.Equal(got, want) {
		t.Errorf("patch bytes\n got %s\nwant %s", got, want)
	}
}
