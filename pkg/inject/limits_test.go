package inject

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// The attack run's 526 KB list of empty entries gave one problem per entry and
// a 30.8 MB denial; it must be one problem and a short message.
func TestHugePluginsAnnotationIsOneProblem(t *testing.T) {
	for name, value := range map[string]string{
		"526 KB of commas":         strings.Repeat(",", 526_000),
		"long names":               strings.Repeat("helm-", 2000),
		"65 entries under the cap": strings.Repeat("a,", maxPluginsListed) + "b",
	} {
		t.Run(name, func(t *testing.T) {
			r := Inject(pod(map[string]string{keys.PluginsAnnotation: value}, nil), "argocd", testCat(t))
			if r.Decision != Denied || len(r.Problems) != 1 || r.Problems[0].Reason != ReasonMalformedAnnotation {
				t.Fatalf("decision %s, %d problems: %v", r.Decision, len(r.Problems), r.Problems)
			}
			if msg := r.Message(); len(msg) > 512 {
				t.Errorf("denial is %d bytes for a %d-byte annotation: %.300s", len(msg), len(value), msg)
			}
		})
	}
}

// Problems of one kind are listed up to the cap and then counted.
func TestProblemsPerReasonAreCapped(t *testing.T) {
	var names []string
	for i := 0; i < maxPluginsListed; i++ {
		names = append(names, fmt.Sprintf("nope-%d", i))
	}
	r := Inject(pod(map[string]string{keys.PluginsAnnotation: strings.Join(names, ",")}, nil), "argocd", testCat(t))
	if r.Decision != Denied {
		t.Fatal(r.Decision)
	}
	if len(r.Problems) != maxProblemsPerReason+1 {
		t.Fatalf("%d problems, want %d listed and one count", len(r.Problems), maxProblemsPerReason)
	}
	want := fmt.Sprintf("and %d more problems of kind %s", maxPluginsListed-maxProblemsPerReason, ReasonUnknownPlugin)
	if last := r.Problems[len(r.Problems)-1]; last.Message != want || last.Reason != ReasonUnknownPlugin {
		t.Errorf("last problem %+v, want %q", last, want)
	}
	if !strings.Contains(r.Message(), `plugin "nope-0" is not in the catalog`) {
		t.Errorf("first problem missing: %s", r.Message())
	}
}

// A value from the pod is quoted only in part.
func TestQuotedValuesAreBounded(t *testing.T) {
	image := "evil/helm:" + strings.Repeat("x", 300_000)
	r := Inject(pod(map[string]string{keys.PluginsAnnotation: "helm", keys.ImageAnnotationPrefix + "helm": image}, nil), "argocd", testCat(t))
	if r.Decision != Denied {
		t.Fatal(r.Decision)
	}
	if len(r.Message()) > 1024 {
		t.Errorf("denial is %d bytes", len(r.Message()))
	}
	if got := quoteBounded(strings.Repeat("é", 300)); !strings.HasSuffix(got, "(344 more bytes)") || !strings.HasPrefix(got, `"éé`) {
		t.Errorf("quoteBounded cut badly: %s", got)
	}
}

// Whatever the problems, the message stays under maxDenyMessageBytes and says
// how much it left out.
func TestDenyMessageIsBounded(t *testing.T) {
	var problems []Problem
	for i := 0; i < 500; i++ {
		problems = append(problems, Problem{Reason: Reason(fmt.Sprintf("r%03d", i)), Message: strings.Repeat("m", 100)})
	}
	msg := denied(nil, problems).Message()
	if len(msg) > maxDenyMessageBytes {
		t.Errorf("message is %d bytes", len(msg))
	}
	if !strings.Contains(msg, "more problems (message cut at") {
		t.Errorf("message does not say it was cut: …%s", msg[len(msg)-120:])
	}
}

// Overrides the attack run got admitted and stored: a newline and an empty tag
// matched "alpine/helm:*" as strings. Parsed as image references, they are not
// images at all.
func TestInvalidImageOverridesAreDenied(t *testing.T) {
	for _, image := range []string{"alpine/helm:3\nevil", "alpine/helm:", "alpine/helm:\xff"} {
		r := Inject(pod(map[string]string{keys.PluginsAnnotation: "helm", keys.ImageAnnotationPrefix + "helm": image}, nil), "argocd", testCat(t))
		if r.Decision != Denied || r.Problems[0].Reason != ReasonImageNotAllowed || !strings.Contains(r.Message(), "not a valid image reference") {
			t.Errorf("override %q: %s %v", image, r.Decision, r.Problems)
		}
	}
	if r := Inject(pod(map[string]string{keys.PluginsAnnotation: "helm", keys.ImageAnnotationPrefix + "helm": "docker.io/alpine/helm:3.17"}, nil), "argocd", testCat(t)); r.Decision != Injected {
		t.Errorf("a valid override in its normalized form was %s: %v", r.Decision, r.Problems)
	}
}
