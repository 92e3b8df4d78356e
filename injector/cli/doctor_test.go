package cli

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// argo-helm's global.podLabels labels every Argo CD pod: doctor passes those
// that are not repo-servers, as the webhook leaves them, and still fails a
// labelled repo-server that is not injected.
func TestDoctorLeavesLabelledNonRepoServersAlone(t *testing.T) {
	cat, err := catalog.Load("../testdata/catalog.yaml")
	if err != nil {
		t.Fatal(err)
	}
	labelled := func(name, container string, args ...string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "argocd",
				Labels:      map[string]string{keys.InjectLabel: keys.EnabledValue},
				Annotations: map[string]string{keys.PluginsAnnotation: "helm"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: container, Image: "quay.io/argoproj/argocd:v3.4.4", Args: args}}},
		}
	}
	server := labelled("argocd-server-0", "server", "/usr/local/bin/argocd-server")
	repo := labelled("argocd-repo-server-0", "repo-server", "/usr/local/bin/argocd-repo-server")
	d := &doctor{client: fake.NewClientset(server, repo), cat: cat, enabled: map[string]bool{"argocd": true}}
	d.checkPods(context.Background())
	got := map[string]*check{}
	for _, c := range d.report.group("repo-server pods").Checks {
		got[c.Pod.Name] = c
	}
	if c := got[server.Name]; c == nil || !c.OK || !strings.Contains(c.Message, "not a repo-server") {
		t.Errorf("argocd-server: %+v", c)
	}
	if c := got[repo.Name]; c == nil || c.OK || !strings.Contains(c.Message, "not injected, though it would be now") {
		t.Errorf("repo-server: %+v", c)
	}
}
