// Package observability checks what the chart ships for operators: the alerting
// rules with promtool, and that every query of the dashboard and the alerts
// names a metric the binaries really export (scraped from them here).
package observability

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

func repoRoot(t *testing.T) string { return harness.MustRepoRoot(t) }

func chartFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "charts", "cmp-injector", "files", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAlertRules: promtool accepts the rules and each alert fires on the series
// that should fire it and only then (testdata/alerts_test.yaml).
func TestAlertRules(t *testing.T) {
	promtool := harness.MustTool(t, "promtool")
	rules := filepath.Join(repoRoot(t), "charts", "cmp-injector", "files", "alerts.yaml")
	for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", filepath.Join("testdata", "alerts_test.yaml")}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// queries are the PromQL expressions of the dashboard and the alerts.
func queries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	var dash struct {
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(chartFile(t, "dashboard.json"), &dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, q := range p.Targets {
			out[fmt.Sprintf("dashboard %q #%d", p.Title, i)] = q.Expr
		}
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(chartFile(t, "alerts.yaml"), &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out["alert "+r.Alert] = r.Expr
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\bcmp_(?:injector|server)_[a-z_]+\b`)

// TestQueriesUseExportedMetrics runs both binaries, makes them record every
// kind of series (an injection, a denial, a skip, a refused request; a
// generation with an init command), scrapes them, and requires every metric
// name in the dashboard and the alerts to be among the scraped ones.
func TestQueriesUseExportedMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bins, err := harness.BuildBinaries(ctx, filepath.Join(t.TempDir(), "bin"), "cmp-injector", "cmp-server")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for name := range scrapeInjector(t, bins["cmp-injector"]) {
		exported[name] = true
	}
	for name := range scrapeServer(t, bins["cmp-server"]) {
		exported[name] = true
	}
	var missing []string
	for where, q := range queries(t) {
		names := metricName.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("%s queries no cmp metric: %s", where, q)
		}
		for _, n := range names {
			if !exported[n] {
				missing = append(missing, fmt.Sprintf("%s: %s", where, n))
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		var have []string
		for n := range exported {
			have = append(have, n)
		}
		sort.Strings(have)
		t.Errorf("queries name metrics the binaries do not export:\n  %s\nexported: %s", strings.Join(missing, "\n  "), strings.Join(have, " "))
	}
}

// names turns "name{labels}" samples into metric names.
func names(samples map[string]float64) map[string]bool {
	out := map[string]bool{}
	for k := range samples {
		n, _, _ := strings.Cut(k, "{")
		out[n] = true
	}
	return out
}

func scrapeInjector(t *testing.T, bin string) map[string]bool {
	t.Helper()
	dir := t.TempDir()
	cat, err := harness.ExampleCatalog(true, map[string][]string{"argocd": {"helm"}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := harness.NewInjector(bin, filepath.Join(dir, "inj"), cat, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Start(); err != nil {
		t.Fatal(err)
	}
	defer in.Stop()
	hc := in.TLSClient()
	for _, body := range []string{
		review(`{"cmp-injector.io/inject":"true"}`, `{"cmp-injector.io/plugins":"helm"}`),
		review(`{"cmp-injector.io/inject":"true"}`, `{"cmp-injector.io/plugins":"no-such"}`),
		review(`{}`, `{}`),
	} {
		resp, err := hc.Post(in.URL(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := hc.Post(in.URL(), "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	samples, err := in.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	return names(samples)
}

func review(labels, annotations string) string {
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},` +
		`"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"argocd","operation":"CREATE","object":` +
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":` + labels + `,"annotations":` + annotations + `},` +
		`"spec":{"containers":[{"name":"argocd-repo-server","image":"x"}]}}}}`
}

func scrapeServer(t *testing.T, bin string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Short: the plugin socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "cmpobs")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	plugin := "apiVersion: argoproj.io/v1alpha1\nkind: ConfigManagementPlugin\nmetadata: {name: obs}\n" +
		"spec:\n  init: {command: [sh, -c, 'true']}\n  generate: {command: [sh, -c, 'echo \"{\\\"kind\\\":\\\"ConfigMap\\\",\\\"apiVersion\\\":\\\"v1\\\",\\\"metadata\\\":{\\\"name\\\":\\\"x\\\"}}\"']}\n"
	if err := os.WriteFile(filepath.Join(conf, "plugin.yaml"), []byte(plugin), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	sockets := filepath.Join(dir, "s")
	if err := os.MkdirAll(sockets, 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := harness.Start("cmp-server", []string{bin, "serve", "--config-dir", conf, "--socket-dir", sockets,
		"--work-dir", filepath.Join(dir, "w"), "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port)}, nil, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(10 * time.Second)
	sock := filepath.Join(sockets, "obs.sock")
	if err := harness.Eventually(30*time.Second, 50*time.Millisecond, func() (bool, error) {
		_, err := os.Stat(sock)
		return err == nil, fmt.Errorf("no socket yet: %w\n%s", err, p.Output())
	}); err != nil {
		t.Fatal(err)
	}
	cl, err := client.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	repo := filepath.Join(dir, "repo")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Generate(ctx, client.Request{RepoRoot: repo}); err != nil {
		t.Fatal(err)
	}
	samples, err := harness.ScrapeMetrics(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	return names(samples)
}

// TestChartShipsThem: enabled, the chart renders the dashboard ConfigMap with
// the sidecar's label and the file as is, and the PrometheusRule with the
// rules file's groups.
func TestChartShipsThem(t *testing.T) {
	helm := harness.MustTool(t, "helm")
	chart := filepath.Join(repoRoot(t), "charts", "cmp-injector")
	out, err := exec.Command(helm, "template", "r", chart, "--set", "certificates.mode=secret", "--set", "certificates.caBundle=eA==",
		"--set", "dashboards.enabled=true", "--set", "prometheusRule.enabled=true",
		"--show-only", "templates/dashboard-configmap.yaml", "--show-only", "templates/prometheusrule.yaml").Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	docs := strings.Split(string(out), "\n---\n")
	var cm struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	var rule struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	for _, d := range docs {
		switch {
		case strings.Contains(d, "kind: ConfigMap"):
			if err := yaml.Unmarshal([]byte(d), &cm); err != nil {
				t.Fatal(err)
			}
		case strings.Contains(d, "kind: PrometheusRule"):
			if err := yaml.Unmarshal([]byte(d), &rule); err != nil {
				t.Fatal(err)
			}
		}
	}
	if cm.Metadata.Labels["grafana_dashboard"] != "1" || strings.TrimSpace(cm.Data["cmp-injector.json"]) != strings.TrimSpace(string(chartFile(t, "dashboard.json"))) {
		t.Errorf("dashboard ConfigMap: labels %v, dashboard equal to the file: %v", cm.Metadata.Labels,
			strings.TrimSpace(cm.Data["cmp-injector.json"]) == strings.TrimSpace(string(chartFile(t, "dashboard.json"))))
	}
	var want map[string]any
	if err := yaml.Unmarshal(chartFile(t, "alerts.yaml"), &want); err != nil {
		t.Fatal(err)
	}
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(rule.Spec)
	if rule.Kind != "PrometheusRule" || !bytes.Equal(wb, gb) {
		t.Errorf("PrometheusRule spec differs from files/alerts.yaml:\n%s\n%s", gb, wb)
	}
}
