package cmpserver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/redact"
	"github.com/cmp-injector/cmp-injector/cmpserver/rendercache"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// countingPlugin prints one ConfigMap made of what the command can read (the
// app's file, an ARGOCD_ENV_ variable, the parameters, the revision, word)
// and appends a line to $RUNS, outside the tree, each time it runs.
func countingPlugin(word string) string {
	return `apiVersion: argoproj.io/v1alpha1
kind: ConfigManagementPlugin
metadata:
  name: counting
spec:
  generate:
    command: [sh, -c]
    args:
      - |
        echo run >> "$RUNS"
        printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s"},"data":{"file":"%s","env":"%s","params":"%s","revision":"%s"}}\n' \
          ` + word + ` "$(cat values.txt)" "$ARGOCD_ENV_COLOUR" "$(echo "$ARGOCD_APP_PARAMETERS" | tr -d '"')" "$ARGOCD_APP_REVISION"
`
}

type cacheRig struct {
	t    *testing.T
	ts   *testServer
	c    *client.Client
	runs string
	dir  string
	logs *observer.ObservedLogs
}

// startCaching serves countingPlugin from a plugin.yaml that is reloaded,
// with the render cache cfg.
func startCaching(t *testing.T, cfg rendercache.Config) *cacheRig {
	t.Helper()
	r := &cacheRig{t: t, dir: shortTempDir(t)}
	r.runs = filepath.Join(r.dir, "runs")
	if err := os.WriteFile(filepath.Join(r.dir, "plugin.yaml"), []byte(countingPlugin("one")), 0o644); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	r.logs = logs
	r.ts = startServer(t, countingPlugin("one"), func(o *Options) {
		o.Plugin = nil
		o.ConfigPath = filepath.Join(r.dir, "plugin.yaml")
		o.ReloadInterval = 20 * time.Millisecond
		o.Logger = zap.New(core)
		o.Env = append(o.Env, "RUNS="+r.runs)
		o.RenderCache = cfg
	})
	r.c = r.ts.dial(t)
	return r
}

// generate sends a repository whose app dir "app" holds values.txt = value,
// with env, and returns the one manifest.
func (r *cacheRig) generate(value string, env ...string) string {
	r.t.Helper()
	return r.generateAt("app", value, env...)
}

func (r *cacheRig) generateAt(app, value string, env ...string) string {
	r.t.Helper()
	tgz := craftTgz(r.t, dir("app"), file("app/values.txt", value), dir("other"), file("other/values.txt", value))
	out, err := sendTgz(r.t, r.c, app, tgz, env...)
	if err != nil {
		r.t.Fatal(err)
	}
	if len(out.GetManifests()) != 1 {
		r.t.Fatalf("manifests %q", out.GetManifests())
	}
	return out.GetManifests()[0]
}

// ran is how many times the plugin's generate command has run.
func (r *cacheRig) ran() int {
	b, err := os.ReadFile(r.runs)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return strings.Count(string(b), "run\n")
}

func (r *cacheRig) wantRuns(step string, n int) {
	r.t.Helper()
	if got := r.ran(); got != n {
		r.t.Fatalf("%s: the plugin ran %d times, want %d", step, got, n)
	}
}

func testCacheConfig() rendercache.Config {
	return rendercache.Config{MaxBytes: 1 << 20, TTL: time.Hour}
}

// TestRenderCacheAnswersRepeatsAndMissesEveryChange: a repeat is answered
// without running the plugin, byte for byte the same; a changed file, app
// path, env variable, parameter, revision or plugin.yaml each runs it again.
func TestRenderCacheAnswersRepeatsAndMissesEveryChange(t *testing.T) {
	r := startCaching(t, testCacheConfig())
	base := []string{keys.EnvAppRevision + "=aaaa", "ARGOCD_ENV_COLOUR=blue", keys.EnvAppParameters + `=[{"name":"replicas","string":"2"}]`}
	first := r.generate("v1", base...)
	r.wantRuns("first request", 1)
	if again := r.generate("v1", base...); again != first {
		t.Fatalf("cached answer %q, first %q", again, first)
	}
	r.wantRuns("the same request again", 1)
	// The repo-server's order of the env is not part of the key.
	r.generate("v1", base[2], base[0], base[1])
	r.wantRuns("the same env in another order", 1)

	steps := []struct {
		name string
		call func() string
	}{
		{"a changed file", func() string { return r.generate("v2", base...) }},
		{"another app path", func() string { return r.generateAt("other", "v2", base...) }},
		{"a changed ARGOCD_ENV_ variable", func() string {
			return r.generate("v2", base[0], "ARGOCD_ENV_COLOUR=green", base[2])
		}},
		{"a changed parameter", func() string {
			return r.generate("v2", base[0], base[1], keys.EnvAppParameters+`=[{"name":"replicas","string":"3"}]`)
		}},
		{"a new revision", func() string { return r.generate("v2", keys.EnvAppRevision+"=bbbb", base[1], base[2]) }},
	}
	runs := 1
	for _, s := range steps {
		before := s.call()
		runs++
		r.wantRuns(s.name, runs)
		if again := s.call(); again != before {
			t.Fatalf("%s: cached answer %q, fresh %q", s.name, again, before)
		}
		r.wantRuns(s.name+", repeated", runs)
	}

	// A new plugin.yaml starts an empty cache.
	if err := os.WriteFile(filepath.Join(r.dir, "plugin.yaml"), []byte(countingPlugin("two")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() bool { return r.ts.srv.ConfigHash() == sum(countingPlugin("two")) })
	if out := r.generate("v1", base...); !strings.Contains(out, `"name":"two"`) {
		t.Fatalf("after the reload: %q", out)
	}
	r.wantRuns("after a reload", runs+1)

	m := r.ts.srv.metrics
	if hits := metricValue(t, m, "cmp_server_render_cache_lookups_total", "result=hit"); hits != 7 {
		t.Errorf("hits = %v, want 7", hits)
	}
	if misses := metricValue(t, m, "cmp_server_render_cache_lookups_total", "result=miss"); misses != 7 {
		t.Errorf("misses = %v, want 7", misses)
	}
	if n := metricValue(t, m, "cmp_server_render_cache_entries"); n != 1 {
		t.Errorf("entries after the reload = %v, want 1 (the new configuration's)", n)
	}
	if r.logs.FilterField(zap.Bool("render_cache_hit", true)).FilterMessage("request done").Len() != 7 {
		t.Errorf("hits not logged: %v", r.logs.FilterMessage("request done").All())
	}
}

// TestRenderCacheRevisionIndependent: with the revision left out of the key,
// a new revision with the same tree is answered from the cache (the answer
// of the first revision, which such a plugin must not print).
func TestRenderCacheRevisionIndependent(t *testing.T) {
	cfg := testCacheConfig()
	cfg.RevisionIndependent = true
	r := startCaching(t, cfg)
	r.generate("v1", keys.EnvAppRevision+"=aaaa", keys.EnvAppRevisionShort+"=aaa")
	r.generate("v1", keys.EnvAppRevision+"=bbbb", keys.EnvAppRevisionShort+"=bbb")
	r.wantRuns("a new revision of the same tree", 1)
	r.generate("v2", keys.EnvAppRevision+"=cccc")
	r.wantRuns("a changed file", 2)
}

// TestRenderCacheVerifiesTheStream: a request whose header names a cached
// tree but whose body is something else is refused, never answered from the
// cache: the key is only as good as the checksum the stream must match.
func TestRenderCacheVerifiesTheStream(t *testing.T) {
	r := startCaching(t, testCacheConfig())
	tgz := craftTgz(t, dir("app"), file("app/values.txt", "v1"))
	if _, err := sendTgz(t, r.c, "app", tgz); err != nil {
		t.Fatal(err)
	}
	other := craftTgz(t, dir("app"), file("app/values.txt", "forged"))
	msgs := []*pluginpb.AppStreamRequest{metaMsg("app", checksum(tgz)), chunkMsg(other)}
	msgs[0].GetMetadata().Size = int64(len(tgz))
	_, err := rawGenerate(t, r.c, msgs...)
	wantErr(t, err, "checksum")
	r.wantRuns("a forged body", 1)
}

// TestRenderCacheOffWithoutTheOperator: no cache unless asked, none for a
// plugin that takes git credentials, and none on a sidecar with Secret env
// unless allowed.
func TestRenderCacheOffWithoutTheOperator(t *testing.T) {
	r := startCaching(t, rendercache.Config{})
	r.generate("v1")
	r.generate("v1")
	r.wantRuns("no cache", 2)

	opts := DefaultOptions()
	opts.RenderCache = testCacheConfig()
	opts.Exec.Redact = redact.FromEnv([]string{keys.EnvSecretEnv + "=VAULT_TOKEN", "VAULT_TOKEN=s.0123456789abcdef"})
	err := opts.Validate()
	wantErr(t, err, "takes env from Secrets (VAULT_TOKEN)")
	opts.RenderCache.AllowSecrets = true
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	opts.RenderCache.TTL = 0
	wantErr(t, opts.Validate(), "--render-cache-ttl")

	creds := strings.Replace(countingPlugin("one"), "spec:\n", "spec:\n  provideGitCreds: true\n", 1)
	ts := startServer(t, creds, func(o *Options) { o.RenderCache = testCacheConfig() })
	if ts.srv.configs.get().cache != nil {
		t.Fatal("a provideGitCreds plugin got a render cache")
	}
}
