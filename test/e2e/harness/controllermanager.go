package harness

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// controllers are the kube-controller-manager loops the suite needs: the
// Deployment and ReplicaSet controllers create repo-server pods the way a cluster
// does (so admission denials surface as FailedCreate events), and the garbage
// collector removes what `helm uninstall` leaves to it (ReplicaSets, pods);
// the StatefulSet and Job controllers create the pods of the other Argo CD
// workloads (the application controller, argo-helm's redis-secret-init hook),
// which an opt-in label on every workload reaches too. The service-account
// controllers make what the ServiceAccount admission plugin needs, as on a
// cluster: the default ServiceAccount of every namespace (without it a pod is
// refused), the kube-root-ca.crt ConfigMap that the token volume it mounts
// projects, and the token controller that fills a ServiceAccount token Secret.
// They go by their original names: v1.28 renamed them (deployment ->
// deployment-controller, ...) and keeps the old ones as aliases to this day
// (v1.37), while v1.27, the oldest release the matrix runs, knows only those.
var controllers = []string{"deployment", "replicaset", "garbagecollector", "statefulset", "job",
	"serviceaccount", "serviceaccount-token", "root-ca-cert-publisher"}

// controllerManagerFor is the bin/ name of the kube-controller-manager of the
// same release as the kube-apiserver tool named apiserver:
// kube-controller-manager[-1.32].
func controllerManagerFor(apiserver string) string {
	return strings.Replace(apiserver, "kube-apiserver", "kube-controller-manager", 1)
}

// WriteKubeconfig writes a kubeconfig for the cluster admin to path (for helm,
// kube-controller-manager and kubectl users of the suite).
func (cp *ControlPlane) WriteKubeconfig(path string) error {
	return cp.writeKubeconfig(path, cp.URL)
}

// WriteKubeconfigIn is WriteKubeconfig with namespace as the context's
// default, as `kubectl config set-context --current --namespace` leaves it.
func (cp *ControlPlane) WriteKubeconfigIn(path, namespace string) error {
	return writeKubeconfig(path, cp.URL, cp.CAFile, "admin", cp.Token, namespace)
}

// writeKubeconfig is the admin kubeconfig with server as the apiserver's
// address (the real node reaches it through a forwarder).
func (cp *ControlPlane) writeKubeconfig(path, server string) error {
	return writeKubeconfig(path, server, cp.CAFile, "admin", cp.Token, "")
}

// writeKubeconfig writes a kubeconfig for one user authenticated by a bearer
// token; namespace may be empty.
func writeKubeconfig(path, server, caFile, user, token, namespace string) error {
	ns := ""
	if namespace != "" {
		ns = ", namespace: " + namespace
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: %s%s}
current-context: e2e
`, server, caFile, user, token, user, ns)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// startControllerManager runs kube-controller-manager against the apiserver
// with only the controllers the suite needs. It has no serving port (nothing
// here scrapes it); the tests wait on what the controllers do instead. saKey
// is the apiserver's service-account signing key (the token controller signs
// with it) and the apiserver's bundle is the root CA it publishes.
func (cp *ControlPlane) startControllerManager(tool, saKey string, logTo io.Writer) error {
	bin, err := Tool(tool)
	if err != nil {
		return err
	}
	cp.Kubeconfig = filepath.Join(cp.Dir, "admin.kubeconfig")
	if err := cp.WriteKubeconfig(cp.Kubeconfig); err != nil {
		return err
	}
	cp.controllers, err = Start("kube-controller-manager", []string{bin,
		"--kubeconfig=" + cp.Kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--service-account-private-key-file=" + saKey, "--root-ca-file=" + cp.CAFile,
		"--leader-elect=false", "--secure-port=0", "--v=1",
	}, nil, cp.Dir, logTo)
	if err != nil {
		return err
	}
	// The process either keeps running or fails fast on a bad flag or
	// kubeconfig: give it the time its own start takes to say so.
	time.Sleep(500 * time.Millisecond)
	if done, werr := cp.controllers.Exited(); done {
		return fmt.Errorf("kube-controller-manager exited: %w\n%s", werr, tail(cp.controllers.Output(), 4000))
	}
	return nil
}
