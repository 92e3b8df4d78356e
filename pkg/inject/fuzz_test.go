package inject

import (
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// FuzzParsePlugins: never panics, returns only valid unique names, and a clean
// parse survives a round trip through its canonical form.
func FuzzParsePlugins(f *testing.F) {
	for _, s := range []string{"helm", "helm, kustomize", "", ",", "a,,b", "Helm;x", "a b", "helm,helm", " \t",
		strings.Repeat(",", maxPluginsListed), strings.Repeat("x", maxPluginsAnnotationBytes+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		names, problems := parsePlugins(value)
		// Bounded whatever the input: at most one problem per accepted entry,
		// and a denial of them stays under the message cap.
		if len(names) > maxPluginsListed || len(problems) > maxPluginsListed {
			t.Fatalf("%d-byte value gave %d names and %d problems", len(value), len(names), len(problems))
		}
		if len(problems) > 0 {
			if msg := denied(names, problems).Message(); len(msg) > maxDenyMessageBytes {
				t.Fatalf("%d-byte value gave a %d-byte denial", len(value), len(msg))
			}
		}
		seen := map[string]bool{}
		for _, n := range names {
			if len(validation.IsDNS1123Label(n)) > 0 || seen[n] {
				t.Fatalf("%q gave invalid or duplicate name %q", value, n)
			}
			seen[n] = true
		}
		if len(problems) == 0 {
			if len(names) == 0 {
				t.Fatalf("%q: no names and no problems", value)
			}
			again, p2 := parsePlugins(strings.Join(names, ", "))
			if len(p2) > 0 || strings.Join(again, ",") != strings.Join(names, ",") {
				t.Fatalf("%q: round trip changed %v to %v %v", value, names, again, p2)
			}
		}
	})
}

// FuzzInject feeds arbitrary annotation values through the whole decision:
// whatever is injected, the patch must apply and give Report.Pod; a denial
// must carry at least one problem.
func FuzzInject(f *testing.F) {
	f.Add("helm", "", "")
	f.Add("helm, kustomize", "alpine/helm:3.17", "x")
	f.Add("kustomize", "evil", "")
	f.Add("tanka,helm", "", "y")
	cat := testCat(f)
	f.Fuzz(func(t *testing.T, plugins, image, extra string) {
		ann := map[string]string{keys.PluginsAnnotation: plugins}
		if image != "" {
			ann[keys.ImageAnnotationPrefix+"helm"] = image
		}
		// The API server only stores valid UTF-8; JSON would rewrite anything else.
		if extra != "" && utf8.ValidString(extra) {
			ann[extra] = extra
		}
		p := pod(ann, nil)
		r := Inject(p, "argocd", cat)
		switch r.Decision {
		case Injected:
			checkPatch(t, p, r)
		case Denied:
			if len(r.Problems) == 0 || !strings.HasPrefix(r.Message(), DenyPrefix) {
				t.Fatalf("denial without problems: %+v", r)
			}
		default:
			if r.Reasons[0] != ReasonAlreadyInjected {
				t.Fatalf("unexpected skip %v", r.Reasons)
			}
		}
	})
}
