package harness

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Vault is a HashiCorp Vault server in dev mode (bin/vault, built by
// `hack/tools.sh vault` for the tests only: Vault is BUSL-1.1 and never
// shipped), listening on loopback, with kv-v2 at secret/ as dev mode mounts
// it. The harness talks to its HTTP API with net/http: the project does not
// depend on Vault's Go API.
type Vault struct {
	Addr string // http://127.0.0.1:<port>
	root string // the dev server's root token, random per run
	proc *Process
	http *http.Client
}

// VaultAudience is the audience the plugin's projected token is issued for and
// the Kubernetes auth roles demand (deploy/plugins/catalog.yaml's helmfile).
const VaultAudience = "vault"

// VaultEnv turns on the tests that need a Vault server: make e2e, e2e-node and
// e2e-vault build Vault (hack/tools.sh vault) and set it. A plain go test (make
// unit, or the matrix's runs on other versions) has no Vault and skips them,
// saying how to run them; where it is set, a missing bin/vault fails them.
const VaultEnv = "E2E_VAULT"

// RequireVault skips a Vault test unless VaultEnv is set, saying how to run
// it, and fails it when it is set and bin/vault is missing.
func RequireVault(t testing.TB, bin string) {
	t.Helper()
	if os.Getenv(VaultEnv) != "1" {
		t.Skipf("needs a Vault server: run make e2e-vault (sets %s=1)", VaultEnv)
	}
	if _, err := os.Stat(filepath.Join(bin, "vault")); err != nil {
		t.Fatalf("vault not found in %s: run hack/tools.sh vault", bin)
	}
}

// StartVault starts `vault server -dev` in dir and waits until it is
// initialized, unsealed and active. The root token is random and never
// written to a file (-dev-no-store-token; HOME is dir besides).
func StartVault(dir string, logTo io.Writer) (_ *Vault, err error) {
	bin, err := Tool("vault")
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
	buf := make([]byte, 16)
	if _, err := rand.Read(buf); err != nil {
		return nil, err
	}
	v := &Vault{
		Addr: "http://127.0.0.1:" + strconv.Itoa(port),
		root: "root-" + hex.EncodeToString(buf),
		http: &http.Client{Timeout: 30 * time.Second},
	}
	// VAULT_* of the environment (an address, a token) would steer the
	// server's own client: cleared.
	v.proc, err = Start("vault", []string{bin, "server", "-dev", "-dev-no-store-token",
		"-dev-root-token-id=" + v.root, "-dev-listen-address=127.0.0.1:" + strconv.Itoa(port)},
		[]string{"HOME=" + dir, "VAULT_ADDR=", "VAULT_TOKEN="}, dir, logTo)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			v.Stop()
		}
	}()
	// sys/health answers 200 only when initialized, unsealed and active.
	if err := v.proc.WaitHTTPOK("vault", v.Addr+"/v1/sys/health", 60*time.Second, 100*time.Millisecond); err != nil {
		return nil, err
	}
	return v, nil
}

// Stop ends the server; a dev server keeps everything in memory, so nothing
// of it outlives the process.
func (v *Vault) Stop() {
	if v.proc != nil {
		_ = v.proc.Stop(10 * time.Second)
	}
}

// Output is what the server printed.
func (v *Vault) Output() string { return v.proc.Output() }

// call sends one API request with the root token; out may be nil.
func (v *Vault) call(method, path string, in, out any) error {
	err := callJSON(v.http, method, v.Addr+"/v1/"+path, http.Header{"X-Vault-Token": {v.root}}, in, out)
	var se *statusError
	if errors.As(err, &se) {
		// Vault's errors name paths and reasons, never stored values.
		return fmt.Errorf("vault %s %s: %s: %s", method, path, se.Status, strings.TrimSpace(string(se.Body)))
	}
	return err
}

// PutSecret writes data as the current version of secret/<path> (kv-v2,
// mounted at secret/ by dev mode), which vals reads as ref+vault://secret/<path>.
func (v *Vault) PutSecret(path string, data map[string]string) error {
	return v.call(http.MethodPost, "secret/data/"+path, map[string]any{"data": data}, nil)
}

// vaultReviewer is the ServiceAccount whose token Vault sends the apiserver's
// TokenReview with, bound to system:auth-delegator as Vault's Kubernetes
// auth documentation has it.
const vaultReviewer = "vault-token-reviewer"

// EnableKubernetesAuth enables auth/kubernetes and points it at c's apiserver:
// its URL and CA, and the token of a reviewer ServiceAccount created in ns
// (with its ClusterRoleBinding to system:auth-delegator) through c, so every
// login is a TokenReview by the real apiserver.
func (v *Vault) EnableKubernetesAuth(c *Client, ns string) error {
	if err := c.CreateServiceAccount(ns, vaultReviewer); err != nil {
		return err
	}
	crb := map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": vaultReviewer + "-" + ns},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": vaultReviewer, "namespace": ns}},
	}
	if err := c.Apply("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", vaultReviewer+"-"+ns, crb); err != nil {
		return err
	}
	reviewer, err := c.requestToken(ns, vaultReviewer, map[string]any{"expirationSeconds": 3600})
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(c.caFile)
	if err != nil {
		return fmt.Errorf("the apiserver's CA: %w", err)
	}
	if err := v.call(http.MethodPost, "sys/auth/kubernetes", map[string]any{"type": "kubernetes"}, nil); err != nil {
		return err
	}
	return v.call(http.MethodPost, "auth/kubernetes/config", map[string]any{
		"kubernetes_host":    c.base,
		"kubernetes_ca_cert": string(ca),
		"token_reviewer_jwt": reviewer,
		// Not a pod: no local service-account files to fall back to.
		"disable_local_ca_jwt": true,
	}, nil)
}

// KubernetesRole creates the policy <role> reading secret/<path> for each of
// paths, and the Kubernetes auth role <role> that grants it to tokens of the
// ServiceAccount ns/account issued for audience.
func (v *Vault) KubernetesRole(role, ns, account, audience string, paths ...string) error {
	if err := v.readPolicy(role, paths); err != nil {
		return err
	}
	return v.call(http.MethodPost, "auth/kubernetes/role/"+role, map[string]any{
		"bound_service_account_names":      []string{account},
		"bound_service_account_namespaces": []string{ns},
		"audience":                         audience,
		"token_policies":                   []string{role},
		"token_ttl":                        "10m",
	}, nil)
}

// ReadToken is a Vault token of the policy name, created to read
// secret/<path> for each of paths: Vault's token auth, for a plugin test
// without an apiserver to review Kubernetes tokens.
func (v *Vault) ReadToken(name string, paths ...string) (string, error) {
	if err := v.readPolicy(name, paths); err != nil {
		return "", err
	}
	var resp struct {
		Auth struct {
			ClientToken string `json:"client_token"`
		} `json:"auth"`
	}
	if err := v.call(http.MethodPost, "auth/token/create", map[string]any{"policies": []string{name}, "ttl": "10m"}, &resp); err != nil {
		return "", err
	}
	return resp.Auth.ClientToken, nil
}

// readPolicy writes the ACL policy name: read on secret/<path> (kv-v2's
// data/ path) for each of paths.
func (v *Vault) readPolicy(name string, paths []string) error {
	var policy strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&policy, "path %q {\n  capabilities = [\"read\"]\n}\n", "secret/data/"+p)
	}
	return v.call(http.MethodPut, "sys/policies/acl/"+name, map[string]any{"policy": policy.String()}, nil)
}
