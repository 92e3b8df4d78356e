package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The whole Argo CD next to a booted repo-server: its API server and its
// application controller, both the release's multi-call binary run under the
// names Argo CD's image gives them, against the suite's kube-apiserver as the
// cluster admin. What Argo CD's own end-to-end setup does to run outside a
// cluster is done here too: ARGOCD_FAKE_IN_CLUSTER makes the in-cluster
// destination (https://kubernetes.default.svc) the KUBECONFIG's cluster.

// ArgoCRDs are the CRD files of Argo CD's module (manifests/crds) the API
// server and the controller need.
var ArgoCRDs = []string{"application-crd.yaml", "appproject-crd.yaml"}

// ArgoSource is the directory of rel's module in the Go module cache (fetched
// from the module proxy when missing): its manifests/crds are the CRDs the
// release's binary was built with.
func ArgoSource(rel ArgoRelease) (string, error) {
	major, _, _ := strings.Cut(rel.Version, ".")
	if major == "" || major == rel.Version {
		return "", fmt.Errorf("version %q of Argo CD has no major version", rel.Version)
	}
	mod := "github.com/argoproj/argo-cd/" + major + "@" + rel.Version
	tmp, err := os.MkdirTemp("", "argosrc")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	// The toolchain hack/tools.sh builds Argo CD with: the module's go
	// line may ask for a newer Go than the suite's.
	toolchain, err := argoToolchain()
	if err != nil {
		return "", err
	}
	// Outside any module: `go mod download` of module@version needs none.
	cmd := exec.Command("go", "mod", "download", "-json", mod)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOTOOLCHAIN="+toolchain, "GO111MODULE=on")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil || info.Dir == "" {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return "", fmt.Errorf("go mod download %s: %v %s\n%s", mod, err, info.Error, exit.Stderr)
		}
		return "", fmt.Errorf("go mod download %s: %v %s", mod, err, info.Error)
	}
	return info.Dir, nil
}

// argoToolchain is ARGOCD_GO of hack/versions.sh.
func argoToolchain() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "hack", "versions.sh"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "ARGOCD_GO="); ok && v != "" {
			return strings.Trim(v, `"'`), nil
		}
	}
	return "", errors.New("hack/versions.sh sets no ARGOCD_GO")
}

// ArgoCD is a running API server and application controller in Namespace.
type ArgoCD struct {
	Namespace  string
	Server     string // host:port of the API server (gRPC and HTTP, plaintext)
	Release    ArgoRelease
	Password   string // the admin's, from argocd-initial-admin-secret
	bin        string
	home       string // the CLI's config directory
	token      string
	server     *Process
	controller *Process
}

// ArgoCDOptions say where the whole Argo CD runs and what it talks to.
type ArgoCDOptions struct {
	Namespace            string // Argo CD's namespace: its ConfigMaps, Secrets, Applications
	RepoServer           string // the booted repo-server's gRPC address
	Redis, RedisPassword string
	Kubeconfig           string // the admin kubeconfig: Argo CD's view of the cluster it deploys to
	Dir                  string
	LogTo                io.Writer
	// Settings are extra argocd-cm entries (e.g. timeout.reconciliation).
	Settings map[string]string
}

// partOf is the label Argo CD's settings manager selects its ConfigMaps and
// Secrets by.
var partOf = map[string]any{"app.kubernetes.io/part-of": "argocd"}

// StartArgoCD installs the release's CRDs and Argo CD's settings objects
// (argocd-cm, argocd-secret, argocd-rbac-cm) in opts.Namespace, starts the API
// server and the application controller, waits until both answer their
// health checks, reads the admin password the API server generated, and logs
// the CLI in.
func StartArgoCD(c *Client, rel ArgoRelease, opts ArgoCDOptions) (_ *ArgoCD, err error) {
	bin, err := Tool(rel.Tool)
	if err != nil {
		return nil, err
	}
	src, err := ArgoSource(rel)
	if err != nil {
		return nil, err
	}
	var crds []string
	for _, f := range ArgoCRDs {
		crds = append(crds, filepath.Join(src, "manifests", "crds", f))
	}
	if err := c.InstallCRDs(crds...); err != nil {
		return nil, err
	}
	ns := opts.Namespace
	settings := map[string]any{}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	for name, obj := range map[string]map[string]any{
		"configmaps/argocd-cm":      {"apiVersion": "v1", "kind": "ConfigMap", "data": settings},
		"configmaps/argocd-rbac-cm": {"apiVersion": "v1", "kind": "ConfigMap"},
		// The API server fills in server.secretkey and the admin's password.
		"secrets/argocd-secret": {"apiVersion": "v1", "kind": "Secret"},
	} {
		coll, n, _ := strings.Cut(name, "/")
		obj["metadata"] = map[string]any{"name": n, "labels": partOf}
		if err := c.Apply("/api/v1/namespaces/"+ns+"/"+coll, n, obj); err != nil {
			return nil, fmt.Errorf("apply %s: %w", name, err)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	a := &ArgoCD{Namespace: ns, Release: rel, bin: bin, home: filepath.Join(opts.Dir, "cli")}
	defer func() {
		if err != nil {
			a.Stop()
		}
	}()
	common := []string{"--kubeconfig", opts.Kubeconfig, "--namespace", ns, "--repo-server", opts.RepoServer,
		"--redis", opts.Redis, "--loglevel", "info", "--logformat", "text"}
	envs := []string{"REDIS_PASSWORD=" + opts.RedisPassword, "ARGOCD_FAKE_IN_CLUSTER=true",
		"KUBECONFIG=" + opts.Kubeconfig, "HOME=" + opts.Dir}

	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	sMetrics, err := FreePort()
	if err != nil {
		return nil, err
	}
	assets := filepath.Join(opts.Dir, "assets")
	if err := os.MkdirAll(assets, 0o755); err != nil {
		return nil, err
	}
	a.Server = "127.0.0.1:" + strconv.Itoa(port)
	a.server, err = Start("argocd-server", append([]string{bin, "--insecure", "--address", "127.0.0.1",
		"--port", strconv.Itoa(port), "--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(sMetrics),
		"--staticassets", assets, "--dex-server", "http://127.0.0.1:1"}, common...),
		append(envs, "ARGOCD_BINARY_NAME=argocd-server"), opts.Dir, opts.LogTo)
	if err != nil {
		return nil, err
	}
	if err := a.server.waitHTTPOK("argocd-server", "http://"+a.Server+"/healthz", 90*time.Second, 200*time.Millisecond); err != nil {
		return nil, err
	}

	cMetrics, err := FreePort()
	if err != nil {
		return nil, err
	}
	a.controller, err = Start("argocd-application-controller", append([]string{bin,
		"--metrics-port", strconv.Itoa(cMetrics),
		// Two of each is plenty for a handful of Applications on two cores.
		"--status-processors", "2", "--operation-processors", "2"}, common...),
		append(envs, "ARGOCD_BINARY_NAME=argocd-application-controller"), opts.Dir, opts.LogTo)
	if err != nil {
		return nil, err
	}
	if err := a.controller.waitHTTPOK("argocd-application-controller", "http://127.0.0.1:"+strconv.Itoa(cMetrics)+"/healthz", 90*time.Second, 200*time.Millisecond); err != nil {
		return nil, err
	}

	err = Eventually(30*time.Second, 200*time.Millisecond, func() (bool, error) {
		data, found, err := c.SecretData(ns, "argocd-initial-admin-secret")
		if err != nil || !found {
			return false, fmt.Errorf("argocd-initial-admin-secret: found %v, %v", found, err)
		}
		a.Password = string(data["password"])
		return a.Password != "", errors.New("argocd-initial-admin-secret has no password")
	})
	if err != nil {
		return nil, err
	}
	if _, err := a.CLI("login", a.Server, "--plaintext", "--username", "admin", "--password", a.Password); err != nil {
		return nil, err
	}
	var session struct {
		Token string `json:"token"`
	}
	if err := a.API(http.MethodPost, "/api/v1/session", map[string]string{"username": "admin", "password": a.Password}, &session); err != nil {
		return nil, err
	}
	a.token = session.Token
	return a, nil
}

// CLI runs the release's argocd CLI, logged in as the admin, and returns what
// it printed on stdout; a failure's error holds its stderr.
func (a *ArgoCD) CLI(args ...string) (string, error) {
	cmd := exec.Command(a.bin, append(args, "--config", filepath.Join(a.home, "config"))...)
	cmd.Env = append(os.Environ(), "ARGOCD_BINARY_NAME=argocd", "HOME="+a.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("argocd %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// APIError is a failed call of Argo CD's HTTP API: its status and message.
type ArgoAPIError struct {
	Code    int
	Message string
}

func (e *ArgoAPIError) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

// API calls Argo CD's HTTP API (what the UI calls) as the admin: in is sent
// as JSON, the answer decoded into out (when non-nil).
func (a *ArgoCD) API(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+a.Server+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	client := &http.Client{Timeout: 90 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 32<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Message string `json:"message"`
			Error   string `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		msg := e.Message
		if msg == "" {
			msg = e.Error
		}
		if msg == "" {
			msg = string(b)
		}
		return &ArgoAPIError{Code: resp.StatusCode, Message: msg}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// ApplicationPath is the API path of Application name.
func ApplicationPath(name string, query url.Values) string {
	p := "/api/v1/applications/" + url.PathEscape(name)
	if len(query) > 0 {
		p += "?" + query.Encode()
	}
	return p
}

// Exited reports whether the API server or the controller has ended.
func (a *ArgoCD) Exited() error {
	for _, p := range []*Process{a.server, a.controller} {
		if p == nil {
			continue
		}
		if done, err := p.Exited(); done {
			return fmt.Errorf("%s exited: %v\n%s", p.Name, err, tail(p.Output(), 4000))
		}
	}
	return nil
}

// Stop ends the controller and the API server.
func (a *ArgoCD) Stop() {
	for _, p := range []*Process{a.controller, a.server} {
		if p != nil {
			_ = p.Stop(15 * time.Second)
		}
	}
}
