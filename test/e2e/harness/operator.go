package harness

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// OperatorModule is argocd-operator's module path; test/e2e/tools/argocd-operator
// pins its version, and hack/tools.sh argocd-operator builds its manager from there.
const OperatorModule = "github.com/argoproj-labs/argocd-operator"

// operatorCRDs are the operator's own CRDs its manager cannot start without:
// ArgoCD, and the kinds its controllers own or watch (ArgoCDExport,
// NotificationsConfiguration, NamespaceManagement). The ImageUpdater CRD is
// left out: the operator then skips that controller, as it logs.
var operatorCRDs = []string{
	"argoproj.io_argocds.yaml",
	"argoproj.io_argocdexports.yaml",
	"argoproj.io_notificationsconfigurations.yaml",
	"argoproj.io_namespacemanagements.yaml",
}

// OperatorSource is the operator module's directory in the Go module cache, at
// the version the tools module pins: its config/crd/bases are the CRDs of the
// manager bin/argocd-operator was built from.
func OperatorSource() (string, error) { return toolSource("argocd-operator", OperatorModule) }

// toolSource is the directory of module in the Go module cache at the version
// test/e2e/tools/<tools> pins (hack/tools.sh <tools> downloads it).
func toolSource(tools, module string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = filepath.Join(root, "test", "e2e", "tools", tools)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("go list -m %s: %w\n%s", module, err, exit.Stderr)
		}
		return "", err
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: the module is not in the cache; run `hack/tools.sh %s`", module, tools)
	}
	return dir, nil
}

const crdCollection = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

// InstallOperatorCRDs creates (or replaces) the operator's CRDs from its module's
// config/crd/bases and waits until the apiserver serves them.
func (c *Client) InstallOperatorCRDs(source string) error {
	var paths []string
	for _, file := range operatorCRDs {
		paths = append(paths, filepath.Join(source, "config", "crd", "bases", file))
	}
	return c.InstallCRDs(paths...)
}

// InstallCRDs creates (or replaces) the CRD of each file and waits until the
// apiserver serves it.
func (c *Client) InstallCRDs(paths ...string) error {
	for _, file := range paths {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		var crd map[string]any
		if err := yaml.Unmarshal(b, &crd); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		name, _ := crd["metadata"].(map[string]any)["name"].(string)
		if err := c.Apply(crdCollection, name, crd); err != nil {
			return fmt.Errorf("CRD %s: %w", name, err)
		}
		err = Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
			var got struct {
				Status struct {
					Conditions []struct{ Type, Status string } `json:"conditions"`
				} `json:"status"`
			}
			if err := c.Get(crdCollection+"/"+name, &got); err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == "Established" && cond.Status == "True" {
					return true, nil
				}
			}
			return false, fmt.Errorf("CRD %s is not established", name)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Operator is argocd-operator's manager (bin/argocd-operator) running against
// the control plane as the cluster admin, watching one namespace, without
// leader election; its metrics and health endpoints listen on loopback ports.
type Operator struct {
	proc       *Process
	stopped    bool
	MetricsURL string
}

// StartOperator runs the manager with kubeconfig, reconciling ArgoCD resources
// in namespace only (WATCH_NAMESPACE), and waits until its /readyz answers.
// The APIs it looks for and does not find here (OpenShift routes and config,
// Prometheus, the image updater) it turns off itself.
func StartOperator(kubeconfig, namespace, dir string, logTo io.Writer) (*Operator, error) {
	bin, err := Tool("argocd-operator")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	metricsPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	probePort, err := FreePort()
	if err != nil {
		return nil, err
	}
	probe := "127.0.0.1:" + strconv.Itoa(probePort)
	o := &Operator{MetricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort)}
	o.proc, err = Start("argocd-operator", []string{bin,
		"--metrics-bind-address=127.0.0.1:" + strconv.Itoa(metricsPort),
		"--health-probe-bind-address=" + probe,
		"--leader-elect=false",
	}, []string{"KUBECONFIG=" + kubeconfig, "WATCH_NAMESPACE=" + namespace}, dir, logTo)
	if err != nil {
		return nil, err
	}
	err = o.proc.WaitHTTPOK("argocd-operator", "http://"+probe+"/readyz", 120*time.Second, 200*time.Millisecond)
	if err != nil {
		_ = o.Stop()
		return nil, err
	}
	return o, nil
}

// Reconciles counts the operator's reconciles of the ArgoCD resource in
// namespace from its own metrics: started (it counts one as it begins the
// work) and finished (its per-instance reconcile time histogram observes one
// as it returns). The operator reconciles one resource at a time, so once
// finished passes a started count read earlier, a whole reconcile began
// after that read.
func (o *Operator) Reconciles(namespace string) (started, finished float64, err error) {
	m, err := ScrapeMetrics(o.MetricsURL + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	ns := "namespace=" + namespace
	return m.Sum("active_argocd_instance_reconciliation_count", ns),
		m.Sum("controller_runtime_reconcile_time_seconds_per_instance_count", ns), nil
}

// Exited reports whether the manager has ended, and how.
func (o *Operator) Exited() (bool, error) { return o.proc.Exited() }

// Output is what the operator logged.
func (o *Operator) Output() string { return o.proc.Output() }

// Stop ends the manager (SIGTERM, then SIGKILL after a grace period).
func (o *Operator) Stop() error {
	if o.stopped {
		return nil
	}
	o.stopped = true
	err := o.proc.Stop(15 * time.Second)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // ended by the signal, as asked
	}
	return err
}
