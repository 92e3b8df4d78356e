package e2e

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// checkInstallPathPodsOnNode runs the argo-helm repo-server pod (the golden
// input's template, the same the API-server tests use) on the real node,
// once as argo-helm runs it (UID 999 from Argo CD's image) and once with an
// OpenShift-style preassigned UID on its containers: the helm sidecar runs
// the cmp-server of the library's cmp-helm image (its catalog serverPath, no
// copy container), its start gate (postStart hook) returns, the
// repo-server container starts after it and finds the socket in the chart's
// plugins volume, and every process runs as the repo-server's UID. The
// repo-server container is a shell standing in for Argo CD's (whose own run
// the chain covers), checking the socket the way it would list it.
func checkInstallPathPodsOnNode(t *testing.T, node *harness.Node) {
	c := env.cp.Client()
	for _, tc := range []struct {
		name string
		uid  int64
	}{
		{"argo-helm", 999},
		{"openshift-uid", 1000680000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := goldenPod(t, "argo-helm-repo-server.yaml")
			pod.Name = "paths-" + tc.name
			pod.Spec.NodeName = harness.NodeName
			pod.Spec.ServiceAccountName = ""
			// Argo CD's copyutil is Argo CD's business (the chain runs it).
			pod.Spec.InitContainers = nil
			rs := &pod.Spec.Containers[0]
			rs.Image = "registry.example/e2e/shell:1"
			rs.Args = nil
			rs.Command = []string{"sh", "-c", "test -S /home/argocd/cmp-server/plugins/helm.sock && exec sleep 3600"}
			rs.Env = nil
			rs.Ports = nil
			rs.VolumeMounts = []corev1.VolumeMount{{Name: "plugins", MountPath: "/home/argocd/cmp-server/plugins"}, {Name: "tmp", MountPath: "/tmp"}}
			uid := tc.uid
			rs.SecurityContext.RunAsUser = &uid
			created, err := c.CreatePod(chainNS, pod, false)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete("/api/v1/namespaces/" + chainNS + "/pods/" + created.Name) })
			ready, err := node.WaitPodReady(c, chainNS, created.Name, 3*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			checkNativeStart(t, ready)
			uids, err := node.ProcessUIDs(ready)
			if err != nil {
				t.Fatal(err)
			}
			for name, list := range uids {
				for _, u := range list {
					if int64(u) != tc.uid {
						t.Errorf("container %s runs a process as uid %d, want %d", name, u, tc.uid)
					}
				}
			}
			if len(uids) < 2 {
				t.Errorf("processes of %d containers, want the repo-server and the helm sidecar: %v", len(uids), uids)
			}
			t.Logf("%s: pod Ready on the node, process uids %v", tc.name, fmt.Sprint(uids))
		})
	}
}
