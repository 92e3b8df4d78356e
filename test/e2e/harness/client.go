package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Client is a small REST client for the handful of calls the tests make; the
// project does not depend on client-go. It is also the kubelet's view of the
// apiserver when a pod is booted (BootOptions.Objects).
type Client struct {
	base   string
	token  string
	http   *http.Client
	caFile string // the apiserver's CA, for kubeconfigs the client writes
}

// Client returns a REST client authenticated as a cluster admin.
func (cp *ControlPlane) Client() *Client {
	return &Client{base: cp.URL, token: cp.Token, http: cp.HTTPClient(), caFile: cp.CAFile}
}

// APIError is a non-2xx answer; Message is the apiserver's Status message, which
// is what a user sees (for a denial: the webhook's message).
type APIError struct {
	Code    int
	Reason  string
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("%d %s: %s", e.Code, e.Reason, e.Message) }

// Do sends a JSON request and decodes a JSON answer into out (when non-nil).
// PATCH bodies are merge patches.
func (c *Client) Do(method, path string, query url.Values, in, out any) error {
	ct := "application/json"
	if method == http.MethodPatch {
		ct = "application/merge-patch+json"
	}
	return c.do(method, path, query, in, out, ct)
}

func (c *Client) do(method, path string, query url.Values, in, out any, contentType string) error {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	h := http.Header{"Authorization": {"Bearer " + c.token}, "Accept": {"application/json"}}
	if in != nil {
		h.Set("Content-Type", contentType)
	}
	err := callJSON(c.http, method, u, h, in, out)
	var se *statusError
	if !errors.As(err, &se) {
		return err
	}
	var st metav1.Status
	if json.Unmarshal(se.Body, &st) == nil && st.Message != "" {
		return &APIError{Code: se.Code, Reason: string(st.Reason), Message: st.Message}
	}
	return &APIError{Code: se.Code, Reason: se.Status, Message: string(se.Body)}
}

// Get decodes GET path into out.
func (c *Client) Get(path string, out any) error { return c.Do(http.MethodGet, path, nil, nil, out) }

// CreateNamespace creates a namespace with labels and waits until it has its
// default ServiceAccount, so pods can be created in it.
func (c *Client) CreateNamespace(name string, labels map[string]string) error {
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	}
	if err := c.Do(http.MethodPost, "/api/v1/namespaces", nil, ns, nil); err != nil {
		return err
	}
	return c.WaitServiceAccount(name, DefaultServiceAccount, 30*time.Second)
}

// CreatePod creates pod in ns and returns what the apiserver answered; with
// dryRun the apiserver runs admission but stores nothing.
func (c *Client) CreatePod(ns string, pod *corev1.Pod, dryRun bool) (*corev1.Pod, error) {
	q := url.Values{}
	if dryRun {
		q.Set("dryRun", "All")
	}
	pod.APIVersion, pod.Kind = "v1", "Pod"
	out := &corev1.Pod{}
	if err := c.Do(http.MethodPost, "/api/v1/namespaces/"+ns+"/pods", q, pod, out); err != nil {
		return nil, err
	}
	return out, nil
}

// GetPod reads a stored pod.
func (c *Client) GetPod(ns, name string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	if err := c.Get("/api/v1/namespaces/"+ns+"/pods/"+name, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Apply creates obj at collectionPath, or replaces it when it exists. obj must be
// a JSON-able object with metadata.name; the current resourceVersion is copied in
// for the replace.
func (c *Client) Apply(collectionPath, name string, obj map[string]any) error {
	err := c.Do(http.MethodPost, collectionPath, nil, obj, nil)
	var apiErr *APIError
	if err == nil || !asAPIError(err, &apiErr) || apiErr.Code != http.StatusConflict {
		return err
	}
	var cur struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := c.Get(collectionPath+"/"+name, &cur); err != nil {
		return err
	}
	meta, _ := obj["metadata"].(map[string]any)
	meta["resourceVersion"] = cur.Metadata.ResourceVersion
	return c.Do(http.MethodPut, collectionPath+"/"+name, nil, obj, nil)
}

// Delete removes the object at path, ignoring NotFound.
func (c *Client) Delete(path string) error {
	err := c.Do(http.MethodDelete, path, nil, nil, nil)
	var apiErr *APIError
	if asAPIError(err, &apiErr) && apiErr.Code == http.StatusNotFound {
		return nil
	}
	return err
}

func asAPIError(err error, target **APIError) bool {
	return errors.As(err, target)
}

// ConfigMapData reads a ConfigMap's data; found is false when it does not exist.
func (c *Client) ConfigMapData(ns, name string) (map[string]string, bool, error) {
	var cm corev1.ConfigMap
	found, err := c.getIfExists("/api/v1/namespaces/"+ns+"/configmaps/"+name, &cm)
	return cm.Data, found, err
}

// SecretData reads a Secret's data; found is false when it does not exist.
func (c *Client) SecretData(ns, name string) (map[string][]byte, bool, error) {
	var sec corev1.Secret
	found, err := c.getIfExists("/api/v1/namespaces/"+ns+"/secrets/"+name, &sec)
	return sec.Data, found, err
}

// getIfExists decodes GET path into out; found is false on NotFound.
func (c *Client) getIfExists(path string, out any) (found bool, err error) {
	err = c.Get(path, out)
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Code == http.StatusNotFound {
		return false, nil
	}
	return err == nil, err
}

// MergePatch applies an RFC 7386 merge patch (kubectl patch --type merge).
func (c *Client) MergePatch(path string, patch []byte) error {
	return c.Do(http.MethodPatch, path, nil, json.RawMessage(patch), nil)
}

// StrategicPatch applies a strategic merge patch (kubectl patch's default):
// lists such as containers merge by name.
func (c *Client) StrategicPatch(path string, patch []byte) error {
	return c.do(http.MethodPatch, path, nil, json.RawMessage(patch), nil, "application/strategic-merge-patch+json")
}

// JSONPatch applies an RFC 6902 JSON Patch (kubectl patch --type=json).
func (c *Client) JSONPatch(path string, patch []byte) error {
	return c.do(http.MethodPatch, path, nil, json.RawMessage(patch), nil, "application/json-patch+json")
}

// ListPods lists the pods of ns matching a label selector.
func (c *Client) ListPods(ns, selector string) ([]corev1.Pod, error) {
	var list corev1.PodList
	q := url.Values{"labelSelector": {selector}}
	if err := c.Do(http.MethodGet, "/api/v1/namespaces/"+ns+"/pods", q, nil, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Events lists the events of ns about the object of kind and name.
func (c *Client) Events(ns, kind, name string) ([]corev1.Event, error) {
	var list corev1.EventList
	q := url.Values{"fieldSelector": {"involvedObject.kind=" + kind + ",involvedObject.name=" + name}}
	if err := c.Do(http.MethodGet, "/api/v1/namespaces/"+ns+"/events", q, nil, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// ReportReady writes the status a kubelet reports for a pod whose containers
// all started and passed their probes: Running and Ready. The harness reports it
// only for pods it booted itself, so controllers (a Deployment's rollout)
// proceed the way they do on a cluster.
func (c *Client) ReportReady(ns, name string) error {
	now := metav1.Now().UTC().Format(time.RFC3339)
	var conds []string
	for _, t := range []string{"PodScheduled", "Initialized", "ContainersReady", "Ready"} {
		conds = append(conds, fmt.Sprintf(`{"type":%q,"status":"True","lastTransitionTime":%q}`, t, now))
	}
	patch := fmt.Sprintf(`{"status":{"phase":"Running","podIP":"127.0.0.1","startTime":%q,"conditions":[%s]}}`, now, strings.Join(conds, ","))
	return c.MergePatch("/api/v1/namespaces/"+ns+"/pods/"+name+"/status", []byte(patch))
}
