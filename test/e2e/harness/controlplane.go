package harness

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ControlPlane is a real etcd, kube-apiserver and kube-controller-manager (its
// workload, garbage-collector and service-account controllers) on loopback. There
// is no scheduler or kubelet: pods are created and stored, never scheduled;
// the suite boots the ones it needs itself (BootPod).
type ControlPlane struct {
	Dir         string
	URL         string // https://127.0.0.1:<port>
	Token       string // bearer token of a system:masters user
	CAFile      string // the apiserver's self-signed serving bundle
	Kubeconfig  string // admin kubeconfig, for helm and the controllers
	etcd        *Process
	apiserver   *Process
	controllers *Process
}

// StartControlPlane starts etcd and kube-apiserver from bin/ in dir and waits
// until /readyz answers 200. logTo receives both processes' output (may be nil).
// The kube-apiserver is APIServerTool's, with APIServerArgs.
func StartControlPlane(dir string, logTo io.Writer) (_ *ControlPlane, err error) {
	return StartControlPlaneWith(dir, logTo, ControlPlaneOptions{})
}

// ControlPlaneOptions choose the API server of StartControlPlaneWith.
type ControlPlaneOptions struct {
	// APIServer is the bin/ name of the kube-apiserver (kube-apiserver-1.32);
	// its kube-controller-manager is the same name's. Empty: APIServerTool().
	APIServer string
	// APIServerArgs are added to kube-apiserver's flags, e.g.
	// --feature-gates=SidecarContainers=false. Nil: APIServerArgs().
	APIServerArgs []string
}

// StartControlPlaneWith is StartControlPlane with another API server or flags
// (a test that needs a feature gate turned off starts a control plane of its own).
func StartControlPlaneWith(dir string, logTo io.Writer, o ControlPlaneOptions) (_ *ControlPlane, err error) {
	if o.APIServer == "" {
		o.APIServer = APIServerTool()
	}
	if o.APIServerArgs == nil {
		o.APIServerArgs = APIServerArgs()
	}
	etcdBin, err := Tool("etcd")
	if err != nil {
		return nil, err
	}
	kasBin, err := Tool(o.APIServer)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cp := &ControlPlane{Dir: dir, Token: "e2e-admin-token"}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()

	clientPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	cp.etcd, err = Start("etcd", []string{etcdBin,
		"--name=e2e", "--data-dir=" + filepath.Join(dir, "etcd"),
		"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=e2e=" + peer, "--log-level=warn",
	}, nil, dir, logTo)
	if err != nil {
		return nil, err
	}
	if err := Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
		if done, werr := cp.etcd.Exited(); done {
			return false, Final(fmt.Errorf("etcd exited: %w\n%s", werr, cp.etcd.Output()))
		}
		resp, err := http.Get(client + "/health")
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == 200, fmt.Errorf("etcd /health: %s", resp.Status)
	}); err != nil {
		return nil, err
	}

	saKey := filepath.Join(dir, "sa.key")
	saPub := filepath.Join(dir, "sa.pub")
	if err := writeServiceAccountKeys(saKey, saPub); err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "tokens.csv")
	// A second user with no rights but those RBAC gives it (PodEditor).
	users := cp.Token + ",admin,admin-uid,system:masters\n" + podEditorToken + "," + PodEditor + ",pod-editor-uid\n"
	if err := os.WriteFile(tokens, []byte(users), 0o600); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "apiserver-certs")
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	cp.CAFile = filepath.Join(certDir, "apiserver.crt")
	cp.apiserver, err = Start("kube-apiserver", append([]string{kasBin,
		"--etcd-servers=" + client,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		// From v1.37 the endpoint reconciler refuses a loopback advertise
		// address; nothing here reads the kubernetes Service's endpoints
		// (every client dials the URL below), so none keeps them.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(port), "--cert-dir=" + certDir,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saPub, "--service-account-signing-key-file=" + saKey,
		"--token-auth-file=" + tokens, "--authorization-mode=RBAC",
		// The default admission plugins, ServiceAccount included, as on a
		// real cluster: a pod gets its ServiceAccount, and its token volume
		// where it automounts one, before and after the webhooks change it.
		// The controller-manager creates each namespace's default account.
		"--allow-privileged=true", "--v=0",
	}, o.APIServerArgs...), nil, dir, logTo)
	if err != nil {
		return nil, err
	}
	hc := cp.HTTPClient()
	if err := Eventually(90*time.Second, 50*time.Millisecond, func() (bool, error) {
		if done, werr := cp.apiserver.Exited(); done {
			return false, Final(fmt.Errorf("kube-apiserver exited: %w\n%s", werr, tail(cp.apiserver.Output(), 4000)))
		}
		req, _ := http.NewRequest("GET", cp.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+cp.Token)
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		// A failing /readyz still prints "ok" lines: only the status code counts.
		return resp.StatusCode == 200, fmt.Errorf("kube-apiserver /readyz: %s", resp.Status)
	}); err != nil {
		return nil, err
	}
	if err := cp.startControllerManager(controllerManagerFor(o.APIServer), saKey, logTo); err != nil {
		return nil, err
	}
	// A pod in a namespace without its default ServiceAccount is refused:
	// the suite starts once the controllers have made default's.
	if err := cp.Client().WaitServiceAccount("default", DefaultServiceAccount, 60*time.Second); err != nil {
		return nil, err
	}
	return cp, nil
}

// AttachControlPlane is a control plane another process started (URL, admin
// token and CA file): the end-to-end suite's child that a test kills uses it.
func AttachControlPlane(url, token, caFile string) *ControlPlane {
	return &ControlPlane{URL: url, Token: token, CAFile: caFile}
}

// PodEditor is a user the apiserver knows with no rights of its own: tests
// grant it what they need with RBAC (ClientAs).
const PodEditor = "pod-editor"

const podEditorToken = "e2e-pod-editor-token"

// ClientAs is a REST client authenticated as PodEditor.
func (cp *ControlPlane) ClientAs(user string) *Client {
	if user != PodEditor {
		panic("unknown user " + user)
	}
	return &Client{base: cp.URL, token: podEditorToken, http: cp.HTTPClient()}
}

// APIServerTool is the bin/ name of the kube-apiserver to run: E2E_KUBE_APISERVER
// (e.g. kube-apiserver-1.32) or kube-apiserver, the newest pinned version.
func APIServerTool() string {
	if v := os.Getenv("E2E_KUBE_APISERVER"); v != "" {
		return v
	}
	return "kube-apiserver"
}

// APIServerArgs are E2E_KUBE_APISERVER_ARGS split at white space: flags the
// version matrix gives one cell's kube-apiserver, such as
// --feature-gates=SidecarContainers=true for v1.28 with native sidecars.
func APIServerArgs() []string {
	return strings.Fields(os.Getenv("E2E_KUBE_APISERVER_ARGS"))
}

// HTTPClient trusts the apiserver's self-signed bundle once it exists; before
// that (while it starts) it skips verification, which only the readiness poll uses.
func (cp *ControlPlane) HTTPClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{
			MinVersion:         tls.VersionTLS12,
			InsecureSkipVerify: !fileExists(cp.CAFile),
			RootCAs:            loadPool(cp.CAFile),
		}},
	}
}

// Stop ends kube-controller-manager, kube-apiserver, then etcd.
func (cp *ControlPlane) Stop() {
	if cp.controllers != nil {
		_ = cp.controllers.Stop(10 * time.Second)
	}
	if cp.apiserver != nil {
		_ = cp.apiserver.Stop(10 * time.Second)
	}
	if cp.etcd != nil {
		_ = cp.etcd.Stop(10 * time.Second)
	}
}

// Version is the apiserver's gitVersion.
func (cp *ControlPlane) Version() (string, error) {
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := cp.Client().Get("/version", &v); err != nil {
		return "", err
	}
	return v.GitVersion, nil
}

func writeServiceAccountKeys(keyFile, pubFile string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func loadPool(p string) *x509.CertPool {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	return pool
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
