package harness

import (
	"fmt"
	"net/http"
	"time"
)

// DefaultServiceAccount is the account the ServiceAccount admission plugin
// gives a pod that names none; kube-controller-manager creates it in every
// namespace.
const DefaultServiceAccount = "default"

// WaitServiceAccount waits until ns/name exists. With the ServiceAccount
// admission plugin on, a pod of an account that does not exist yet is refused
// (for default, after the plugin's own second of retries), so a test that
// creates pods right after its namespace waits here first, as a client of a
// real cluster would have to.
func (c *Client) WaitServiceAccount(ns, name string, timeout time.Duration) error {
	err := Eventually(timeout, 20*time.Millisecond, func() (bool, error) {
		err := c.Get("/api/v1/namespaces/"+ns+"/serviceaccounts/"+name, nil)
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("service account %s/%s: %w", ns, name, err)
	}
	return nil
}

// ServiceAccountKubeconfig writes a kubeconfig to path that authenticates as
// the service account ns/name with a token from the apiserver's TokenRequest
// API: what the kubelet mounts in a pod of that account, so a booted process
// has exactly the rights its RBAC gives it.
func (c *Client) ServiceAccountKubeconfig(ns, name, path string) error {
	req := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": map[string]any{"expirationSeconds": 3600}}
	var resp struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := c.Do(http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts/"+name+"/token", nil, req, &resp); err != nil {
		return fmt.Errorf("token for service account %s/%s: %w", ns, name, err)
	}
	return writeKubeconfig(path, c.base, c.caFile, name, resp.Status.Token, ns)
}
