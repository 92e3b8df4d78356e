package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// apiServer answers /version and nothing else (every other path is a 404),
// on loopback; kubeconfig points at it.
func apiServer(t *testing.T) (kubeconfig string, requests *atomic.Int32) {
	t.Helper()
	requests = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path == "/version" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"major":"1","minor":"34","gitVersion":"v1.34.4"}`))
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: " + srv.URL + "}}]\n" +
		"users: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig, requests
}

// TestDoctorCommand: doctor against an API server that has none of the
// installation exits 1; -o json carries each result's check ID, severity
// and retryable flag; a failure that cannot clear by itself is not retried
// under --wait; a bad -o is a usage error.
func TestDoctorCommand(t *testing.T) {
	kubeconfig, requests := apiServer(t)
	var out bytes.Buffer
	code, stderr := runCode("doctor", []string{"--kubeconfig", kubeconfig, "-o", "json"}, nil, &out)
	if code != 1 {
		t.Fatalf("exit %d, %s\n%s", code, stderr, out.String())
	}
	var rep struct {
		OK     bool `json:"ok"`
		Groups []struct {
			Name   string `json:"name"`
			Checks []struct {
				ID        string `json:"id"`
				Severity  string `json:"severity"`
				Retryable bool   `json:"retryable"`
				OK        bool   `json:"ok"`
				Message   string `json:"message"`
			} `json:"checks"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	ids := map[string]bool{}
	for _, g := range rep.Groups {
		for _, c := range g.Checks {
			if c.ID == "" || (c.Severity != "error" && c.Severity != "warning") {
				t.Errorf("a result without its check's data: %+v", c)
			}
			ids[c.ID] = c.OK
		}
	}
	if rep.OK || !ids["cluster.api-reachable"] {
		t.Errorf("ok %v, results %v", rep.OK, ids)
	}
	if ok, seen := ids["webhook.listable"]; !seen || ok {
		t.Errorf("webhook.listable: seen %v ok %v", seen, ok)
	}

	// catalog.source fails too and cannot clear by itself: one attempt.
	before := requests.Load()
	out.Reset()
	code, stderr = runCode("doctor", []string{"--kubeconfig", kubeconfig, "--wait", "1m"}, nil, &out)
	if code != 1 || strings.Contains(stderr, "checking again") || !strings.Contains(out.String(), "✘ cannot list MutatingWebhookConfigurations") {
		t.Errorf("exit %d, stderr %q\n%s", code, stderr, out.String())
	}
	if n := requests.Load() - before; n > 20 {
		t.Errorf("%d requests for one attempt", n)
	}

	if code, _ := runCode("doctor", []string{"-o", "yaml"}, nil, &out); code != 2 {
		t.Errorf("-o yaml: exit %d, want 2", code)
	}
}
