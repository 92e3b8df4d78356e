package inject

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/pkg/catalog"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// Every Argo CD workload of the install paths, each with the opt-in label (as
// argo-helm's global.podLabels gives it) and the plugins annotation: only the
// repo-server is injected; the others are skipped, never denied.
func TestOnlyRepoServersAreInjected(t *testing.T) {
	cat := testCat(t)
	c := func(name string, command, args []string) corev1.Container {
		return corev1.Container{Name: name, Image: "quay.io/argoproj/argocd:v3.4.4", Command: command, Args: args}
	}
	for _, tc := range []struct {
		name      string
		container corev1.Container
		want      Reason
	}{
		{"plain manifests", c("argocd-repo-server", nil, []string{"/usr/local/bin/argocd-repo-server"}), ReasonInjected},
		{"argo-helm", c("repo-server", nil, []string{"/usr/local/bin/argocd-repo-server", "--port=8081"}), ReasonInjected},
		{"operator", c("argocd-repo-server", []string{"uid_entrypoint.sh", "argocd-repo-server", "--redis", "r:6379"}, nil), ReasonInjected},
		{"renamed, by its program", c("rs", []string{"/usr/bin/tini", "--", "/usr/local/bin/argocd-repo-server"}, nil), ReasonInjected},
		{"renamed, through sh -c", c("rs", []string{"sh", "-c"}, []string{"entrypoint.sh argocd-repo-server --redis r:6379"}), ReasonInjected},
		{"argocd-server naming the repo-server", c("server", nil, []string{"/usr/local/bin/argocd-server", "--repo-server", "argocd-repo-server"}), ReasonNotRepoServer},
		{"application controller", c("application-controller", nil, []string{"/usr/local/bin/argocd-application-controller"}), ReasonNotRepoServer},
		{"applicationset", c("applicationset-controller", nil, []string{"/usr/local/bin/argocd-applicationset-controller"}), ReasonNotRepoServer},
		{"notifications", c("notifications-controller", nil, []string{"/usr/local/bin/argocd-notifications"}), ReasonNotRepoServer},
		{"dex", c("dex-server", []string{"/shared/argocd-dex", "rundex"}, nil), ReasonNotRepoServer},
		{"redis", corev1.Container{Name: "redis", Image: "redis:8", Args: []string{"--save", ""}}, ReasonNotRepoServer},
		{"redis-secret-init", c("secret-init", []string{"argocd", "admin", "redis-initial-password"}, nil), ReasonNotRepoServer},
		{"a shell that only mentions it", c("debug", []string{"sh", "-c"}, []string{"echo argocd-repo-server"}), ReasonNotRepoServer},
		{"no command (image entrypoint)", corev1.Container{Name: "app", Image: "quay.io/argoproj/argocd:v3.4.4"}, ReasonNotRepoServer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod(map[string]string{keys.PluginsAnnotation: "helm"}, func(p *corev1.Pod) { p.Spec.Containers = []corev1.Container{tc.container} })
			r := Inject(p, "argocd", cat)
			if r.Reasons[0] != tc.want {
				t.Fatalf("%s %v %v, want %s", r.Decision, r.Reasons, r.Problems, tc.want)
			}
			if tc.want == ReasonNotRepoServer && r.Decision != Skipped {
				t.Fatalf("decision %s", r.Decision)
			}
			// Not even a missing plugins annotation denies a pod that is
			// not a repo-server.
			delete(p.Annotations, keys.PluginsAnnotation)
			if r := Inject(p, "argocd", cat); tc.want == ReasonNotRepoServer && r.Decision != Skipped {
				t.Fatalf("without the annotation: %s %v", r.Decision, r.Problems)
			}
		})
	}
}

// The socket mount and the repo-server env go to the recognised container,
// not to the first one (argo-helm's extraContainers may come first in
// hand-written variants).
func TestRepoServerMountGoesToTheRecognisedContainer(t *testing.T) {
	p := pod(map[string]string{keys.PluginsAnnotation: "helm"}, func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "helper", Image: "busybox"}, {Name: "repo-server", Image: "argocd"}}
	})
	r := Inject(p, "argocd", testCat(t))
	if r.Decision != Injected {
		t.Fatal(r.Decision, r.Problems)
	}
	if !hasMountPath(r.Pod.Spec.Containers[1], keys.PluginSocketDir) || hasMountPath(r.Pod.Spec.Containers[0], keys.PluginSocketDir) {
		t.Errorf("mounts: helper %v, repo-server %v", r.Pod.Spec.Containers[0].VolumeMounts, r.Pod.Spec.Containers[1].VolumeMounts)
	}
}

// The catalog decides what a repo-server is; lists that recognise nothing are
// refused at load.
func TestRepoServerContainerSetting(t *testing.T) {
	cat := catalogWith(t, "defaults: {copyImage: cmp-server:1}", `defaults: {copyImage: cmp-server:1, repoServerContainer: {names: [reposrv], programs: []}}`)
	for name, want := range map[string]Reason{"reposrv": ReasonInjected, "argocd-repo-server": ReasonNotRepoServer} {
		p := pod(map[string]string{keys.PluginsAnnotation: "helm"}, func(p *corev1.Pod) { p.Spec.Containers[0].Name = name })
		if r := Inject(p, "argocd", cat); r.Reasons[0] != want {
			t.Errorf("container %s: %v, want %s", name, r.Reasons, want)
		}
	}
	_, err := catalog.Parse([]byte(catalogYAML(t, "defaults: {copyImage: cmp-server:1}", `defaults: {copyImage: cmp-server:1, repoServerContainer: {names: [], programs: [/bin/x]}}`)))
	if err == nil {
		t.Fatal("a setting that recognises nothing was accepted")
	}
	for _, want := range []string{"defaults.repoServerContainer.programs[0]", "no path"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

// program reads what pod authors write: it must never panic, loop or return a
// path.
func FuzzProgram(f *testing.F) {
	f.Add("uid_entrypoint.sh", "argocd-repo-server", "--redis")
	f.Add("sh", "-c", "entrypoint.sh argocd-repo-server")
	f.Add("/usr/bin/tini", "--", "/usr/local/bin/argocd-repo-server")
	f.Add("bash", "-ec", "")
	f.Add("tini", "-g", "-s")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		p := program(corev1.Container{Command: []string{a, b}, Args: []string{c}})
		if strings.Contains(p, "/") {
			t.Fatalf("program %q of %q %q %q is a path", p, a, b, c)
		}
	})
}
