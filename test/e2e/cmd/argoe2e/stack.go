package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// Argo CD's fixture's names: its namespace, the namespaces Applications may
// live in, and the admin password its test manifests set.
const (
	argoNamespace = "argocd-e2e"
	redisPassword = "argoe2e-redis"
)

var appNamespaces = []string{"argocd-e2e-external", "argocd-e2e-external-2"}

// stack is everything the tests talk to.
type stack struct {
	root, work  string
	src         string // the copy: test/ of Argo CD's module, and dist/
	e2eDir      string // ARGOCD_E2E_DIR
	kubeconfig  string
	kubeVersion string
	argocd      string // the release's multi-call binary
	cmpServer   string // ours, built for this run
	e2eTest     string
	apiAddr     string
	goremanPort int
	cp          *harness.ControlPlane
	redis       *harness.Redis
	goreman     *harness.Process
	git         []*harness.Process // fcgiwrap, nginx, sshd
	logf        *os.File
}

func startStack(ctx context.Context, root, work, src string, rel harness.ArgoRelease) (*stack, error) {
	s := &stack{root: root, work: work, src: filepath.Join(work, "src"), e2eDir: filepath.Join(work, "e2e")}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("needs root: Argo CD's fixture clones over ssh://root@localhost:%d, and sshd logs root in only when it runs as root", gitSSHPort)
	}
	var err error
	if s.logf, err = os.Create(filepath.Join(work, "processes.log")); err != nil {
		return nil, err
	}
	for name, dst := range map[string]*string{"argo-e2e.test": &s.e2eTest, rel.Tool: &s.argocd} {
		if *dst, err = harness.Tool(name); err != nil {
			return s, err
		}
	}
	for _, t := range []string{"kubectl", "goreman", "kustomize", "helm", "redis-server", "nginx", "fcgiwrap", "sshd", "gpg"} {
		if _, err := harness.Tool(t); err != nil {
			return s, err
		}
	}
	// The fixture's git URLs and known hosts name these ports.
	for _, port := range []int{gitSSHPort, gitHTTPSPort, gitClientCertPort} {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return s, fmt.Errorf("port %d, which Argo CD's fixture's git URLs name, is taken: %w", port, err)
		}
		l.Close()
	}
	// Their tests write next to their package: a copy of it.
	if err := os.MkdirAll(filepath.Join(s.src, "dist"), 0o755); err != nil {
		return s, err
	}
	if out, err := exec.Command("cp", "-R", filepath.Join(src, "test"), s.src).CombinedOutput(); err != nil {
		return s, fmt.Errorf("copy Argo CD's test dir: %w\n%s", err, out)
	}
	if out, err := exec.Command("chmod", "-R", "u+w", s.src).CombinedOutput(); err != nil {
		return s, fmt.Errorf("chmod: %w\n%s", err, out)
	}
	if err := restoreZipLosses(s.src); err != nil {
		return s, err
	}
	if err := writeShims(filepath.Join(work, "shims")); err != nil {
		return s, err
	}
	bins, err := harness.BuildBinaries(ctx, filepath.Join(work, "bin"), "cmp-server")
	if err != nil {
		return s, err
	}
	s.cmpServer = bins["cmp-server"]

	if s.cp, err = harness.StartControlPlane(filepath.Join(work, "cp"), s.logf); err != nil {
		return s, err
	}
	if s.kubeVersion, err = s.cp.Version(); err != nil {
		return s, err
	}
	s.kubeconfig = filepath.Join(work, "kubeconfig")
	if err := s.cp.WriteKubeconfigIn(s.kubeconfig, argoNamespace); err != nil {
		return s, err
	}
	c := s.cp.Client()
	for _, ns := range append([]string{argoNamespace}, appNamespaces...) {
		if err := c.CreateNamespace(ns, nil); err != nil {
			return s, err
		}
	}
	if err := s.applyTestManifests(src); err != nil {
		return s, err
	}
	for _, d := range []string{"app/config/tls", "app/config/ssh", "app/config/gpg/source", "app/config/gpg/keys", "app/config/plugin"} {
		if err := os.MkdirAll(filepath.Join(s.e2eDir, d), 0o700); err != nil {
			return s, err
		}
	}
	if s.redis, err = harness.StartRedis(filepath.Join(work, "redis"), redisPassword, s.logf); err != nil {
		return s, err
	}
	if err := s.startArgoCD(); err != nil {
		return s, err
	}
	if err := s.startGitServer(); err != nil {
		return s, err
	}
	return s, nil
}

// applyTestManifests applies what Argo CD's start-e2e-local applies:
// `kustomize build test/manifests/base` of the module (CRDs, argocd-cm,
// argocd-secret with the admin password the fixture logs in with, RBAC) into
// the fixture's namespace. The notifications controller's Deployment,
// Service and NetworkPolicy are left out: nothing runs their pods here.
func (s *stack) applyTestManifests(src string) error {
	kustomize, _ := harness.Tool("kustomize")
	out, err := exec.Command(kustomize, "build", filepath.Join(src, "test", "manifests", "base")).Output()
	if err != nil {
		return fmt.Errorf("kustomize build test/manifests/base: %w", err)
	}
	c := s.cp.Client()
	var crds []string
	for i, doc := range strings.Split(string(out), "\n---\n") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return err
		}
		switch obj["kind"] {
		case "CustomResourceDefinition":
			f := filepath.Join(s.work, fmt.Sprintf("crd-%d.yaml", i))
			if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
				return err
			}
			crds = append(crds, f)
		case "Deployment", "Service", "NetworkPolicy":
			// The notifications controller's: nothing runs its pods here.
		default:
			if err := c.ApplyObject(argoNamespace, obj); err != nil {
				return err
			}
		}
	}
	return c.InstallCRDs(crds...)
}

// procfileNames are the names Argo CD's Procfile gives its processes, which
// the fixture asks goreman about.
var procfileNames = map[string]string{
	"argocd-server": "api-server", "argocd-application-controller": "controller",
	"argocd-repo-server": "repo-server", "argocd-commit-server": "commit-server",
}

// startArgoCD runs the API server, the application controller, the
// repo-server and the commit server under goreman, with the settings Argo
// CD's Makefile (start-e2e-local) and Procfile give them, on free loopback
// ports; the API server and the controller as the suite runs them
// (harness.ArgoServers).
func (s *stack) startArgoCD() error {
	ports := map[string]int{}
	for _, n := range []string{"repo", "repo-metrics", "commit", "commit-metrics", "goreman"} {
		p, err := harness.FreePort()
		if err != nil {
			return err
		}
		ports[n] = p
	}
	s.goremanPort = ports["goreman"]
	repoAddr := "127.0.0.1:" + strconv.Itoa(ports["repo"])
	commitAddr := "127.0.0.1:" + strconv.Itoa(ports["commit"])
	cfg := func(p string) string { return filepath.Join(s.e2eDir, "app", "config", p) }
	imageBin, err := harness.ArgoImageBin(s.argocd)
	if err != nil {
		return err
	}
	common := []string{
		"ARGOCD_E2E_TEST=true", "ARGOCD_TLS_DATA_PATH=" + cfg("tls"), "ARGOCD_SSH_DATA_PATH=" + cfg("ssh"),
		"ARGOCD_CLUSTER_CACHE_EVENTS_PROCESSING_INTERVAL=1ms",
		// The source hydrator (its test renders through a plugin) and the
		// commit server it pushes with, as start-e2e-local turns them on.
		"ARGOCD_HYDRATOR_ENABLED=true",
	}
	appNS := []string{"--application-namespaces", strings.Join(appNamespaces, ","), "--hydrator-enabled"}
	server, controller, addr, err := harness.ArgoServers(s.argocd, harness.ArgoServerOptions{
		Namespace: argoNamespace, RepoServer: repoAddr, Redis: s.redis.Addr, RedisPassword: redisPassword,
		// Outside ARGOCD_E2E_DIR, which the fixture empties before each test.
		Kubeconfig: s.kubeconfig, Dir: filepath.Join(s.work, "argocd"),
		// Debug, as Argo CD's Procfile runs them: the log is the work dir's.
		LogLevel: "debug", Env: common,
		ServerArgs:     append([]string{"--disable-auth=false"}, appNS...),
		ControllerArgs: append([]string{"--commit-server", commitAddr}, appNS...),
	})
	if err != nil {
		return err
	}
	s.apiAddr = addr
	// The repo-server and the commit server run git: the image's scripts,
	// bin/'s tools and dist/ (the fixture's argocd) on PATH, the fixture's
	// git config.
	gitEnv := append(slices.Clone(common),
		"PATH="+filepath.Join(s.src, "dist")+":"+imageBin+":"+filepath.Join(s.root, "bin")+":"+os.Getenv("PATH"),
		"GIT_CONFIG_GLOBAL="+filepath.Join(s.src, "test", "e2e", "fixture", "gitconfig"), "GIT_CONFIG_NOSYSTEM=1",
		"REDIS_PASSWORD="+redisPassword, "HOME="+filepath.Join(s.work, "argocd"),
		"ARGOCD_FAKE_IN_CLUSTER=true", "KUBECONFIG="+s.kubeconfig)
	logFlags := []string{"--loglevel", "debug", "--logformat", "text"}
	procs := []harness.ArgoProcess{server, controller,
		{Name: "argocd-repo-server",
			Env: append(gitEnv[:len(gitEnv):len(gitEnv)], "ARGOCD_BINARY_NAME=argocd-repo-server",
				"ARGOCD_GNUPGHOME="+cfg("gpg/keys"), "ARGOCD_GPG_DATA_PATH="+cfg("gpg/source"), "ARGOCD_GPG_ENABLED=false",
				"ARGOCD_PLUGINSOCKFILEPATH="+cfg("plugin"), "ARGOCD_PLUGINCONFIGFILEPATH="+cfg("plugin")),
			Argv: append([]string{s.argocd, "--address", "127.0.0.1", "--port", strconv.Itoa(ports["repo"]),
				"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(ports["repo-metrics"]), "--redis", s.redis.Addr}, logFlags...),
			Health: "http://127.0.0.1:" + strconv.Itoa(ports["repo-metrics"]) + "/healthz"},
		{Name: "argocd-commit-server",
			Env: append(gitEnv[:len(gitEnv):len(gitEnv)], "ARGOCD_BINARY_NAME=argocd-commit-server"),
			Argv: append([]string{s.argocd, "--address", "127.0.0.1", "--port", strconv.Itoa(ports["commit"]),
				"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(ports["commit-metrics"])}, logFlags...),
			Health: "http://127.0.0.1:" + strconv.Itoa(ports["commit-metrics"]) + "/healthz"},
	}
	var procfile strings.Builder
	for _, p := range procs {
		words := append(append([]string{"exec", "env"}, p.Env...), p.Argv...)
		for i, w := range words {
			words[i] = shellQuote(w)
		}
		fmt.Fprintf(&procfile, "%s: %s\n", procfileNames[p.Name], strings.Join(words, " "))
	}
	pf := filepath.Join(s.work, "Procfile")
	if err := os.WriteFile(pf, []byte(procfile.String()), 0o644); err != nil {
		return err
	}
	goreman, _ := harness.Tool("goreman")
	s.goreman, err = harness.Start("goreman", []string{goreman, "-f", pf, "-set-ports=false", "-logtime=false", "start"},
		[]string{"GOREMAN_RPC_PORT=" + strconv.Itoa(s.goremanPort)}, s.src, s.logf)
	if err != nil {
		return err
	}
	for _, p := range procs {
		if err := s.goreman.WaitHTTPOK("goreman (waiting for "+p.Name+")", p.Health, 120*time.Second, 200*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// usePluginServer makes dist/argocd, which the fixture runs as the CLI and
// (ARGOCD_BINARY_NAME=argocd-cmp-server) as the plugin server, Argo CD's
// binary ("argo") or a dispatcher that runs our cmp-server under that name
// and Argo CD's binary under every other ("ours").
func (s *stack) usePluginServer(server string) error {
	dist := filepath.Join(s.src, "dist", "argocd")
	_ = os.Remove(dist)
	switch server {
	case "argo":
		return os.Symlink(s.argocd, dist)
	case "ours":
		script := fmt.Sprintf("#!/bin/sh\n# The plugin server the fixture starts is ours; the CLI is Argo CD's.\n"+
			"if [ \"$ARGOCD_BINARY_NAME\" = argocd-cmp-server ]; then exec %s \"$@\"; fi\nexec %s \"$@\"\n",
			shellQuote(s.cmpServer), shellQuote(s.argocd))
		return os.WriteFile(dist, []byte(script), 0o755)
	}
	return fmt.Errorf("unknown plugin server %q (want argo or ours)", server)
}

// testEnv is the environment of Argo CD's test binary. Their CI gives git an
// identity in its global config; here the environment does.
func (s *stack) testEnv() []string {
	ssh := "ssh://root@localhost:" + strconv.Itoa(gitSSHPort) + s.e2eDir
	return []string{
		"GIT_AUTHOR_NAME=argo-e2e", "GIT_AUTHOR_EMAIL=argo-e2e@example.com",
		"GIT_COMMITTER_NAME=argo-e2e", "GIT_COMMITTER_EMAIL=argo-e2e@example.com",
		"KUBECONFIG=" + s.kubeconfig, "ARGOCD_SERVER=" + s.apiAddr, "ARGOCD_E2E_DIR=" + s.e2eDir,
		"ARGOCD_E2E_REPO_SSH=" + ssh + "/testdata.git", "ARGOCD_E2E_REPO_SSH_SUBMODULE=" + ssh + "/submodule.git",
		"ARGOCD_E2E_REPO_SSH_SUBMODULE_PARENT=" + ssh + "/submoduleParent.git",
		"GOREMAN_RPC_PORT=" + strconv.Itoa(s.goremanPort),
		"PATH=" + filepath.Join(s.work, "shims") + ":" + filepath.Join(s.root, "bin") + ":" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(s.work, "home"),
	}
}

// stop ends everything, goreman's processes included: goreman stops them on
// SIGTERM; any it leaves (each runs in its own process group) are killed by
// group.
func (s *stack) stop() {
	if s.goreman != nil {
		children := childrenOf(s.goreman.PID())
		_ = s.goreman.Stop(20 * time.Second)
		for _, pid := range children {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	for i := len(s.git) - 1; i >= 0; i-- {
		_ = s.git[i].Stop(10 * time.Second)
	}
	if s.redis != nil {
		_ = s.redis.Stop()
	}
	if s.cp != nil {
		s.cp.Stop()
	}
	if s.logf != nil {
		s.logf.Close()
	}
}

// childrenOf lists the processes whose parent is pid (each of its threads
// keeps the children it started in /proc/<pid>/task/<tid>/children).
func childrenOf(pid int) []int {
	var out []int
	files, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(field); err == nil {
				out = append(out, child)
			}
		}
	}
	return out
}

// zipLosses are what Argo CD's repository holds under test/e2e that its
// module zip cannot: a Go module zip keeps neither symbolic links nor file
// modes (golang.org/x/mod/zip), so the module proxy's copy lacks the
// symlinked test trees of testdata2 and script.sh's executable bit, which
// the plugin tests of symlinks and preserveFileMode use. Read from the
// repository (git ls-tree: modes 120000 and 100755) and restored in the copy
// as it has them; the tests themselves are not touched.
var zipLosses = []struct{ path, symlink string }{
	{path: "test/e2e/testdata/cmp-preserve-file-mode/script.sh"}, // 100755
	{"test/e2e/testdata2/guestbook-partial-symlink-files/guestbook-ui-deployment.yaml", "../guestbook/guestbook-ui-deployment.yaml"},
	{"test/e2e/testdata2/guestbook-symlink-files/guestbook-ui-deployment.yaml", "../guestbook/guestbook-ui-deployment.yaml"},
	{"test/e2e/testdata2/guestbook-symlink-files/guestbook-ui-svc.yaml", "../guestbook/guestbook-ui-svc.yaml"},
	{"test/e2e/testdata2/guestbook-symlink-files/kustomization.yaml", "../guestbook/kustomization.yaml"},
	{"test/e2e/testdata2/guestbook-symlink-folder", "guestbook"},
}

func restoreZipLosses(src string) error {
	for _, l := range zipLosses {
		p := filepath.Join(src, l.path)
		if l.symlink == "" {
			if err := os.Chmod(p, 0o755); err != nil {
				return fmt.Errorf("restore the executable bit of %s: %w", l.path, err)
			}
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists in the module: the zip is not what this list says", l.path)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(l.symlink, p); err != nil {
			return err
		}
	}
	return nil
}

// writeShims writes the commands first on the tests' PATH: their fixture
// runs `pkill -9 gpg-agent` before each test, which would reach every
// gpg-agent on the machine; the shim limits pkill to the test binary's own
// process group.
func writeShims(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	pkill, err := exec.LookPath("pkill")
	if err != nil {
		return fmt.Errorf("pkill (procps), which Argo CD's fixture runs: %w", err)
	}
	script := "#!/bin/sh\n# pkill within the test binary's process group only.\n" +
		"exec " + shellQuote(pkill) + " -g \"$(ps -o pgid= -p $$ | tr -d ' ')\" \"$@\"\n"
	return os.WriteFile(filepath.Join(dir, "pkill"), []byte(script), 0o755)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
