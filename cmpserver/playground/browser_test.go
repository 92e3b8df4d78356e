//go:build browser

// The browser test: Debian's chromium, headless, driven over the DevTools
// protocol by chromedp, against a real playground running the Helm example
// plugin. `make browser` runs it (part of `make test`); it needs
// `hack/tools.sh chromium helm`.
package playground

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// browser is one headless chromium with one tab.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts chromium for t and makes sure every process of it is gone
// when t ends: chromedp kills the browser with its context, then its process
// group is killed, and any child that left the group (the zygote, a renderer)
// is found by the user data dir on its command line and killed.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	chromium := harness.MustTool(t, "chromium")
	dataDir := filepath.Join(t.TempDir(), "chromium-profile")
	var browserCmd *exec.Cmd
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(dataDir),
		chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			// A process group of its own, killed whole at the end.
			if cmd.SysProcAttr == nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{}
			}
			cmd.SysProcAttr.Setpgid = true
			browserCmd = cmd
		}),
	)
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses to run as root (CI containers).
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		if browserCmd != nil && browserCmd.Process != nil {
			_ = syscall.Kill(-browserCmd.Process.Pid, syscall.SIGKILL)
		}
		if n := killByArg(dataDir); n > 0 {
			t.Logf("killed %d chromium processes left behind", n)
		}
	})
	// Start the browser now so that a chromium that cannot start fails here
	// with its reason. The first run's context owns the browser (a timeout on
	// it would kill it later), so the bound is a timer here.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting chromium: %v", err)
		}
	case <-time.After(60 * time.Second):
		cancelAlloc()
		t.Fatal("chromium did not start within 60s")
	}
	return &browser{t: t, ctx: ctx}
}

// killByArg SIGKILLs every process whose command line contains arg (our
// chromium's profile dir, unique to this test) and returns how many there were.
func killByArg(arg string) int {
	n := 0
	for range 20 {
		found := 0
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if err != nil || !strings.Contains(string(cmdline), arg) {
				continue
			}
			found++
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if found == 0 {
			return n
		}
		n += found
		time.Sleep(50 * time.Millisecond)
	}
	return n
}

// do runs actions, bounded by 30 s.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\npage: %s", what, err, b.pageState())
	}
}

// eval evaluates a JavaScript expression into T, bounded by 10 s.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition every 25 ms until it is true, for at
// most timeout.
func (b *browser) waitFor(what, cond string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waiting %s for %s (%s): %v\npage: %s", timeout, what, cond, err, b.pageState())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// pageState is what a failure message shows of the page.
func (b *browser) pageState() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`['#status', '#config-error', '#discovery', '#announce-error', '#run-status', '#run-error', '#commands', '#manifests']
		.map(s => s + ': ' + (document.querySelector(s) ? document.querySelector(s).innerText.slice(0, 400) : '-')).join('\n')`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// screenshot saves the whole page as a test artifact and prints its path.
func (b *browser) screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	// From the top, where the sticky header belongs.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)); err != nil {
		b.t.Fatalf("scrolling: %v", err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 is PNG
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(b.t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
	return path
}

// js quotes s as a JavaScript string.
func js(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// rowOf is the CSS selector of the row of map parameter param whose key is key.
func rowOf(b *browser, param, key string) string {
	b.t.Helper()
	i := eval[int](b, fmt.Sprintf(`[...document.querySelectorAll('[data-param=%s] .row')].findIndex(r => r.querySelector('.key').value === %s)`, js(param), js(key)))
	if i < 0 {
		b.t.Fatalf("no row %q in parameter %q\npage: %s", key, param, b.pageState())
	}
	return fmt.Sprintf(`[data-param=%q] .row[data-row="%d"]`, param, i)
}

func TestBrowserHelmPlugin(t *testing.T) {
	withHelm(t)
	chart := copyChart(t)
	p := start(t, Options{ConfigPath: helmPlugin(t), AppDir: chart, PollInterval: defaultPollInterval})
	b := newBrowser(t)

	b.do("open the page", chromedp.Navigate(p.url+"/"))
	b.waitFor("the first manifests", `document.body.dataset.rendered >= 1`, 60*time.Second)
	b.waitFor("the parameters", `document.querySelector('[data-param="helm-parameters"]')`, 10*time.Second)
	if got := eval[string](b, `document.querySelector('#discovery').innerText`); !strings.Contains(got, "Matches") || !strings.Contains(got, "fileName") {
		t.Errorf("discovery shows %q", got)
	}
	if got := eval[string](b, `document.querySelector('#manifests').innerText`); !strings.Contains(got, "greeting: hello") {
		t.Fatalf("first manifests: %q", got)
	}

	// A values file edited on disk: the manifests and the announced defaults
	// follow without a reload.
	rendered := eval[int](b, `window.playground.rendered`)
	values := filepath.Join(chart, "values.yaml")
	data, err := os.ReadFile(values)
	if err != nil {
		t.Fatal(err)
	}
	edited := time.Now()
	if err := os.WriteFile(values, []byte(strings.Replace(string(data), "greeting: hello", "greeting: bonjour", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	b.waitFor("the edited values on the page", `document.querySelector('#manifests').innerText.includes('greeting: bonjour')`, 30*time.Second)
	renderedAt := eval[float64](b, `window.playground.renderedAt`)
	t.Logf("file edit to updated manifests on the page: %d ms (poll interval %s; of which the generate request %d ms; manifests rendered %d times before)",
		time.UnixMilli(int64(renderedAt)).Sub(edited).Milliseconds(), defaultPollInterval, eval[int](b, `window.playground.lastRunMs`), rendered)
	b.waitFor("the new default in the form", fmt.Sprintf(`document.querySelector(%s + ' .val').value === 'bonjour'`, js(rowOf(b, "helm-parameters", "greeting"))), 10*time.Second)

	// A map parameter and a boolean, set with the keyboard and the mouse.
	b.do("add a helm-parameters entry", chromedp.Click(chromedp.CSS(`[data-param="helm-parameters"] button.add`)))
	newRow := fmt.Sprintf(`[data-param="helm-parameters"] .row[data-row="%d"]`,
		eval[int](b, `document.querySelectorAll('[data-param="helm-parameters"] .row').length - 1`))
	// The new row is part of the parameter, but not sent before it has a key.
	b.waitFor("the map as an Application parameter", `document.querySelector('#app-parameters').textContent.includes('"name":"helm-parameters"')`, 10*time.Second)
	if got := eval[string](b, `document.querySelector('#app-parameters').textContent`); strings.Contains(got, `"":`) {
		t.Errorf("a row without a key was sent: %s", got)
	}
	b.do("type the entry",
		chromedp.SendKeys(chromedp.CSS(newRow+" .key"), "extra.note"),
		chromedp.SendKeys(chromedp.CSS(newRow+" .val"), "set in the browser"))
	b.do("tick feature.enabled", chromedp.Click(chromedp.CSS(rowOf(b, "helm-boolean-parameters", "feature.enabled")+" .val")))
	b.waitFor("ARGOCD_APP_PARAMETERS", `document.querySelector('#app-parameters').textContent.includes('"extra.note":"set in the browser"')`, 10*time.Second)
	b.waitFor("the PARAM_ variable", `document.querySelector('#param-vars').innerText.includes('PARAM_HELM_BOOLEAN_PARAMETERS_FEATURE_ENABLED')`, 10*time.Second)
	b.do("click Generate", chromedp.Click(chromedp.CSS("#generate")))
	b.waitFor("the parameters in the manifest", `(t => t.includes('note: set in the browser') && t.includes('feature: "on"'))(document.querySelector('#manifests').innerText)`, 60*time.Second)
	if got := eval[string](b, `document.querySelector('#run-status').innerText`); !strings.HasPrefix(got, "OK · exit 0") || !strings.Contains(got, "1 object") {
		t.Errorf("run status %q", got)
	}
	if got := eval[string](b, `document.querySelector('.manifest header').innerText`); !strings.Contains(got, "ConfigMap") || !strings.Contains(got, "chart-config") {
		t.Errorf("card header %q", got)
	}
	shot := b.screenshot("playground-helm.png")
	fmt.Printf("playground screenshot (Helm example plugin): %s\n", shot)

	// The build env side panel, with the keyboard: the app name is the
	// release name, so the manifest follows it.
	b.do("open the build env", chromedp.Click(chromedp.CSS("#env-toggle")))
	if !eval[bool](b, `document.activeElement === document.querySelector('#env-form [name=appName]')`) {
		t.Fatalf("the panel did not take the focus\npage: %s", b.pageState())
	}
	eval[chromedp.Void](b, `document.activeElement.select()`)
	b.do("rename the app", chromedp.KeyEvent("shop"))
	b.waitFor("ARGOCD_APP_NAME in the env", `[...document.querySelectorAll('#full-env tr')].some(r => r.textContent === 'ARGOCD_APP_NAMEshop')`, 10*time.Second)
	b.waitFor("the renamed release", `document.querySelector('.manifest header').innerText.includes('shop-config')`, 30*time.Second)
	b.do("close the panel", chromedp.KeyEvent(kb.Escape))
	if !eval[bool](b, `document.querySelector('#env-panel').hidden && document.activeElement === document.querySelector('#env-toggle')`) {
		t.Error("Escape did not close the panel and return the focus")
	}
}

func TestBrowserFailingPlugin(t *testing.T) {
	dir := t.TempDir()
	cfg := writePlugin(t, dir, `echo "Error: template: demo/templates/cm.yaml:7: unexpected {{end}}" >&2; exit 3`)
	p := start(t, Options{ConfigPath: cfg, AppDir: appDir(t)})
	b := newBrowser(t)
	b.do("open the page", chromedp.Navigate(p.url+"/"))
	b.waitFor("the failed run", `document.body.dataset.rendered >= 1`, 60*time.Second)
	if got := eval[string](b, `document.querySelector('#run-status').innerText`); !strings.HasPrefix(got, "Failed · exit 3") {
		t.Errorf("run status %q", got)
	}
	errText := eval[string](b, `document.querySelector('#run-error').innerText`)
	if !strings.Contains(errText, "failed exit status 3: Error: template: demo/templates/cm.yaml:7") || !strings.Contains(errText, "its stderr is below") {
		t.Errorf("error banner %q", errText)
	}
	if got := eval[string](b, `document.querySelector('#commands pre.stderr').innerText`); !strings.Contains(got, "unexpected {{end}}") {
		t.Errorf("stderr shown %q", got)
	}
	if eval[bool](b, `document.querySelector('#run-error').hidden`) {
		t.Error("the error banner is hidden")
	}
	b.screenshot("playground-failing.png")
}

// The Helm plugin announces every leaf of values.yaml: a page with 500
// parameters must stay usable. This measures it; it asserts only that every
// parameter is there and that typing reaches the env panel.
func TestBrowserManyParameters(t *testing.T) {
	dir := t.TempDir()
	var as []map[string]any
	for i := range 500 {
		a := map[string]any{"name": fmt.Sprintf("param-%03d", i), "title": fmt.Sprintf("Parameter %d", i), "tooltip": "one of many"}
		switch i % 4 {
		case 1:
			a["itemType"], a["string"] = "number", strconv.Itoa(i)
		case 2:
			a["itemType"], a["string"] = "boolean", "false"
		case 3:
			a["collectionType"], a["map"] = "map", map[string]string{"a": "1", "b": "2"}
		}
		as = append(as, a)
	}
	announcement, _ := json.Marshal(as)
	if err := os.WriteFile(filepath.Join(dir, "announce.json"), announcement, 0o644); err != nil {
		t.Fatal(err)
	}
	plugin := fmt.Sprintf(`kind: ConfigManagementPlugin
metadata: {name: many}
spec:
  generate: {command: [sh, -c, 'echo "{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"many\"}}"']}
  parameters:
    dynamic: {command: [cat, %s]}
`, filepath.Join(dir, "announce.json"))
	cfg := filepath.Join(dir, "plugin.yaml")
	if err := os.WriteFile(cfg, []byte(plugin), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, Options{ConfigPath: cfg, AppDir: appDir(t)})
	b := newBrowser(t)
	opened := time.Now()
	b.do("open the page", chromedp.Navigate(p.url+"/"))
	b.waitFor("500 parameters", `document.querySelectorAll('#param-list .param').length === 500`, 60*time.Second)
	t.Logf("500 parameters on the page %d ms after navigation, of which building them took %.0f ms in the page",
		time.Since(opened).Milliseconds(), eval[float64](b, `window.playground.renderMs`))
	// One keystroke's handler, measured in the page: the override and the
	// warning; then the round trip to the env panel.
	ms := eval[float64](b, `(() => { const i = document.querySelector('[data-param="param-001"] .val'); const t0 = performance.now();
		i.value = 'x'; i.dispatchEvent(new Event('input', {bubbles: true})); return performance.now() - t0; })()`)
	typed := time.Now()
	b.waitFor("the env panel", `document.querySelector('#param-vars').innerText.includes('PARAM_PARAM_001')`, 10*time.Second)
	t.Logf("500 parameters: input handler %.1f ms; keystroke to PARAM_ variables shown %d ms", ms, time.Since(typed).Milliseconds())
	if got := eval[string](b, `document.querySelector('[data-param="param-001"] .warn').innerText`); !strings.Contains(got, `"x" is not a number`) {
		t.Errorf("number warning %q", got)
	}
	// "/" jumps to the filter from anywhere but a text field.
	eval[chromedp.Void](b, `document.activeElement.blur()`)
	b.do("press /", chromedp.KeyEvent("/"))
	if !eval[bool](b, `document.activeElement === document.querySelector('#filter')`) {
		t.Fatal("/ did not focus the filter")
	}
	// DevTools sends the "/" character as an event of its own, which the
	// keydown's preventDefault cannot stop as it stops a real key press.
	eval[chromedp.Void](b, `document.querySelector('#filter').value = ''`)
	b.do("filter", chromedp.KeyEvent("Parameter 49"))
	b.waitFor("the filter", `[...document.querySelectorAll('#param-list .param')].filter(p => !p.hidden).length === 11`, 10*time.Second)
}
