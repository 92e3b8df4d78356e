package harness

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// Injector is a `cmp-injector serve` process with its certificate files.
type Injector struct {
	Bin        string
	Dir        string
	Catalog    string // catalog file the process watches
	CertFile   string
	KeyFile    string
	CAFile     string
	CADir      string // the kept CA that signs rotated certificates
	Port       int
	MetricsURL string
	// ExtraArgs are added to `cmp-injector serve` by Start.
	ExtraArgs []string
	proc      *Process
	logTo     io.Writer
}

// NewInjector makes a serving certificate for 127.0.0.1 with `cmp-injector certs`
// and writes the catalog into dir; Start runs the server.
func NewInjector(bin, dir string, catalog []byte, logTo io.Writer) (*Injector, error) {
	in := &Injector{Bin: bin, Dir: dir, logTo: logTo,
		Catalog:  filepath.Join(dir, "catalog.yaml"),
		CertFile: filepath.Join(dir, "tls", "tls.crt"), KeyFile: filepath.Join(dir, "tls", "tls.key"),
		CAFile: filepath.Join(dir, "tls", "ca.crt")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(in.Catalog, catalog, 0o644); err != nil {
		return nil, err
	}
	in.CADir = filepath.Join(dir, "tls-ca")
	if err := RunCerts(bin, filepath.Join(dir, "tls"), in.CADir); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	in.Port = port
	return in, nil
}

// MakeCerts runs `cmp-injector certs` (bin) into outDir: a serving certificate
// for 127.0.0.1 and 0.0.0.0 (TestWebhookProtocols) signed by the CA kept in
// outDir+"-ca" (made on first use), with extra arguments such as --rotate-ca.
func MakeCerts(bin, outDir string, extra ...string) error {
	return RunCerts(bin, outDir, outDir+"-ca", extra...)
}

// RunCerts is MakeCerts with the CA kept in caDir.
func RunCerts(bin, outDir, caDir string, extra ...string) error {
	cmd := exec.Command(bin, append([]string{"certs", "--service", "cmp-injector", "--namespace", "cmp-injector",
		"--ip", "127.0.0.1", "--ip", "0.0.0.0", "--validity", "24h", "--out-dir", outDir, "--ca-dir", caDir}, extra...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("cmp-injector certs: %w\n%s", err, out)
	}
	return nil
}

// SetCatalog replaces the catalog file the process watches, atomically (a
// new file renamed over it), so no poll reads half of it.
func (in *Injector) SetCatalog(b []byte) error {
	if err := os.WriteFile(in.Catalog+".new", b, 0o644); err != nil {
		return err
	}
	return os.Rename(in.Catalog+".new", in.Catalog)
}

// URL is the webhook endpoint the apiserver calls.
func (in *Injector) URL() string { return fmt.Sprintf("https://127.0.0.1:%d/mutate", in.Port) }

// CABundle is the base64 PEM of the CA file, as caBundle wants it.
func (in *Injector) CABundle() (string, error) {
	b, err := os.ReadFile(in.CAFile)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// Start runs `cmp-injector serve` and waits until /readyz is 200.
func (in *Injector) Start() error {
	mport, err := FreePort()
	if err != nil {
		return err
	}
	in.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d", mport)
	in.proc, err = Start("cmp-injector", append([]string{in.Bin, "serve",
		"--catalog", in.Catalog, "--tls-cert-file", in.CertFile, "--tls-key-file", in.KeyFile,
		"--listen", fmt.Sprintf("127.0.0.1:%d", in.Port), "--metrics-listen", fmt.Sprintf("127.0.0.1:%d", mport),
		// No load balancer needs time to take us out of rotation here.
		"--shutdown-delay", "0s",
		// File changes (catalog, certificate rotations) show sooner than the
		// 5 s default, which keeps the suite short.
		"--poll-interval", "250ms",
	}, in.ExtraArgs...), nil, in.Dir, in.logTo)
	if err != nil {
		return err
	}
	return in.waitReady()
}

// Stop sends SIGTERM and waits for the drain.
func (in *Injector) Stop() error {
	if in.proc == nil {
		return nil
	}
	err := in.proc.Stop(15 * time.Second)
	in.proc = nil
	return err
}

// Kill ends the process with SIGKILL: no drain, no Lease released, as when a
// node dies under it.
func (in *Injector) Kill() error {
	if in.proc == nil {
		return nil
	}
	_ = in.proc.Signal(syscall.SIGKILL)
	err := in.proc.Wait(15 * time.Second)
	in.proc = nil
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // killed, as asked
	}
	return err
}

// Output is what the injector logged.
func (in *Injector) Output() string {
	if in.proc == nil {
		return ""
	}
	return in.proc.Output()
}

// Metrics scrapes the injector's /metrics (ScrapeMetrics).
func (in *Injector) Metrics() (servingtest.Samples, error) {
	return ScrapeMetrics(in.MetricsURL + "/metrics")
}

// ScrapeMetrics reads a Prometheus text endpoint with Prometheus's own parser
// and returns every sample as "name{labels}" → value.
func ScrapeMetrics(url string) (servingtest.Samples, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return servingtest.ParseMetrics(resp.Body)
}

// Sum adds every sample of metric name whose labels include all of the given
// name=value pairs.
func Sum(samples servingtest.Samples, name string, labels ...string) float64 {
	return samples.Sum(name, labels...)
}

// TLSClient trusts the injector's CA file (for direct calls to the webhook).
func (in *Injector) TLSClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: loadPool(in.CAFile)}}}
}

// RenderCatalog renders the chart's catalog (its ConfigMap's catalog.yaml)
// with the real helm binary and the given helm flags, e.g. -f VALUES.
func RenderCatalog(chartDir, kubeVersion string, args ...string) ([]byte, error) {
	out, err := helmTemplate(chartDir, kubeVersion, "templates/catalog-configmap.yaml", args...)
	if err != nil {
		return nil, err
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(out, &cm); err != nil {
		return nil, fmt.Errorf("decode rendered catalog: %w", err)
	}
	if cm.Data["catalog.yaml"] == "" {
		return nil, errors.New("the rendered ConfigMap holds no catalog.yaml")
	}
	return []byte(cm.Data["catalog.yaml"]), nil
}

// helmTemplate renders one template of the chart (release cmp-injector in
// namespace cmp-injector) with the real helm binary; its error carries
// helm's stderr.
func helmTemplate(chartDir, kubeVersion, template string, args ...string) ([]byte, error) {
	helm, err := Tool("helm")
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(helm, append([]string{"template", "cmp-injector", chartDir, "--namespace", "cmp-injector",
		"--kube-version", kubeVersion, "--show-only", template}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("helm template: %w\n%s", err, ee.Stderr)
		}
		return nil, err
	}
	return out, nil
}

// RenderWebhook renders the chart's MutatingWebhookConfiguration with the real
// helm binary, pointed at url with caBundle, and returns it as a JSON-able map.
func RenderWebhook(chartDir, kubeVersion, url, caBundle string, set ...string) (map[string]any, error) {
	args := []string{"--set", "certificates.mode=secret", "--set", "certificates.caBundle=" + caBundle,
		"--set", "webhook.url=" + url}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helmTemplate(chartDir, kubeVersion, "templates/mutatingwebhookconfiguration.yaml", args...)
	if err != nil {
		return nil, err
	}
	obj := map[string]any{}
	if err := yaml.Unmarshal(out, &obj); err != nil {
		return nil, fmt.Errorf("decode rendered webhook: %w", err)
	}
	return obj, nil
}
