package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Client is a small REST client for the handful of calls the tests make; the
// project does not depend on client-go.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// Client returns a REST client authenticated as a cluster admin.
func (cp *ControlPlane) Client() *Client {
	return &Client{base: cp.URL, token: cp.Token, http: cp.HTTPClient()}
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
func (c *Client) Do(method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		ct := "application/json"
		if method == http.MethodPatch {
			ct = "application/merge-patch+json"
		}
		req.Header.Set("Content-Type", ct)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var st metav1.Status
		if json.Unmarshal(b, &st) == nil && st.Message != "" {
			return &APIError{Code: resp.StatusCode, Reason: string(st.Reason), Message: st.Message}
		}
		return &APIError{Code: resp.StatusCode, Reason: resp.Status, Message: string(b)}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Get decodes GET path into out.
func (c *Client) Get(path string, out any) error { return c.Do(http.MethodGet, path, nil, nil, out) }

// CreateNamespace creates a namespace with labels.
func (c *Client) CreateNamespace(name string, labels map[string]string) error {
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	}
	return c.Do(http.MethodPost, "/api/v1/namespaces", nil, ns, nil)
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

// DeletePod deletes a pod immediately (there is no kubelet to wait for).
func (c *Client) DeletePod(ns, name string) error {
	q := url.Values{"gracePeriodSeconds": {"0"}}
	return c.Do(http.MethodDelete, "/api/v1/namespaces/"+ns+"/pods/"+name, q, nil, nil)
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
	e, ok := err.(*APIError)
	if ok {
		*target = e
	}
	return ok
}
