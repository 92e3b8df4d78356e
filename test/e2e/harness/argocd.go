package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// ArgoImage is the repository of Argo CD's image; a booted repo-server pod runs
// the argocd binary built from the Go module proxy in its place.
const ArgoImage = "quay.io/argoproj/argocd"

// ArgoRelease is one pinned Argo CD build (hack/tools.sh): the multi-call
// binary and repoclient, built against the same release's API.
type ArgoRelease struct {
	Tool, ClientTool string // bin/ names
	Version          string // what the binary reports, e.g. v3.6.1
}

// ArgoReleases are the releases the suite renders through: the newest v3 (its
// repo-server calls CheckPluginConfiguration first) and the newest v2.12 (the
// MatchRepository-first generation), or the one build E2E_ARGOCD names (e.g.
// argocd-2.10:repoclient-2.10, the bin/ names hack/tools.sh argocd@vX.Y.Z
// builds), which is how make e2e-matrix walks every Argo CD minor.
func ArgoReleases() ([]ArgoRelease, error) {
	rels := []ArgoRelease{newestArgo, {Tool: "argocd-v2", ClientTool: "repoclient-v2"}}
	if v := os.Getenv(ArgoReleaseEnv); v != "" {
		tool, client, ok := strings.Cut(v, ":")
		if !ok || tool == "" || client == "" {
			return nil, fmt.Errorf("%s=%q: want ARGOCD-TOOL:REPOCLIENT-TOOL, e.g. argocd-2.10:repoclient-2.10", ArgoReleaseEnv, v)
		}
		rels = []ArgoRelease{{Tool: tool, ClientTool: client}}
	}
	var out []ArgoRelease
	for _, r := range rels {
		r, err := r.probe()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ArgoReleaseEnv names the one Argo CD build (its two bin/ tools) the suite
// renders through instead of the pinned pair.
const ArgoReleaseEnv = "E2E_ARGOCD"

// NewestArgoRelease is the newest v3 alone, for what needs one release (the
// demo, which builds only it; the real node).
func NewestArgoRelease() (ArgoRelease, error) { return newestArgo.probe() }

var newestArgo = ArgoRelease{Tool: "argocd", ClientTool: "repoclient"}

// probe checks that r's binaries are built and fills in the version the
// binary reports: not our pin, the binary names the release under test.
func (r ArgoRelease) probe() (ArgoRelease, error) {
	bin, err := Tool(r.Tool)
	if err != nil {
		return r, err
	}
	if _, err := Tool(r.ClientTool); err != nil {
		return r, err
	}
	cmd := exec.Command(bin, "version", "--client", "--short")
	cmd.Env = append(os.Environ(), "ARGOCD_BINARY_NAME=argocd")
	b, err := cmd.Output()
	if err != nil {
		return r, fmt.Errorf("%s version: %w", bin, err)
	}
	_, v, _ := strings.Cut(strings.TrimSpace(string(b)), ": ")
	r.Version, _, _ = strings.Cut(v, "+")
	return r, nil
}

// Image is the Argo CD image reference of this release.
func (r ArgoRelease) Image() string { return ArgoImage + ":" + r.Version }

// copyutilNow is the copyutil command of testdata/chain/argocd-repo-server.yaml:
// Argo CD's install.yaml from v3.4.0 and v3.3.7 (argo-cd #26613) copies the
// multi-call binary and links argocd-cmp-server to it, so that plugins can run
// argocd as git's askpass program.
const copyutilNow = `          command: [sh, -c]
          args: ['/bin/cp /usr/local/bin/argocd /var/run/argocd/argocd && /bin/ln -sf /var/run/argocd/argocd /var/run/argocd/argocd-cmp-server']
`

// Copyutil is the copyutil init container's command of this release's
// install.yaml, as testdata/chain/argocd-repo-server.yaml spells it.
func (r ArgoRelease) Copyutil() string {
	v, err := utilversion.ParseSemantic(r.Version)
	switch {
	case err != nil, v.AtLeast(utilversion.MustParseSemantic("v3.3.7")): // v3.4.0 and later too
		return copyutilNow
	case v.AtLeast(utilversion.MustParseSemantic("v3.3.0")):
		// argo-cd #24665 and #24708 (v3.3.0): the link, not yet forced.
		return `          command: [sh, -c]
          args: ['/bin/cp --update=none /usr/local/bin/argocd /var/run/argocd/argocd && /bin/ln -s /var/run/argocd/argocd /var/run/argocd/argocd-cmp-server']
`
	default:
		return "          command: [/bin/cp, -n, /usr/local/bin/argocd, /var/run/argocd/argocd-cmp-server]\n"
	}
}

// RepoServerSubst turns testdata/chain/argocd-repo-server.yaml into this
// release's repo-server: its image and its copyutil command.
func (r ArgoRelease) RepoServerSubst() map[string]string {
	return map[string]string{ArgoImage + ":latest": r.Image(), copyutilNow: r.Copyutil()}
}

// RepoServer is a booted repo-server pod: Argo CD's copyutil init container and
// argocd-repo-server, next to the injector's copy init container and plugin
// sidecars, all from the stored pod's spec.
type RepoServer struct {
	Pod    *BootedPod
	Addr   string // gRPC over TLS with the repo-server's self-signed certificate
	client string
	node   *Node // when the repo-server runs on the real node: repoclient joins its network
}

// BootRepoServer boots every container of pod (the repo-server pod as the
// apiserver stored it, injected): argocd and argocd-repo-server run the
// release's binary, the plugin sidecars cmpServer. Env from ConfigMaps and
// Secrets is read from the apiserver through c. The liberty taken: the
// repo-server listens on free loopback ports (--address/--port and the metrics
// equivalents are appended), because booted pods share one network namespace.
func BootRepoServer(c *Client, pod *corev1.Pod, rel ArgoRelease, cmpServer, root string, logTo io.Writer) (*RepoServer, error) {
	argocd, err := Tool(rel.Tool)
	if err != nil {
		return nil, err
	}
	client, err := Tool(rel.ClientTool)
	if err != nil {
		return nil, err
	}
	repo, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	// Argo CD's image links argocd-repo-server to the multi-call argocd binary,
	// which picks its role from the name it is run as.
	images := filepath.Join(root, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		return nil, err
	}
	repoServerBin := filepath.Join(images, "argocd-repo-server")
	if err := os.Symlink(argocd, repoServerBin); err != nil && !os.IsExist(err) {
		return nil, err
	}
	imageBin, err := ArgoImageBin(argocd)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(repo, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	home := filepath.Join(root, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	mport, err := FreePort()
	if err != nil {
		return nil, err
	}
	booted, err := BootPod(pod, BootOptions{
		Root: root,
		Images: map[string]string{
			keys.CopyServerBinary:               cmpServer,
			"/usr/local/bin/argocd":             argocd,
			"/usr/local/bin/argocd-repo-server": repoServerBin,
		},
		// Argo CD's image runs its args under tini.
		Entrypoints: map[string][]string{ArgoImage: {}},
		// The image's /usr/local/bin holds scripts of Argo CD's own
		// (git-verify-wrapper.sh), installed next to the binary by hack/tools.sh.
		ImageEnv: map[string][]string{ArgoImage: {"HOME=" + home, "USER=argocd",
			"PATH=" + imageBin + string(os.PathListSeparator) + path}},
		// helm, kustomize and git of the images are the pinned ones in bin/ and
		// Debian's git.
		Env:       []string{"PATH=" + path},
		Run:       func(string) bool { return true },
		ConfigDir: keys.PluginConfigDir,
		// Argo CD's name for the flag, which cmp-server also takes: the
		// same boot runs hand-made argocd-cmp-server sidecars.
		ConfigDirFlag: "--config-dir-path",
		SocketDir:     keys.PluginSocketDir,
		SocketDirEnv:  keys.EnvPluginSockFilePath,
		Objects:       c,
		LogTo:         logTo,
		Rewrite: func(ctr corev1.Container, argv []string) []string {
			if !runsRepoServer(argv) {
				return argv
			}
			return append(argv, "--address=127.0.0.1", "--port="+strconv.Itoa(port),
				"--metrics-address=127.0.0.1", "--metrics-port="+strconv.Itoa(mport))
		},
	})
	if err != nil {
		return nil, err
	}
	rs := &RepoServer{Pod: booted, Addr: "127.0.0.1:" + strconv.Itoa(port), client: client}
	health := fmt.Sprintf("http://127.0.0.1:%d/healthz?full=true", mport)
	err = Eventually(60*time.Second, 100*time.Millisecond, func() (bool, error) {
		for _, p := range booted.Processes() {
			if done, werr := p.Exited(); done {
				return false, Final(fmt.Errorf("container %s exited: %w\n%s", p.Name, werr, tail(p.Output(), 4000)))
			}
		}
		resp, err := http.Get(health)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == 200, fmt.Errorf("repo-server %s: %s", health, resp.Status)
	})
	if err != nil {
		booted.Stop()
		return nil, err
	}
	return rs, nil
}

// Stop ends every container of the pod.
func (rs *RepoServer) Stop() { rs.Pod.Stop() }

// runsRepoServer reports whether a container's command line runs Argo CD's
// repo-server: install paths name the container differently (argocd-repo-server
// in Argo CD's manifests and the operator's, repo-server in argo-helm's), the
// program is the same.
func runsRepoServer(argv []string) bool {
	for _, a := range argv {
		if filepath.Base(a) == "argocd-repo-server" {
			return true
		}
	}
	return false
}

// NodeRepoServer is the repo-server of a pod the real node runs, at its pod
// address: repoclient calls it from inside the node's network.
func NodeRepoServer(n *Node, pod *corev1.Pod, rel ArgoRelease) (*RepoServer, error) {
	client, err := Tool(rel.ClientTool)
	if err != nil {
		return nil, err
	}
	if pod.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s has no IP", pod.Name)
	}
	return &RepoServer{Addr: net.JoinHostPort(pod.Status.PodIP, "8081"), client: client, node: n}, nil
}

// Call invokes a repo-server RPC through repoclient ("generate" for
// GenerateManifest, "appdetails" for GetAppDetails) with req as Argo CD's own
// JSON of the request message, and decodes the response into out. A failed
// call's error text is the gRPC status message Argo CD would show.
func (rs *RepoServer) Call(rpc string, req, out any) error {
	in, err := json.Marshal(req)
	if err != nil {
		return err
	}
	cmd := exec.Command(rs.client, "--addr", rs.Addr, rpc)
	if rs.node != nil {
		cmd = rs.node.Command(rs.client, "--addr", rs.Addr, rpc)
	}
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return &RPCError{RPC: rpc, Message: strings.TrimSpace(stderr.String())}
	}
	return json.Unmarshal(stdout.Bytes(), out)
}

// RPCError is a failed repo-server call.
type RPCError struct{ RPC, Message string }

func (e *RPCError) Error() string { return e.RPC + ": " + e.Message }

// Redis is Debian's redis-server on a loopback port, with a password as Argo
// CD's install gives it.
type Redis struct {
	Addr string
	proc *Process
	dial func(addr string, timeout time.Duration) (net.Conn, error)
}

// StartRedis runs redis-server from bin/ (hack/tools.sh installs Debian's) in
// dir and waits until it answers PING with password.
func StartRedis(dir, password string, logTo io.Writer) (*Redis, error) {
	bin, err := Tool("redis-server")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	r := &Redis{Addr: "127.0.0.1:" + strconv.Itoa(port), dial: func(addr string, timeout time.Duration) (net.Conn, error) {
		return net.DialTimeout("tcp", addr, timeout)
	}}
	r.proc, err = Start("redis", redisArgv(bin, "127.0.0.1", port, dir, password), nil, dir, logTo)
	if err != nil {
		return nil, err
	}
	if err := r.waitReady(r.Addr, password); err != nil {
		return nil, err
	}
	return r, nil
}

func redisArgv(bin, bind string, port int, dir, password string) []string {
	return []string{bin, "--bind", bind, "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", dir, "--requirepass", password}
}

// StartRedis runs redis-server inside the node's network namespace, where
// pods reach it at PodGateway:6379.
func (n *Node) StartRedis(dir, password string) (*Redis, error) {
	bin, err := Tool("redis-server")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	r := &Redis{Addr: net.JoinHostPort(PodGateway, "6379"), dial: n.ns.Dial}
	// Every address of the node's namespace: the bridge (PodGateway) exists
	// only once the first pod has its network.
	r.proc, err = n.StartIn("redis", redisArgv(bin, "0.0.0.0", 6379, dir, password), dir)
	if err != nil {
		return nil, err
	}
	if err := r.waitReady("127.0.0.1:6379", password); err != nil {
		return nil, err
	}
	return r, nil
}

// waitReady pings addr (as seen from where r.dial dials) until Redis answers.
func (r *Redis) waitReady(addr, password string) error {
	err := Eventually(20*time.Second, 50*time.Millisecond, func() (bool, error) {
		if done, werr := r.proc.Exited(); done {
			return false, Final(fmt.Errorf("redis-server exited: %w\n%s", werr, r.proc.Output()))
		}
		return r.ping(addr, password)
	})
	if err != nil {
		_ = r.Stop()
	}
	return err
}

func (r *Redis) ping(addr, password string) (bool, error) {
	conn, err := r.dial(addr, time.Second)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := fmt.Fprintf(conn, "AUTH %s\r\nPING\r\n", password); err != nil {
		return false, err
	}
	rd := bufio.NewReader(conn)
	auth, _ := rd.ReadString('\n')
	pong, err := rd.ReadString('\n')
	return strings.HasPrefix(pong, "+PONG"), fmt.Errorf("redis: AUTH %q PING %q %w", strings.TrimSpace(auth), strings.TrimSpace(pong), err)
}

// Stop ends redis-server.
func (r *Redis) Stop() error { return r.proc.Stop(10 * time.Second) }

// GitRepo commits the trees under srcs (each copied to the repository's root,
// later ones over earlier ones) into a new repository at dir and returns its
// file:// URL and the commit. Argo CD's repo-server clones it like any remote.
func GitRepo(dir string, srcs ...string) (url, commit string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	for _, src := range srcs {
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			return "", "", fmt.Errorf("copy %s: %w", src, err)
		}
	}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com",
			"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "e2e"}} {
		if _, err := git(args...); err != nil {
			return "", "", err
		}
	}
	commit, err = git("rev-parse", "HEAD")
	if err != nil {
		return "", "", err
	}
	return "file://" + dir, commit, nil
}
