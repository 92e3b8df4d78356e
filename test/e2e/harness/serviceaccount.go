package harness

import (
	"fmt"
	"net/http"
)

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
