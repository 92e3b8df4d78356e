package harness

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// CreateServiceAccount creates ns/name unless it exists: what an install
// (Argo CD's manifests, argo-helm's chart, the operator) creates for the
// workloads that name it, without which their pods are refused.
func (c *Client) CreateServiceAccount(ns, name string) error {
	sa := map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": name}}
	err := c.Do(http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts", nil, sa, nil)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusConflict {
		return nil
	}
	return err
}

// PodToken issues the token a projected serviceAccountToken source of pod
// asks for, as the kubelet does: from the TokenRequest API for the pod's
// ServiceAccount, with the source's audience (none: the apiserver's) and
// lifetime, bound to the stored pod so it dies with it.
func (c *Client) PodToken(pod *corev1.Pod, src *corev1.ServiceAccountTokenProjection) (string, error) {
	spec := map[string]any{}
	if src.Audience != "" {
		spec["audiences"] = []string{src.Audience}
	}
	if src.ExpirationSeconds != nil {
		spec["expirationSeconds"] = *src.ExpirationSeconds
	}
	if pod.UID != "" {
		spec["boundObjectRef"] = map[string]any{"apiVersion": "v1", "kind": "Pod", "name": pod.Name, "uid": string(pod.UID)}
	}
	return c.requestToken(pod.Namespace, pod.Spec.ServiceAccountName, spec)
}

// requestToken asks the TokenRequest API for a token of ns/name.
func (c *Client) requestToken(ns, name string, spec map[string]any) (string, error) {
	req := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
	var resp struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := c.Do(http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts/"+name+"/token", nil, req, &resp); err != nil {
		return "", fmt.Errorf("token for service account %s/%s: %w", ns, name, err)
	}
	return resp.Status.Token, nil
}

// ServiceAccountKubeconfig writes a kubeconfig to path that authenticates as
// the service account ns/name with a token from the apiserver's TokenRequest
// API: what the kubelet mounts in a pod of that account, so a booted process
// has exactly the rights its RBAC gives it.
func (c *Client) ServiceAccountKubeconfig(ns, name, path string) error {
	token, err := c.requestToken(ns, name, map[string]any{"expirationSeconds": 3600})
	if err != nil {
		return err
	}
	return writeKubeconfig(path, c.base, c.caFile, name, token, ns)
}
