package playground

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/local"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// maxBody bounds a request body: parameters for 500 leaves are well below it.
const maxBody = 8 << 20

// Handler is the page and the JSON API (documented in docs/playground.md).
// listenAddr is where the server listens: on a loopback address, requests must
// name a loopback host, so that a web page the author visits cannot reach the
// playground through DNS rebinding.
func (s *Server) Handler(listenAddr string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /", assetHandler())
	mux.HandleFunc("GET /api/state", s.handleState)
	mux.HandleFunc("POST /api/environ", s.handleEnviron)
	mux.HandleFunc("POST /api/discover", s.handleDiscover)
	mux.HandleFunc("POST /api/announce", s.handleAnnounce)
	mux.HandleFunc("POST /api/generate", s.handleGenerate)
	mux.HandleFunc("GET /api/events", s.handleEvents)
	return guard(listenAddr, mux)
}

// guard refuses requests a browser could send on behalf of another site: a Host
// that is not loopback while we listen on loopback (DNS rebinding), a POST that
// is not JSON (a plain form post needs no CORS preflight) or that comes from
// another origin.
func guard(listenAddr string, next http.Handler) http.Handler {
	loopback, _ := checkListen(listenAddr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopback && !loopbackHost(r.Host) {
			writeError(w, http.StatusForbidden, fmt.Errorf("host %q is not this machine: open the playground at http://%s/", r.Host, listenAddr))
			return
		}
		if r.Method == http.MethodPost {
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
				writeError(w, http.StatusUnsupportedMediaType, errors.New("send the request body as Content-Type: application/json"))
				return
			}
			if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
				writeError(w, http.StatusForbidden, fmt.Errorf("origin %q may not use the playground", o))
				return
			}
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// input is the body of every POST: what the page's form holds.
type input struct {
	// Parameters is the Application's spec.source.plugin.parameters, what
	// ARGOCD_APP_PARAMETERS carries: [{name, string | array | map}].
	Parameters json.RawMessage `json:"parameters"`
	// Env overrides the build env; absent fields keep the command line's.
	Env *BuildEnv `json:"env"`
	// Session identifies one page: a newer run of the same kind from the same
	// session cancels the older one.
	Session string `json:"session"`
}

// BuildEnv is what the repo-server knows about the Application, turned into the
// ARGOCD_APP_*, KUBE_* and ARGOCD_ENV_* variables.
type BuildEnv struct {
	AppName         string      `json:"appName"`
	Namespace       string      `json:"namespace"`
	Project         string      `json:"project"`
	Revision        string      `json:"revision"`
	RepoURL         string      `json:"repoURL"`
	TargetRevision  string      `json:"targetRevision"`
	KubeVersion     string      `json:"kubeVersion"`
	KubeAPIVersions []string    `json:"kubeAPIVersions"`
	PluginEnv       []NameValue `json:"pluginEnv"`
}

// NameValue is one variable.
type NameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func buildEnvOf(a client.App) BuildEnv {
	b := BuildEnv{AppName: a.Name, Namespace: a.Namespace, Project: a.Project, Revision: a.Revision,
		RepoURL: a.RepoURL, TargetRevision: a.TargetRevision, KubeVersion: a.KubeVersion,
		KubeAPIVersions: a.KubeAPIVersions, PluginEnv: []NameValue{}}
	if b.KubeAPIVersions == nil {
		b.KubeAPIVersions = []string{}
	}
	for _, kv := range a.PluginEnv {
		n, v, _ := strings.Cut(kv, "=")
		b.PluginEnv = append(b.PluginEnv, NameValue{n, v})
	}
	return b
}

// decode reads an input and resolves it into the Application the repo-server
// would describe. Every problem is the caller's: a 400 with the reason.
func (s *Server) decode(w http.ResponseWriter, r *http.Request) (input, client.App, error) {
	var in input
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, client.App{}, fmt.Errorf("request body is not the expected JSON object: %w", err)
	}
	if dec.More() {
		return in, client.App{}, errors.New("request body holds more than one JSON value")
	}
	ps, err := params.Decode(in.Parameters)
	if err != nil {
		return in, client.App{}, fmt.Errorf("parameters: %w", err)
	}
	app := s.opts.App
	if e := in.Env; e != nil {
		app.Name, app.Namespace, app.Project, app.Revision = e.AppName, e.Namespace, e.Project, e.Revision
		app.RepoURL, app.TargetRevision, app.KubeVersion = e.RepoURL, e.TargetRevision, e.KubeVersion
		app.KubeAPIVersions = nil
		for _, v := range e.KubeAPIVersions {
			if v = strings.TrimSpace(v); v != "" {
				app.KubeAPIVersions = append(app.KubeAPIVersions, v)
			}
		}
		app.PluginEnv = nil
		for i, nv := range e.PluginEnv {
			if nv.Name == "" {
				return in, client.App{}, fmt.Errorf("env.pluginEnv[%d]: name is required", i)
			}
			if strings.Contains(nv.Name, "=") {
				return in, client.App{}, fmt.Errorf("env.pluginEnv[%d]: name %q contains =", i, nv.Name)
			}
			app.PluginEnv = append(app.PluginEnv, nv.Name+"="+nv.Value)
		}
	}
	app.SourcePath = s.appRelPath
	app.Parameters = ps
	app.HasPlugin = true
	return in, app, nil
}

// stateResponse is GET /api/state.
type stateResponse struct {
	Plugin      *pluginInfo           `json:"plugin"`
	ConfigPath  string                `json:"configPath"`
	ConfigError string                `json:"configError,omitempty"`
	Warnings    []string              `json:"warnings"`
	AppDir      string                `json:"appDir"`
	RepoRoot    string                `json:"repoRoot"`
	AppRelPath  string                `json:"appRelPath"`
	Discovery   discoveryRule         `json:"discovery"`
	Env         BuildEnv              `json:"env"`
	Parameters  []params.AppParameter `json:"parameters"`
	Seq         uint64                `json:"seq"`
}

type pluginInfo struct {
	Name            string `json:"name"`
	Version         string `json:"version,omitempty"`
	Socket          string `json:"socket"`
	HasInit         bool   `json:"hasInit"`
	HasDynamic      bool   `json:"hasDynamicParameters"`
	StaticCount     int    `json:"staticParameters"`
	ProvideGitCreds bool   `json:"provideGitCreds"`
}

func (s *Server) handleState(w http.ResponseWriter, _ *http.Request) {
	p, warnings, err := s.current()
	resp := stateResponse{ConfigPath: s.opts.ConfigPath, Warnings: warnings, AppDir: s.opts.AppDir,
		RepoRoot: s.opts.RepoRoot, AppRelPath: s.appRelPath, Env: buildEnvOf(s.opts.App),
		Parameters: s.opts.Parameters}
	resp.Seq = s.events.current()
	if resp.Warnings == nil {
		resp.Warnings = []string{}
	}
	if resp.Parameters == nil {
		resp.Parameters = []params.AppParameter{}
	}
	if err != nil {
		resp.ConfigError = err.Error()
	} else {
		resp.Plugin = &pluginInfo{Name: p.Metadata.Name, Version: p.Spec.Version, Socket: p.SocketName(),
			HasInit: p.Spec.Init != nil && len(p.Spec.Init.Command) > 0, ProvideGitCreds: p.Spec.ProvideGitCreds}
		if ps := p.Spec.Parameters; ps != nil {
			resp.Plugin.HasDynamic = ps.Dynamic != nil && len(ps.Dynamic.Command) > 0
			resp.Plugin.StaticCount = len(ps.Static)
		}
		resp.Discovery = ruleOf(p)
	}
	writeJSON(w, http.StatusOK, resp)
}

// environResponse is POST /api/environ: what the commands will see.
type environResponse struct {
	// Env is the request env of GenerateManifest, in the repo-server's order.
	Env []NameValue `json:"env"`
	// AppParameters is the ARGOCD_APP_PARAMETERS value.
	AppParameters string `json:"appParameters"`
	// ParamVars are the PARAM_* variables, a subset of Env.
	ParamVars []NameValue `json:"paramVars"`
	// AnnounceEnv is the smaller env of GetParametersAnnouncement.
	AnnounceEnv []NameValue `json:"announceEnv"`
}

func (s *Server) handleEnviron(w http.ResponseWriter, r *http.Request) {
	_, app, err := s.decode(w, r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	env, err := app.Environ()
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	announce, err := app.ParametersEnviron()
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	resp := environResponse{Env: pairs(env), AnnounceEnv: pairs(announce), ParamVars: []NameValue{}}
	for _, nv := range resp.Env {
		switch {
		case nv.Name == keys.EnvAppParameters:
			resp.AppParameters = nv.Value
		case strings.HasPrefix(nv.Name, params.EnvPrefix):
			resp.ParamVars = append(resp.ParamVars, nv)
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func pairs(env []string) []NameValue {
	out := make([]NameValue, 0, len(env))
	for _, kv := range env {
		n, v, _ := strings.Cut(kv, "=")
		out = append(out, NameValue{n, v})
	}
	return out
}

// commandResult is one plugin command as the page shows it.
type commandResult struct {
	Phase      string  `json:"phase"`
	Argv       string  `json:"argv"`
	Exit       string  `json:"exit"`
	DurationMS float64 `json:"durationMs"`
	Stderr     string  `json:"stderr"`
	Stopped    string  `json:"stopped,omitempty"`
}

// runResult is the part every run answer shares.
type runResult struct {
	// Error is the run's error in Argo CD's words ("" on success).
	Error string `json:"error,omitempty"`
	// Cancelled is set when a newer run (or the page leaving) stopped this one.
	Cancelled  bool            `json:"cancelled,omitempty"`
	DurationMS float64         `json:"durationMs"`
	Commands   []commandResult `json:"commands"`
}

// recorder collects the command reports of one run.
type recorder struct {
	mu   sync.Mutex
	cmds []commandResult
}

func (c *recorder) add(r command.Report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cmds = append(c.cmds, commandResult{Phase: r.Phase, Argv: r.Argv, Exit: r.Exit,
		DurationMS: ms(r.Duration), Stderr: r.Stderr, Stopped: r.Stopped})
}

func (c *recorder) result(ctx context.Context, start time.Time, err error) runResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	res := runResult{DurationMS: ms(time.Since(start)), Commands: c.cmds}
	if res.Commands == nil {
		res.Commands = []commandResult{}
	}
	if err != nil {
		res.Error = err.Error()
		if cause := context.Cause(ctx); cause != nil {
			res.Cancelled = true
			res.Error = "cancelled (" + cause.Error() + "): " + res.Error
		}
	}
	return res
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// run prepares one run of kind: input, plugin, env, cancellation of the
// previous run of the same kind. It writes the error answer itself and
// returns ok=false when there is nothing to run.
func (s *Server) run(w http.ResponseWriter, r *http.Request, kind string, announce bool,
	fn func(ctx context.Context, req local.Request) (any, error)) {
	in, app, err := s.decode(w, r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	environ := app.Environ
	if announce {
		environ = app.ParametersEnviron
	}
	env, err := environ()
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	p, _, cerr := s.current()
	ctx, done := s.runs.start(r.Context(), in.Session, kind)
	defer done()
	var rec recorder
	start := time.Now()
	var out any
	if cerr != nil {
		err = cerr
	} else {
		out, err = fn(ctx, s.request(p, env, rec.add))
	}
	res := rec.result(ctx, start, err)
	if r.Context().Err() != nil {
		return // the page is gone
	}
	if err != nil && !res.Cancelled {
		s.log.Info("run failed", zap.String("kind", kind), zap.Error(err))
	}
	writeJSON(w, http.StatusOK, merge(res, out))
}

// merge renders res and the kind-specific answer as one JSON object.
func merge(res runResult, extra any) json.RawMessage {
	base, _ := json.Marshal(res)
	if extra == nil {
		return base
	}
	more, err := json.Marshal(extra)
	if err != nil || len(more) < 2 || string(more) == "{}" {
		return base
	}
	// Both are JSON objects: splice them.
	return append(append(base[:len(base)-1:len(base)-1], ','), more[1:]...)
}

// discoveryRule names the rule that decides, as Argo CD evaluates only the first
// one configured.
type discoveryRule struct {
	Configured bool `json:"configured"`
	// Rule is fileName, find.glob or find.command ("" when none is set).
	Rule string `json:"rule,omitempty"`
	// Value is the pattern or the command.
	Value string `json:"value,omitempty"`
	// Ignored lists the rules that are set but never evaluated.
	Ignored []string `json:"ignored,omitempty"`
}

func ruleOf(p *pluginconfig.Plugin) discoveryRule {
	d := p.Spec.Discover
	var set []discoveryRule
	if d != nil {
		if d.FileName != "" {
			set = append(set, discoveryRule{Rule: "fileName", Value: d.FileName})
		}
		if d.Find != nil && d.Find.Glob != "" {
			set = append(set, discoveryRule{Rule: "find.glob", Value: d.Find.Glob})
		}
		if d.Find != nil && len(d.Find.Command.Command) > 0 {
			argv := append(append([]string{}, d.Find.Command.Command...), d.Find.Args...)
			set = append(set, discoveryRule{Rule: "find.command", Value: strings.Join(argv, " ")})
		}
	}
	if len(set) == 0 {
		return discoveryRule{}
	}
	out := set[0]
	out.Configured = true
	for _, o := range set[1:] {
		out.Ignored = append(out.Ignored, o.Rule)
	}
	return out
}

// discoverResponse is the kind-specific part of POST /api/discover.
type discoverResponse struct {
	discoveryRule
	Matched bool `json:"matched"`
	// Explanation says in words what decided.
	Explanation string `json:"explanation"`
}

func (s *Server) handleDiscover(w http.ResponseWriter, r *http.Request) {
	s.run(w, r, "discover", false, func(ctx context.Context, req local.Request) (any, error) {
		rule := ruleOf(req.Plugin)
		matched, err := local.Match(ctx, req)
		resp := discoverResponse{discoveryRule: rule, Matched: matched}
		switch {
		case err != nil:
			resp.Explanation = fmt.Sprintf("%s failed: the repo-server treats this as a failed probe, not as no match", rule.Rule)
		case !rule.Configured:
			resp.Explanation = "no discovery rule: Applications must name the plugin (spec.source.plugin.name: " + strings.TrimSuffix(req.Plugin.SocketName(), ".sock") + ")"
		case matched && rule.Rule == "find.command":
			resp.Explanation = "find.command exited 0 and printed something: the plugin matches"
		case matched:
			resp.Explanation = fmt.Sprintf("%s %q matches a path in the app dir", rule.Rule, rule.Value)
		case rule.Rule == "find.command":
			resp.Explanation = "find.command exited 0 but printed nothing: no match"
		default:
			resp.Explanation = fmt.Sprintf("%s %q matches nothing in the app dir", rule.Rule, rule.Value)
		}
		return resp, err
	})
}

// announcement is one merged entry, with where it came from.
type announcement struct {
	params.Announcement
	Source string `json:"source"` // dynamic or static
}

type announceResponse struct {
	Announcements []announcement `json:"announcements"`
	Problems      []Problem      `json:"problems"`
}

func (s *Server) handleAnnounce(w http.ResponseWriter, r *http.Request) {
	s.run(w, r, "announce", true, func(ctx context.Context, req local.Request) (any, error) {
		as, err := local.Parameters(ctx, req)
		if err != nil {
			return nil, err
		}
		static := 0
		if ps := req.Plugin.Spec.Parameters; ps != nil {
			static = len(ps.Static)
		}
		resp := announceResponse{Announcements: make([]announcement, len(as)), Problems: lint(as, len(as)-static)}
		for i, a := range as {
			src := "dynamic"
			if i >= len(as)-static {
				src = "static"
			}
			resp.Announcements[i] = announcement{a, src}
		}
		return resp, nil
	})
}

func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	s.run(w, r, "generate", false, func(ctx context.Context, req local.Request) (any, error) {
		manifests, err := local.Generate(ctx, req)
		if err != nil {
			return nil, err
		}
		return cards(manifests, s.opts.MaxShownBytes), nil
	})
}

// handleEvents streams a "change" event whenever the app dir or plugin.yaml
// changes, and a comment every 15 s so that proxies keep the stream open.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, errors.New("streaming is not supported"))
		return
	}
	ch, seq, unsubscribe, err := s.events.subscribe()
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	defer unsubscribe()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 1000\nevent: hello\ndata: {\"seq\":%d}\n\n", seq)
	fl.Flush()
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
				return
			}
		case ev := <-ch:
			data, _ := json.Marshal(ev)
			if _, err := fmt.Fprintf(w, "id: %d\nevent: change\ndata: %s\n\n", ev.Seq, data); err != nil {
				return
			}
		}
		fl.Flush()
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
