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

	"sigs.k8s.io/yaml"
)

// The whole Argo CD next to a booted repo-server: its API server and its
// application controller, both the release's multi-call binary run under the
// names Argo CD's image gives them, against the suite's kube-apiserver as the
// cluster admin. What Argo CD's own end-to-end setup does to run outside a
// cluster is done here too: ARGOCD_FAKE_IN_CLUSTER makes the in-cluster
// destination (https://kubernetes.default.svc) the KUBECONFIG's cluster.

// argoCRDs are the CRD files of Argo CD's module (manifests/crds) the API
// server and the controller need.
var argoCRDs = []string{"application-crd.yaml", "appproject-crd.yaml"}

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
			return "", fmt.Errorf("go mod download %s: %w %s\n%s", mod, err, info.Error, exit.Stderr)
		}
		return "", fmt.Errorf("go mod download %s: %w %s", mod, err, info.Error)
	}
	return info.Dir, nil
}

// ArgoImageBin is the directory of the release's binary bin (a bin/ link
// resolved): hack/tools.sh installs next to it the scripts Argo CD's image
// holds beside its binary (git-verify-wrapper.sh, which the repo-server runs
// for every generation), so a repo-server's PATH starts with it.
func ArgoImageBin(bin string) (string, error) {
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return "", err
	}
	return filepath.Dir(real), nil
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

// ArgoCD is a running API server and application controller.
type ArgoCD struct {
	Server     string // host:port of the API server (gRPC and HTTP, plaintext)
	bin        string
	home       string // the CLI's config directory
	token      string // the CLI's session, for API
	server     *Process
	controller *Process
}

// ArgoServerOptions say where Argo CD's API server and application
// controller run and what they talk to.
type ArgoServerOptions struct {
	Namespace            string // Argo CD's namespace: its ConfigMaps, Secrets, Applications
	RepoServer           string // the repo-server's gRPC address
	Redis, RedisPassword string
	Kubeconfig           string // the admin kubeconfig: Argo CD's view of the cluster it deploys to
	Dir                  string // HOME, and the API server's (empty) static assets
	LogLevel             string // info when empty
	// Env is added to both processes' environment, ServerArgs and
	// ControllerArgs to their flags.
	Env                        []string
	ServerArgs, ControllerArgs []string
}

// ArgoProcess is one of Argo CD's processes: the release's multi-call binary
// run in a role (ARGOCD_BINARY_NAME).
type ArgoProcess struct {
	Name   string // the role, e.g. argocd-server
	Env    []string
	Argv   []string
	Health string // a URL that answers 200 once the process serves
}

// ArgoServers are Argo CD's API server (listening at addr) and application
// controller, bin run with o on free loopback ports: what StartArgoCD starts
// and make e2e-argo's Procfile holds. ARGOCD_FAKE_IN_CLUSTER is Argo CD's own
// switch for running outside a pod: the in-cluster destination
// (https://kubernetes.default.svc) is then the KUBECONFIG's cluster.
func ArgoServers(bin string, o ArgoServerOptions) (server, controller ArgoProcess, addr string, err error) {
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = FreePort(); err != nil {
			return server, controller, "", err
		}
	}
	assets := filepath.Join(o.Dir, "assets")
	if err := os.MkdirAll(assets, 0o755); err != nil {
		return server, controller, "", err
	}
	level := o.LogLevel
	if level == "" {
		level = "info"
	}
	common := []string{"--kubeconfig", o.Kubeconfig, "--namespace", o.Namespace, "--repo-server", o.RepoServer,
		"--redis", o.Redis, "--loglevel", level, "--logformat", "text"}
	env := append([]string{"REDIS_PASSWORD=" + o.RedisPassword, "ARGOCD_FAKE_IN_CLUSTER=true",
		"KUBECONFIG=" + o.Kubeconfig, "HOME=" + o.Dir}, o.Env...)
	addr = "127.0.0.1:" + strconv.Itoa(ports[0])
	server = ArgoProcess{
		Name: "argocd-server", Env: append(env[:len(env):len(env)], "ARGOCD_BINARY_NAME=argocd-server"),
		Argv: append(append([]string{bin, "--insecure", "--address", "127.0.0.1", "--port", strconv.Itoa(ports[0]),
			"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(ports[1]),
			"--staticassets", assets, "--dex-server", "http://127.0.0.1:1"}, common...), o.ServerArgs...),
		Health: "http://" + addr + "/healthz",
	}
	controller = ArgoProcess{
		Name: "argocd-application-controller", Env: append(env[:len(env):len(env)], "ARGOCD_BINARY_NAME=argocd-application-controller"),
		// Two of each is plenty for a handful of Applications on two cores.
		Argv: append(append([]string{bin, "--metrics-port", strconv.Itoa(ports[2]),
			"--status-processors", "2", "--operation-processors", "2"}, common...), o.ControllerArgs...),
		Health: "http://127.0.0.1:" + strconv.Itoa(ports[2]) + "/healthz",
	}
	return server, controller, addr, nil
}

// partOf is the label Argo CD's settings manager selects its ConfigMaps and
// Secrets by.
var partOf = map[string]any{"app.kubernetes.io/part-of": "argocd"}

// StartArgoCD installs the release's CRDs and Argo CD's settings objects
// (argocd-cm, argocd-secret, argocd-rbac-cm) in o.Namespace, starts the API
// server and the application controller, waits until both answer their
// health checks, and logs the CLI in with the admin password the API server
// generated.
func StartArgoCD(c *Client, rel ArgoRelease, o ArgoServerOptions, logTo io.Writer) (_ *ArgoCD, err error) {
	bin, err := Tool(rel.Tool)
	if err != nil {
		return nil, err
	}
	src, err := ArgoSource(rel)
	if err != nil {
		return nil, err
	}
	var crds []string
	for _, f := range argoCRDs {
		crds = append(crds, filepath.Join(src, "manifests", "crds", f))
	}
	if err := c.InstallCRDs(crds...); err != nil {
		return nil, err
	}
	ns := o.Namespace
	for name, obj := range map[string]map[string]any{
		"configmaps/argocd-cm":      {"apiVersion": "v1", "kind": "ConfigMap"},
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
	server, controller, addr, err := ArgoServers(bin, o)
	if err != nil {
		return nil, err
	}
	a := &ArgoCD{Server: addr, bin: bin, home: filepath.Join(o.Dir, "cli")}
	defer func() {
		if err != nil {
			a.Stop()
		}
	}()
	for _, p := range []struct {
		spec ArgoProcess
		proc **Process
	}{{server, &a.server}, {controller, &a.controller}} {
		if *p.proc, err = Start(p.spec.Name, p.spec.Argv, p.spec.Env, o.Dir, logTo); err != nil {
			return nil, err
		}
		if err := (*p.proc).WaitHTTPOK(p.spec.Name, p.spec.Health, 90*time.Second, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
	var password string
	err = Eventually(30*time.Second, 200*time.Millisecond, func() (bool, error) {
		data, found, err := c.SecretData(ns, "argocd-initial-admin-secret")
		if err != nil || !found {
			return false, fmt.Errorf("argocd-initial-admin-secret: found %v, %w", found, err)
		}
		password = string(data["password"])
		return password != "", errors.New("argocd-initial-admin-secret has no password")
	})
	if err != nil {
		return nil, err
	}
	if _, err := a.CLI("login", a.Server, "--plaintext", "--username", "admin", "--password", password); err != nil {
		return nil, err
	}
	// The API calls use the session the CLI's login made.
	b, err := os.ReadFile(a.cliConfig())
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Users []struct {
			AuthToken string `json:"auth-token"`
		} `json:"users"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil || len(cfg.Users) == 0 || cfg.Users[0].AuthToken == "" {
		return nil, fmt.Errorf("the CLI's config %s holds no session token: %w", a.cliConfig(), err)
	}
	a.token = cfg.Users[0].AuthToken
	return a, nil
}

func (a *ArgoCD) cliConfig() string { return filepath.Join(a.home, "config") }

// CLI runs the release's argocd CLI, logged in as the admin, and returns what
// it printed on stdout; a failure's error holds its stderr.
func (a *ArgoCD) CLI(args ...string) (string, error) {
	cmd := exec.Command(a.bin, append(args, "--config", a.cliConfig())...)
	cmd.Env = append(os.Environ(), "ARGOCD_BINARY_NAME=argocd", "HOME="+a.home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("argocd %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// ArgoAPIError is a failed call of Argo CD's HTTP API: its status and message.
type ArgoAPIError struct {
	Code    int
	Message string
}

func (e *ArgoAPIError) Error() string { return fmt.Sprintf("%d: %s", e.Code, e.Message) }

// argoHTTP is the API's client: a sync waits on the controller.
var argoHTTP = &http.Client{Timeout: 90 * time.Second}

// API calls Argo CD's HTTP API (what the UI calls) as the admin: in is sent
// as JSON, the answer decoded into out (when non-nil).
func (a *ArgoCD) API(method, path string, in, out any) error {
	err := callJSON(argoHTTP, method, "http://"+a.Server+path, http.Header{"Authorization": {"Bearer " + a.token}}, in, out)
	var se *statusError
	if !errors.As(err, &se) {
		return err
	}
	var e struct {
		Message string `json:"message"`
		Error   string `json:"error"`
	}
	_ = json.Unmarshal(se.Body, &e)
	msg := e.Message
	if msg == "" {
		msg = e.Error
	}
	if msg == "" {
		msg = string(se.Body)
	}
	return &ArgoAPIError{Code: se.Code, Message: msg}
}

// ApplicationPath is the API path of Application name.
func ApplicationPath(name string) string { return "/api/v1/applications/" + url.PathEscape(name) }

// ControllerPID is the application controller's process id, for a bench's
// CPU figures.
func (a *ArgoCD) ControllerPID() int { return a.controller.PID() }

// Exited reports whether the API server or the controller has ended.
func (a *ArgoCD) Exited() error {
	for _, p := range []*Process{a.server, a.controller} {
		if p == nil {
			continue
		}
		if done, err := p.Exited(); done {
			return fmt.Errorf("%s exited: %w\n%s", p.Name, err, tail(p.Output(), 4000))
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
