package playground

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/pkg/params"
)

func strp(s string) *string { return &s }

func TestAnnounceHelmExample(t *testing.T) {
	withHelm(t)
	p := start(t, Options{ConfigPath: helmPlugin(t), AppDir: copyChart(t)})
	var a announceAnswer
	if code := p.post(t, "/api/announce", map[string]any{}, &a); code != http.StatusOK || a.Error != "" {
		t.Fatalf("announce: %d %q", code, a.Error)
	}
	byName := map[string]announcement{}
	for _, x := range a.Announcements {
		if _, dup := byName[x.Name]; !dup {
			byName[x.Name] = x
		}
	}
	hp := byName["helm-parameters"]
	if hp.Source != "dynamic" || hp.CollectionType != "map" || hp.Map["greeting"] != "hello" || hp.Map["feature.enabled"] != "false" {
		t.Errorf("helm-parameters = %+v", hp)
	}
	if b := byName["helm-boolean-parameters"]; b.ItemType != "boolean" || b.Map["feature.enabled"] != "false" {
		t.Errorf("helm-boolean-parameters = %+v", b)
	}
	if s := byName["skip-crds"]; s.Source != "static" || s.ItemType != "boolean" {
		t.Errorf("skip-crds = %+v", s)
	}
	if len(a.Commands) != 1 || a.Commands[0].Phase != "parameters" || a.Commands[0].Exit != "0" {
		t.Errorf("commands = %+v", a.Commands)
	}
}

func TestGenerateWithParameters(t *testing.T) {
	withHelm(t)
	p := start(t, Options{ConfigPath: helmPlugin(t), AppDir: copyChart(t)})
	body := map[string]any{
		"parameters": []params.AppParameter{
			{Name: "helm-parameters", Map: map[string]string{"extra.note": "from the API", "greeting": "hola"}},
			{Name: "helm-boolean-parameters", Map: map[string]string{"feature.enabled": "true"}},
			{Name: "release-name", String: strp("rel")},
		},
		"env": BuildEnv{AppName: "demo", Namespace: "team-a", KubeVersion: "1.34.0"},
	}
	var g generateAnswer
	if code := p.post(t, "/api/generate", body, &g); code != http.StatusOK || g.Error != "" {
		t.Fatalf("generate: %d %q %+v", code, g.Error, g.Commands)
	}
	if g.Count != 1 || g.Shown != 1 || g.Truncated || len(g.Manifests) != 1 {
		t.Fatalf("generate = %+v", g.generateResponse)
	}
	c := g.Manifests[0]
	if c.Kind != "ConfigMap" || c.Name != "rel-config" || c.APIVersion != "v1" {
		t.Errorf("card = %+v", c)
	}
	for _, want := range []string{"greeting: hola", "note: from the API", `feature: "on"`} {
		if !strings.Contains(c.YAML, want) {
			t.Errorf("manifest lacks %q:\n%s", want, c.YAML)
		}
	}
	if len(g.Commands) != 1 || g.Commands[0].Phase != "generate" || g.Commands[0].Exit != "0" || g.DurationMS <= 0 {
		t.Errorf("commands = %+v, duration %v", g.Commands, g.DurationMS)
	}
}

func TestEnviron(t *testing.T) {
	p := start(t, Options{ConfigPath: writePlugin(t, t.TempDir(), "true"), AppDir: appDir(t)})
	ps := []params.AppParameter{
		{Name: "values-files", Array: []string{"a.yaml", "b.yaml"}},
		{Name: "image.tag", String: strp("v1")},
	}
	body := map[string]any{"parameters": ps, "env": BuildEnv{AppName: "demo", Namespace: "ns", KubeVersion: "v1.34.1",
		PluginEnv: []NameValue{{"FOO", "x-$ARGOCD_APP_NAMESPACE-$KUBE_VERSION"}}}}
	var e environResponse
	if code := p.post(t, "/api/environ", body, &e); code != http.StatusOK {
		t.Fatalf("environ: %d", code)
	}
	want, _ := params.Encode(ps)
	if e.AppParameters != want {
		t.Errorf("appParameters = %s, want %s", e.AppParameters, want)
	}
	wantVars := []NameValue{{"PARAM_VALUES_FILES_0", "a.yaml"}, {"PARAM_VALUES_FILES_1", "b.yaml"}, {"PARAM_IMAGE_TAG", "v1"}}
	if fmt.Sprint(e.ParamVars) != fmt.Sprint(wantVars) {
		t.Errorf("paramVars = %v", e.ParamVars)
	}
	get := func(env []NameValue, name string) (string, bool) {
		for _, nv := range env {
			if nv.Name == name {
				return nv.Value, true
			}
		}
		return "", false
	}
	if v, _ := get(e.Env, "ARGOCD_ENV_FOO"); v != "x-ns-1.34.1" {
		t.Errorf("generate env ARGOCD_ENV_FOO = %q", v)
	}
	// The announcement flow of the repo-server sends neither the namespace nor
	// the kube version, and expands the plugin env without them.
	if _, ok := get(e.AnnounceEnv, "KUBE_VERSION"); ok {
		t.Error("announce env has KUBE_VERSION")
	}
	if v, _ := get(e.AnnounceEnv, "ARGOCD_ENV_FOO"); v != "x--" {
		t.Errorf("announce env ARGOCD_ENV_FOO = %q", v)
	}
	if v, _ := get(e.AnnounceEnv, "ARGOCD_APP_NAME"); v != "demo" {
		t.Errorf("announce env ARGOCD_APP_NAME = %q", v)
	}
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	app := appDir(t)
	cfg := filepath.Join(dir, "plugin.yaml")
	write := func(spec string) {
		t.Helper()
		if err := os.WriteFile(cfg, []byte("kind: ConfigManagementPlugin\nmetadata: {name: d}\nspec:\n  generate: {command: [\"true\"]}\n"+spec), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("  discover: {fileName: Chart.yaml, find: {glob: '**/x'}}\n")
	p := start(t, Options{ConfigPath: cfg, AppDir: app})
	var d discoverAnswer
	p.post(t, "/api/discover", map[string]any{}, &d)
	if d.Matched || d.Rule != "fileName" || d.Error != "" || len(d.Ignored) != 1 || d.Ignored[0] != "find.glob" {
		t.Errorf("no Chart.yaml: %+v", d)
	}
	os.WriteFile(filepath.Join(app, "Chart.yaml"), nil, 0o644)
	p.post(t, "/api/discover", map[string]any{}, &d)
	if !d.Matched || !strings.Contains(d.Explanation, "matches") {
		t.Errorf("with Chart.yaml: %+v", d)
	}

	write("  discover: {find: {command: [sh, -c, 'echo no tool here >&2; exit 4']}}\n")
	p.reload()
	d = discoverAnswer{}
	p.post(t, "/api/discover", map[string]any{}, &d)
	if d.Matched || d.Rule != "find.command" || !strings.Contains(d.Error, "no tool here") || len(d.Commands) != 1 ||
		d.Commands[0].Exit != "4" || d.Commands[0].Stderr != "no tool here\n" {
		t.Errorf("failing find.command: %+v", d)
	}

	write("")
	p.reload()
	d = discoverAnswer{}
	p.post(t, "/api/discover", map[string]any{}, &d)
	if d.Configured || d.Matched || !strings.Contains(d.Explanation, "spec.source.plugin.name: d") {
		t.Errorf("no discovery: %+v", d)
	}
}

// readEvents returns the events of an event stream as they arrive.
func readEvents(t *testing.T, ctx context.Context, url string) <-chan map[string]any {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events content type %q", resp.Header.Get("Content-Type"))
	}
	out := make(chan map[string]any, 16)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		name := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				var ev map[string]any
				json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &ev)
				ev["event"] = name
				out <- ev
			}
		}
	}()
	return out
}

func nextEvent(t *testing.T, ch <-chan map[string]any, what string) map[string]any {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatalf("event stream ended waiting for %s", what)
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("no event within 10s: %s", what)
	}
	return nil
}

func TestWatchEvents(t *testing.T) {
	withHelm(t)
	chart := copyChart(t)
	cfgDir := t.TempDir()
	cfg := filepath.Join(cfgDir, "plugin.yaml")
	orig, err := os.ReadFile(helmPlugin(t))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(cfg, orig, 0o644)
	p := start(t, Options{ConfigPath: cfg, AppDir: chart})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := readEvents(t, ctx, p.url)
	if ev := nextEvent(t, events, "hello"); ev["event"] != "hello" {
		t.Fatalf("first event = %v", ev)
	}

	values := filepath.Join(chart, "values.yaml")
	data, _ := os.ReadFile(values)
	os.WriteFile(values, []byte(strings.Replace(string(data), "greeting: hello", "greeting: bonjour", 1)), 0o644)
	ev := nextEvent(t, events, "values.yaml edit")
	if ev["event"] != "change" || fmt.Sprint(ev["paths"]) != "[values.yaml]" || ev["config"] != false {
		t.Fatalf("change event = %v", ev)
	}
	var g generateAnswer
	p.post(t, "/api/generate", map[string]any{}, &g)
	if g.Error != "" || len(g.Manifests) != 1 || !strings.Contains(g.Manifests[0].YAML, "greeting: bonjour") {
		t.Fatalf("after the edit: %q %+v", g.Error, g.Manifests)
	}

	// A broken plugin.yaml is reported and stops runs; fixing it resumes them.
	os.WriteFile(cfg, []byte("kind: ConfigManagementPlugin\nmetadata: {name: helm}\nspec: {}\n"), 0o644)
	for ev = nextEvent(t, events, "broken plugin.yaml"); !strings.Contains(fmt.Sprint(ev["configError"]), "spec.generate.command should be non-empty"); ev = nextEvent(t, events, "broken plugin.yaml") {
		if ev["config"] != true {
			t.Fatalf("config event = %v", ev)
		}
	}
	g = generateAnswer{}
	p.post(t, "/api/generate", map[string]any{}, &g)
	if !strings.Contains(g.Error, "spec.generate.command should be non-empty") {
		t.Fatalf("generate with a broken plugin.yaml: %q", g.Error)
	}
	var st stateResponse
	resp, err := httpClient.Get(p.url + "/api/state")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Plugin != nil || st.ConfigError == "" {
		t.Fatalf("state with a broken plugin.yaml: %+v", st)
	}
	os.WriteFile(cfg, orig, 0o644)
	// A poll may catch the file half written; the events end with the whole.
	for ev := nextEvent(t, events, "fixed plugin.yaml"); ev["configError"] != nil; ev = nextEvent(t, events, "fixed plugin.yaml") {
		if ev["config"] != true {
			t.Fatalf("config fixed event = %v", ev)
		}
	}
	g = generateAnswer{}
	p.post(t, "/api/generate", map[string]any{}, &g)
	if g.Error != "" || g.Count != 1 {
		t.Fatalf("generate after the fix: %q", g.Error)
	}
}

// A newer generate from the same page cancels the one in progress; another
// page's run is left alone.
func TestCancellation(t *testing.T) {
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	script := `if [ "$PARAM_MODE" = slow ]; then touch "$ARGOCD_ENV_STARTED"; sleep 30; fi; echo "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"$PARAM_MODE\"}}"`
	p := start(t, Options{ConfigPath: writePlugin(t, dir, script), AppDir: appDir(t)})
	body := func(mode, session string) map[string]any {
		return map[string]any{"session": session, "parameters": []params.AppParameter{{Name: "mode", String: strp(mode)}},
			"env": BuildEnv{PluginEnv: []NameValue{{"STARTED", started}}}}
	}
	slow := func(session string) <-chan generateAnswer {
		os.Remove(started)
		ch := make(chan generateAnswer, 1)
		go func() {
			var g generateAnswer
			p.post(t, "/api/generate", body("slow", session), &g)
			ch <- g
		}()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(started); err == nil {
				return ch
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's slow run did not start within 10s", session)
			}
		}
	}
	wait := func(ch <-chan generateAnswer, what string) generateAnswer {
		select {
		case g := <-ch:
			return g
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not answer within 20s", what)
		}
		return generateAnswer{}
	}
	page1, page2 := slow("page-1"), slow("page-2")

	begin := time.Now()
	var fast generateAnswer
	p.post(t, "/api/generate", body("fast", "page-1"), &fast)
	if fast.Error != "" || fast.Count != 1 || fast.Manifests[0].Name != "fast" {
		t.Fatalf("newer run: %q %+v", fast.Error, fast.Manifests)
	}
	g := wait(page1, "page-1's superseded run")
	t.Logf("the superseded run answered %s after the newer one started", time.Since(begin))
	if !g.Cancelled || !strings.Contains(g.Error, "a newer run started") {
		t.Errorf("superseded run: cancelled=%v error=%q", g.Cancelled, g.Error)
	}
	if len(g.Commands) != 1 || g.Commands[0].Stopped != "request cancelled" {
		t.Errorf("superseded run's command: %+v", g.Commands)
	}
	select {
	case g := <-page2:
		t.Fatalf("page-2's run ended with page-1's: %+v", g.runAnswer)
	default:
	}
	p.post(t, "/api/generate", body("fast", "page-2"), nil)
	if g := wait(page2, "page-2's superseded run"); !g.Cancelled {
		t.Errorf("page-2's run: %+v", g.runAnswer)
	}
}

func TestHangingPlugin(t *testing.T) {
	exec := command.DefaultOptions()
	exec.Timeout = time.Second
	exec.KillGrace = time.Second
	p := start(t, Options{ConfigPath: writePlugin(t, t.TempDir(), "echo about to hang >&2; sleep 60"), AppDir: appDir(t), Exec: exec})
	begin := time.Now()
	var g generateAnswer
	p.post(t, "/api/generate", map[string]any{}, &g)
	if took := time.Since(begin); took > 15*time.Second {
		t.Errorf("a hanging plugin held the answer for %s", took)
	}
	if !strings.Contains(g.Error, "killed after the command timeout of 1s") || g.Cancelled {
		t.Errorf("error = %q (cancelled %v)", g.Error, g.Cancelled)
	}
	if len(g.Commands) != 1 || g.Commands[0].Stderr != "about to hang\n" || !strings.Contains(g.Commands[0].Stopped, "command timeout") {
		t.Errorf("commands = %+v", g.Commands)
	}
}

// A plugin printing 50 MB of manifests (and as much on stderr) gets an answer
// of bounded size: the objects are counted, the first few MiB shown.
func TestHugeOutput(t *testing.T) {
	// 500 ConfigMaps of 100 kB each.
	script := `head -c 100000 /dev/zero | tr '\0' x > /tmp/x.$$; i=0; while [ $i -lt 500 ]; do
printf -- '---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\ndata:\n  blob: ' $i; cat /tmp/x.$$; printf '\n'; i=$((i+1)); done; rm /tmp/x.$$
head -c 50000000 /dev/zero | tr '\0' e >&2`
	p := start(t, Options{ConfigPath: writePlugin(t, t.TempDir(), script), AppDir: appDir(t)})
	data, _ := json.Marshal(map[string]any{})
	resp, err := httpClient.Post(p.url+"/api/generate", "application/json", strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	n := len(raw)
	var g generateAnswer
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if g.Error != "" {
		t.Fatalf("error: %.300s", g.Error)
	}
	if g.Count != 500 || !g.Truncated || g.Shown == 0 || g.Shown >= 500 || len(g.Manifests) != g.Shown || g.Bytes < 50_000_000 {
		t.Errorf("count %d shown %d truncated %v bytes %d", g.Count, g.Shown, g.Truncated, g.Bytes)
	}
	if n > 5<<20 {
		t.Errorf("the answer is %d bytes", n)
	}
	if s := g.Commands[0].Stderr; len(s) > 70<<10 || !strings.Contains(s, "more bytes dropped") {
		t.Errorf("stderr of %d bytes: %.100s", len(s), s)
	}
	t.Logf("50 MB plugin: %d objects, %d shown, answer %d bytes, run %.0f ms", g.Count, g.Shown, n, g.DurationMS)
}

func TestBadInput(t *testing.T) {
	p := start(t, Options{ConfigPath: writePlugin(t, t.TempDir(), "true"), AppDir: appDir(t)})
	for _, tc := range []struct {
		name, path, contentType, body string
		code                          int
		want                          string
	}{
		{"malformed JSON", "/api/generate", "application/json", `{"parameters": [`, 400, "request body is not the expected JSON object"},
		{"parameters not a list", "/api/generate", "application/json", `{"parameters": {"name": "x"}}`, 400, "found a mapping (JSON object) at the top level"},
		{"parameter without a name", "/api/announce", "application/json", `{"parameters": [{"string": "x"}]}`, 400, "parameter 0: name is required"},
		{"map of numbers", "/api/environ", "application/json", `{"parameters": [{"name": "m", "map": {"a": 1}}]}`, 400, "found a number in map"},
		{"unknown field", "/api/generate", "application/json", `{"paramters": []}`, 400, `unknown field "paramters"`},
		{"two values", "/api/generate", "application/json", `{} {}`, 400, "more than one JSON value"},
		{"plugin env without name", "/api/generate", "application/json", `{"env": {"pluginEnv": [{"value": "x"}]}}`, 400, "env.pluginEnv[0]: name is required"},
		{"form post", "/api/generate", "application/x-www-form-urlencoded", `a=b`, 415, "application/json"},
		{"huge body", "/api/generate", "application/json", `{"session": "` + strings.Repeat("x", maxBody) + `"}`, 400, "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out map[string]any
			code := p.postRaw(t, tc.path, tc.contentType, []byte(tc.body), &out)
			if code != tc.code || !strings.Contains(fmt.Sprint(out["error"]), tc.want) {
				t.Errorf("%d %v, want %d and %q", code, out["error"], tc.code, tc.want)
			}
		})
	}
	// Requests a web page could make on the author's behalf.
	req, _ := http.NewRequest(http.MethodGet, p.url+"/api/state", nil)
	req.Host = "attacker.example:7777"
	if resp, err := httpClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("rebound host: %v %v", resp.StatusCode, err)
	}
	req, _ = http.NewRequest(http.MethodPost, p.url+"/api/generate", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "http://attacker.example")
	if resp, err := httpClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin post: %v %v", resp.StatusCode, err)
	}
}

func TestPage(t *testing.T) {
	p := start(t, Options{ConfigPath: writePlugin(t, t.TempDir(), "true"), AppDir: appDir(t)})
	for path, want := range map[string]string{"/": "<title>", "/app.js": "EventSource", "/style.css": ".param"} {
		resp, err := httpClient.Get(p.url + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("%s: %d, %d bytes, CSP %q", path, resp.StatusCode, len(b), resp.Header.Get("Content-Security-Policy"))
		}
		// Nothing is loaded from elsewhere: the page works offline.
		if strings.Contains(string(b), "http://") || strings.Contains(string(b), "https://") {
			t.Errorf("%s refers to another site", path)
		}
	}
}

func TestListen(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:7777": "loopback", "[::1]:7777": "loopback", "localhost:7777": "loopback",
		"0.0.0.0:7777": "remote", "192.0.2.1:7777": "remote",
		":7777": "error", "example.com:7777": "error", "7777": "error",
	} {
		loopback, err := checkListen(addr)
		got := "remote"
		if err != nil {
			got = "error"
		} else if loopback {
			got = "loopback"
		}
		if got != want {
			t.Errorf("checkListen(%q) = %s (%v), want %s", addr, got, err, want)
		}
	}
	s, err := New(Options{ConfigPath: writePlugin(t, t.TempDir(), "true"), AppDir: appDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	err = s.ListenAndServe(context.Background(), "0.0.0.0:0", false)
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("non-loopback without --listen: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := New(Options{ConfigPath: filepath.Join(dir, "missing.yaml"), AppDir: dir}); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing plugin.yaml: %v", err)
	}
	cfg := writePlugin(t, dir, "true")
	if _, err := New(Options{ConfigPath: cfg, AppDir: filepath.Join(dir, "nope")}); err == nil {
		t.Error("missing app dir accepted")
	}
	if _, err := New(Options{ConfigPath: cfg, AppDir: dir, RepoRoot: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "not inside --repo-root") {
		t.Errorf("app dir outside the repo: %v", err)
	}
}

// TestEventStreamsCapped: at most 64 pages follow changes at once (each holds
// a connection, a goroutine and buffers: 5,000 took 151 MB); one more is
// answered 503 with why, and a slot frees when a page goes.
func TestEventStreamsCapped(t *testing.T) {
	dir := t.TempDir()
	p := start(t, Options{ConfigPath: writePlugin(t, dir, "true"), AppDir: appDir(t)})
	cancels := make([]context.CancelFunc, 0, 64)
	defer func() {
		for _, cancel := range cancels {
			cancel()
		}
	}()
	for i := range 64 {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		if ev := nextEvent(t, readEvents(t, ctx, p.url), "hello"); ev["event"] != "hello" {
			t.Fatalf("stream %d: first event = %v", i, ev)
		}
	}
	status, body := getEvents(t, p.url)
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "too many pages follow changes: 64 already do (limit --max-event-streams)") {
		t.Fatalf("stream 65 got %d %q, want 503 naming the limit", status, body)
	}
	cancels[0]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if status, _ = getEvents(t, p.url); status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot after a page went: %d", status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// getEvents opens an event stream and returns its status, and its body if it
// is not a stream.
func getEvents(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return resp.StatusCode, ""
	}
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}
