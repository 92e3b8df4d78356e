package cmpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// pluginSaying is a plugin whose generate prints one ConfigMap carrying word,
// after sleeping for delay (so a request can be in flight during a reload).
func pluginSaying(name, version, word string, delay time.Duration) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: %s
spec:
  version: %q
  generate:
    command: [sh, -c]
    args: ["sleep %.2f; echo '{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"%s\"}}'"]
`, name, version, delay.Seconds(), word)
}

// startReloading serves the plugin.yaml in configDir, checked every 20 ms, and
// records the server's logs.
func startReloading(t *testing.T, configDir, initial string) (*testServer, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	ts := startServer(t, initial, func(o *Options) {
		o.Plugin = nil
		o.ConfigPath = filepath.Join(configDir, "plugin.yaml")
		o.ReloadInterval = 20 * time.Millisecond
		o.Logger = zap.New(core)
	})
	return ts, logs
}

// generated is the name of the one object the plugin printed.
func generated(t *testing.T, socket string, root string) string {
	t.Helper()
	name, err := generateName(socket, root)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func generateName(socket string, root string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, socket)
	if err != nil {
		return "", err
	}
	defer c.Close()
	out, err := c.Generate(ctx, client.Request{RepoRoot: root})
	if err != nil {
		return "", err
	}
	if len(out) != 1 {
		return "", fmt.Errorf("generate printed %d objects: %q", len(out), out)
	}
	i := strings.Index(out[0], `"name":"`)
	return strings.Trim(out[0][i+len(`"name":"`):], `"}`), nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// metricValue reads one sample from the server's registry; labels are
// name=value pairs.
func metricValue(t *testing.T, m *metrics, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, s := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for _, l := range labels {
				k, v, _ := strings.Cut(l, "=")
				if have[k] != v {
					continue next
				}
			}
			if s.Counter != nil {
				return s.Counter.GetValue()
			}
			return s.Gauge.GetValue()
		}
	}
	return 0
}

// TestConfigReloadKubeletSwap: the kubelet replaces a projected plugin.yaml by
// switching the ..data symlink; the next request runs the new commands with no
// restart, and the metrics name the new content.
func TestConfigReloadKubeletSwap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, second := pluginSaying("p", "", "first", 0), pluginSaying("p", "", "second", 0)
	if err := servingtest.WriteProjected(dir, map[string][]byte{"plugin.yaml": []byte(first)}); err != nil {
		t.Fatal(err)
	}
	ts, logs := startReloading(t, dir, first)
	root := writeTree(t, map[string]string{"x.txt": "x"})
	if got := generated(t, ts.socket, root); got != "first" {
		t.Fatalf("generated %q", got)
	}
	if v := metricValue(t, ts.srv.metricSet(), "cmp_server_config_info", "hash="+sum(first)); v != 1 {
		t.Errorf("cmp_server_config_info{hash=first} = %v", v)
	}
	if err := servingtest.WriteProjected(dir, map[string][]byte{"plugin.yaml": []byte(second)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return ts.srv.ConfigHash() == sum(second) })
	if got := generated(t, ts.socket, root); got != "second" {
		t.Errorf("after the swap generated %q, want second", got)
	}
	m := ts.srv.metricSet()
	if v := metricValue(t, m, "cmp_server_config_reloads_total", "result=success"); v != 1 {
		t.Errorf("reloads{success} = %v", v)
	}
	if metricValue(t, m, "cmp_server_config_info", "hash="+sum(second)) != 1 || metricValue(t, m, "cmp_server_config_info", "hash="+sum(first)) != 0 {
		t.Error("cmp_server_config_info does not name only the new hash")
	}
	if logs.FilterMessage("plugin configuration reloaded").Len() != 1 {
		t.Errorf("reload not logged: %v", logs.All())
	}
}

// TestConfigReloadPlainEdit: an author's editor rewrites the file in place.
func TestConfigReloadPlainEdit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "plugin.yaml")
	first := pluginSaying("p", "", "first", 0)
	if err := os.WriteFile(path, []byte(first), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, _ := startReloading(t, dir, first)
	root := writeTree(t, map[string]string{"x.txt": "x"})
	second := pluginSaying("p", "", "edited", 0)
	if err := os.WriteFile(path, []byte(second), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return ts.srv.ConfigHash() == sum(second) })
	if got := generated(t, ts.socket, root); got != "edited" {
		t.Errorf("generated %q, want edited", got)
	}
}

// TestInvalidConfigKeepsServing: a broken or missing file is reported with
// every problem in it and counted; the previous configuration keeps serving
// and a later valid file is taken.
func TestInvalidConfigKeepsServing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := pluginSaying("p", "", "first", 0)
	if err := servingtest.WriteProjected(dir, map[string][]byte{"plugin.yaml": []byte(first)}); err != nil {
		t.Fatal(err)
	}
	ts, logs := startReloading(t, dir, first)
	root := writeTree(t, map[string]string{"x.txt": "x"})
	bad := "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata: {name: 'a/b'}\nspec:\n  generate: {command: []}\n  init: {args: [x]}\n"
	if err := servingtest.WriteProjected(dir, map[string][]byte{"plugin.yaml": []byte(bad)}); err != nil {
		t.Fatal(err)
	}
	m := ts.srv.metricSet()
	waitFor(t, "the failure", func() bool { return metricValue(t, m, "cmp_server_config_reloads_total", "result=failure") == 1 })
	if got := generated(t, ts.socket, root); got != "first" {
		t.Errorf("after a bad file generated %q, want first", got)
	}
	if ts.srv.ConfigHash() != sum(first) || metricValue(t, m, "cmp_server_config_info", "hash="+sum(first)) != 1 {
		t.Error("the served hash changed")
	}
	entries := logs.FilterMessage("plugin configuration rejected; still serving the previous one").All()
	if len(entries) != 1 {
		t.Fatalf("rejection logged %d times", len(entries))
	}
	msg := fmt.Sprint(entries[0].ContextMap()["error"])
	for _, want := range []string{"metadata.name", "spec.generate.command should be non-empty", "spec.init.args is set"} {
		if !strings.Contains(msg, want) {
			t.Errorf("logged error lacks %q: %s", want, msg)
		}
	}
	// Gone altogether (the annotation removed), then back valid.
	if err := servingtest.WriteProjected(dir, map[string][]byte{"other": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second failure", func() bool { return metricValue(t, m, "cmp_server_config_reloads_total", "result=failure") == 2 })
	third := pluginSaying("p", "", "third", 0)
	if err := servingtest.WriteProjected(dir, map[string][]byte{"plugin.yaml": []byte(third)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return ts.srv.ConfigHash() == sum(third) })
	if got := generated(t, ts.socket, root); got != "third" {
		t.Errorf("generated %q, want third", got)
	}
}

// TestInFlightRequestKeepsItsConfig: a request that started before a reload
// finishes with the commands it started with, even when the socket moves
// because spec.version changed; the old socket goes, the new one serves.
func TestInFlightRequestKeepsItsConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := pluginSaying("p", "v1", "first", 1500*time.Millisecond)
	if err := servingtest.WriteProjected(dir, map[string][]byte{"plugin.yaml": []byte(first)}); err != nil {
		t.Fatal(err)
	}
	ts, logs := startReloading(t, dir, first)
	if filepath.Base(ts.socket) != "p-v1.sock" {
		t.Fatalf("socket %s", ts.socket)
	}
	root := writeTree(t, map[string]string{"x.txt": "x"})
	inflight := make(chan string, 1)
	go func() {
		name, err := generateName(ts.socket, root)
		if err != nil {
			name = err.Error()
		}
		inflight <- name
	}()
	waitFor(t, "the request to start", func() bool {
		return metricValue(t, ts.srv.metricSet(), "cmp_server_requests_in_flight") == 1
	})
	second := pluginSaying("p", "v2", "second", 0)
	if err := servingtest.WriteProjected(dir, map[string][]byte{"plugin.yaml": []byte(second)}); err != nil {
		t.Fatal(err)
	}
	newSocket := filepath.Join(filepath.Dir(ts.socket), "p-v2.sock")
	waitFor(t, "the socket move", func() bool {
		_, errNew := os.Stat(newSocket)
		_, errOld := os.Stat(ts.socket)
		return errNew == nil && os.IsNotExist(errOld)
	})
	if ts.srv.SocketPath() != newSocket {
		t.Errorf("SocketPath %s", ts.srv.SocketPath())
	}
	if got := generated(t, newSocket, root); got != "second" {
		t.Errorf("new socket generated %q", got)
	}
	select {
	case got := <-inflight:
		if got != "first" {
			t.Errorf("the in-flight request generated %q, want first", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the in-flight request never finished")
	}
	if logs.FilterMessage("plugin socket moved").Len() != 1 {
		t.Error("the move was not logged")
	}
}
