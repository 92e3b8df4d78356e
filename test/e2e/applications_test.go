package e2e

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// Applications through the whole Argo CD, as its users work: the repo-server
// pod injected by the webhook and booted as in every chain test, and next to
// it Argo CD's API server and application controller (the pinned release's
// own binary), logged in with the admin password the API server generated.
// Applications are created through the API with plugin parameters and env,
// the UI's parameter form is read through the API, the controller refreshes
// and syncs, and the objects land in the cluster. A failing plugin and a
// tenant the catalog refuses show up where users look: the API's answer and
// the Application's conditions, our words inside Argo CD's.
//
// Most plugins render ConfigMaps, which have no health of their own. One
// renders a Deployment: this suite has no kubelet, so its pods are bound to a
// Node that kwok, the Kubernetes SIG's node simulator, keeps Ready and whose
// pods it marks Running and Ready (nothing runs them: what is proven is Argo
// CD's sync and health through our plugin, not the pods; the real node's test
// runs real ones).

// argoApp is the part of Argo CD's Application the cases write and read.
type (
	argoAppEnv struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	argoAppPlugin struct {
		Name       string       `json:"name,omitempty"`
		Env        []argoAppEnv `json:"env,omitempty"`
		Parameters []argoParam  `json:"parameters,omitempty"`
	}
	argoAppSource struct {
		RepoURL        string         `json:"repoURL"`
		Path           string         `json:"path"`
		TargetRevision string         `json:"targetRevision"`
		Plugin         *argoAppPlugin `json:"plugin,omitempty"`
	}
	argoApp struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Project     string        `json:"project"`
			Source      argoAppSource `json:"source"`
			Destination struct {
				Server    string `json:"server"`
				Namespace string `json:"namespace"`
			} `json:"destination"`
		} `json:"spec"`
		Status struct {
			Conditions []struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"conditions"`
			Sync struct {
				Status   string `json:"status"`
				Revision string `json:"revision"`
			} `json:"sync"`
			Health struct {
				Status string `json:"status"`
			} `json:"health"`
			Resources []struct {
				Kind, Name, Namespace, Status string
			} `json:"resources"`
		} `json:"status"`
	}
	argoAnnouncement struct {
		Name           string            `json:"name"`
		Title          string            `json:"title"`
		CollectionType string            `json:"collectionType"`
		String         string            `json:"string"`
		Array          []string          `json:"array"`
		Map            map[string]string `json:"map"`
	}
)

// The plugins of these cases: announce (static and dynamic parameters, prints
// what it was given) and broken (fails as a broken chart does); the tenant
// plugin is tenants_test.go's, limited to project team-a.
const (
	announcePlugin = "announce"
	brokenPlugin   = "broken"
	workloadPlugin = "workload"
	brokenMessage  = "render failed: values.yaml line 3: mapping values are not allowed here"
	inCluster      = "https://kubernetes.default.svc"
)

// wholeGitPlugins are gitcreds_test.go's plugins these cases use.
var wholeGitPlugins = []string{"git-private", "git-plain"}

// wholePlugins are the plugins the repo-server pod asks for.
func wholePlugins() []string {
	return append([]string{announcePlugin, brokenPlugin, workloadPlugin, projectPlugin}, wholeGitPlugins...)
}

// wholeArgoCatalog is tenantCatalog (team-a only) plus announce, broken and
// gitcreds_test.go's git-private (consenting) and git-plain, cloning private,
// all enabled for ns.
func wholeArgoCatalog(t *testing.T, ns, private string) []byte {
	t.Helper()
	cat, git := map[string]any{}, map[string]any{}
	if err := yaml.Unmarshal(tenantCatalog(t, ns, "team-a"), &cat); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(gitCredsCatalog(t, private), &git); err != nil {
		t.Fatal(err)
	}
	config := func(name string, spec map[string]any) map[string]any {
		return map[string]any{"image": "registry.example/e2e/shell:1", "config": map[string]any{"inline": map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "ConfigManagementPlugin",
			"metadata": map[string]any{"name": name}, "spec": spec}}}
	}
	plugins := cat["plugins"].(map[string]any)
	for _, name := range wholeGitPlugins {
		plugins[name] = git["plugins"].(map[string]any)[name]
	}
	plugins[announcePlugin] = config(announcePlugin, map[string]any{
		"parameters": map[string]any{
			"static": []any{
				map[string]any{"name": "greeting", "title": "Greeting", "string": "hello"},
				map[string]any{"name": "list", "collectionType": "array"},
				map[string]any{"name": "labels", "collectionType": "map"},
			},
			// What the repository announces: the UI's form shows it too.
			"dynamic": map[string]any{"command": []string{"cat", "announce.json"}},
		},
		"generate": map[string]any{"command": []string{"sh", "-c", `printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s"},"data":{"project":"%s"' "$ARGOCD_APP_NAME" "$ARGOCD_APP_PROJECT_NAME"
env | LC_ALL=C sort | while IFS= read -r kv; do
  case "$kv" in PARAM_*|ARGOCD_ENV_*) printf ',"%s":"%s"' "${kv%%=*}" "${kv#*=}" ;; esac
done
printf '}}\n'`}},
	})
	// A Deployment on the Node the Application names (ARGOCD_ENV_NODE): no
	// scheduler runs here, and kwok keeps that node's pods Ready.
	plugins[workloadPlugin] = config(workloadPlugin, map[string]any{
		"generate": map[string]any{"command": []string{"sh", "-c", `printf '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"%s"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"%s"}},"template":{"metadata":{"labels":{"app":"%s"}},"spec":{"nodeName":"%s","containers":[{"name":"app","image":"registry.example/e2e/app:1"}]}}}}\n' "$ARGOCD_APP_NAME" "$ARGOCD_APP_NAME" "$ARGOCD_APP_NAME" "$ARGOCD_ENV_NODE"`}},
	})
	plugins[brokenPlugin] = config(brokenPlugin, map[string]any{
		"generate": map[string]any{"command": []string{"sh", "-c", `echo "` + brokenMessage + `" >&2; exit 3`}},
	})
	cat["namespaces"] = map[string]any{ns: append([]string{"helm"}, wholePlugins()...)}
	b, err := yaml.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wholeArgo is the running stack of these cases.
type wholeArgo struct {
	argo              *harness.ArgoCD
	rs                *harness.RepoServer
	ns, repoURL, dest string
	node              string // kwok's
	user, password    string // of the private repository and the Application's repository Secret
}

// startWholeArgo starts the injector, boots an injected repo-server pod of
// rel and Argo CD's API server and controller around it in a fresh namespace.
func startWholeArgo(t *testing.T, rel harness.ArgoRelease, dir string) *wholeArgo {
	t.Helper()
	c := env.cp.Client()
	ns := newNamespace(t, "argo", enabledNS)
	user, password := "alice", randomHex(t)
	startInjector(t, wholeArgoCatalog(t, ns, privateGitServer(t, user, password)))
	waitActive(t, ns)
	redis, err := harness.StartRedis(filepath.Join(env.root, dir+"-redis"), redisSecret, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.Stop() })
	applyArgoConfig(t, ns, redis.Addr)
	rs, _ := (&libraryStack{ns: ns}).bootRepoServer(t, rel, strings.Join(wholePlugins(), ", "), dir)

	start := time.Now()
	argo, err := harness.StartArgoCD(c, rel, harness.ArgoServerOptions{
		Namespace: ns, RepoServer: rs.Addr, Redis: redis.Addr, RedisPassword: redisSecret,
		Kubeconfig: env.cp.Kubeconfig, Dir: filepath.Join(env.root, dir+"-argocd"),
	}, env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(argo.Stop)
	t.Logf("Argo CD %s API server and application controller up, CLI logged in, in %s", rel.Version, time.Since(start).Round(time.Millisecond))

	tree := t.TempDir()
	app := filepath.Join(tree, "apps", "whole")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	announce := `[{"name": "from-repo", "title": "From the repository", "string": "tide"}]`
	if err := os.WriteFile(filepath.Join(app, "announce.json"), []byte(announce), 0o644); err != nil {
		t.Fatal(err)
	}
	repoURL, _, err := harness.GitRepo(filepath.Join(t.TempDir(), "whole.git"), tree)
	if err != nil {
		t.Fatal(err)
	}
	return &wholeArgo{argo: argo, rs: rs, ns: ns, repoURL: repoURL, dest: newNamespace(t, "dest", nil), user: user, password: password}
}

// application is an Application of project rendering apps/whole through plugin.
func (w *wholeArgo) application(name, project string, plugin *argoAppPlugin) argoApp {
	var app argoApp
	app.Metadata.Name = name
	app.Spec.Project = project
	app.Spec.Source = argoAppSource{RepoURL: w.repoURL, Path: "apps/whole", TargetRevision: "HEAD", Plugin: plugin}
	app.Spec.Destination.Server = inCluster
	app.Spec.Destination.Namespace = w.dest
	return app
}

// create creates app through the API; validate is Argo CD's own check of the
// spec, which renders the source once before the Application is stored.
func (w *wholeArgo) create(app argoApp, validate bool) error {
	q := url.Values{"validate": {fmt.Sprint(validate)}}
	return w.argo.API(http.MethodPost, "/api/v1/applications?"+q.Encode(), app, nil)
}

// get reads Application name through the API.
func (w *wholeArgo) get(t *testing.T, name string) argoApp {
	t.Helper()
	var app argoApp
	if err := w.argo.API(http.MethodGet, harness.ApplicationPath(name), nil, &app); err != nil {
		t.Fatal(err)
	}
	return app
}

// waitCondition waits until Application name shows a condition of type kind
// and returns its message.
func (w *wholeArgo) waitCondition(t *testing.T, name, kind string) string {
	t.Helper()
	var msg string
	err := harness.Eventually(90*time.Second, 500*time.Millisecond, func() (bool, error) {
		if err := w.argo.Exited(); err != nil {
			return false, harness.Final(err)
		}
		app := w.get(t, name)
		for _, c := range app.Status.Conditions {
			if c.Type == kind {
				msg = c.Message
				return true, nil
			}
		}
		return false, fmt.Errorf("Application %s has conditions %+v, sync %q", name, app.Status.Conditions, app.Status.Sync.Status)
	})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// sync syncs Application name with the CLI and waits until it is Synced and
// Healthy.
func (w *wholeArgo) sync(t *testing.T, name string) argoApp {
	t.Helper()
	start := time.Now()
	if out, err := w.argo.CLI("app", "sync", name, "--timeout", "120"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := w.argo.CLI("app", "wait", name, "--sync", "--health", "--timeout", "120"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	app := w.get(t, name)
	t.Logf("argocd app sync %s: %s and %s in %s", name, app.Status.Sync.Status, app.Status.Health.Status, time.Since(start).Round(time.Millisecond))
	return app
}

// configMap reads the ConfigMap name of the destination namespace.
func (w *wholeArgo) configMap(t *testing.T, name string) map[string]string {
	t.Helper()
	data, found, err := env.cp.Client().ConfigMapData(w.dest, name)
	if err != nil || !found {
		t.Fatalf("ConfigMap %s/%s: found %v, %v", w.dest, name, found, err)
	}
	return data
}

// refused creates app through the API twice: with Argo CD's validation, which
// must refuse it with ours in its message, and without, after which the
// controller must show ours in a ComparisonError condition and nothing of it
// may land in the cluster.
func (w *wholeArgo) refused(t *testing.T, app argoApp, ours string) {
	t.Helper()
	err := w.create(app, true)
	var apiErr *harness.ArgoAPIError
	if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, ours) {
		t.Fatalf("creating Application %s: %v; want the API to refuse it with %q", app.Metadata.Name, err, ours)
	}
	if err := w.create(app, false); err != nil {
		t.Fatal(err)
	}
	msg := w.waitCondition(t, app.Metadata.Name, "ComparisonError")
	if !strings.Contains(msg, ours) {
		t.Errorf("Application %s's condition does not carry ours %q:\n%s", app.Metadata.Name, ours, msg)
	}
	t.Logf("Application %s: %s", app.Metadata.Name, msg)
	if _, found, _ := env.cp.Client().ConfigMapData(w.dest, app.Metadata.Name); found {
		t.Errorf("Application %s's ConfigMap exists", app.Metadata.Name)
	}
}

func TestApplicationsThroughArgoCD(t *testing.T) {
	rels, err := harness.ArgoReleases()
	if err != nil {
		t.Fatal(err)
	}
	node, err := harness.StartSimulatedNode(env.cp.Client(), env.cp.Kubeconfig, "kwok-apps", filepath.Join(env.root, "kwok"), env.logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Stop()
	for i, rel := range rels {
		t.Run("Argo CD "+rel.Version, func(t *testing.T) {
			w := startWholeArgo(t, rel, fmt.Sprintf("wa%d", i))
			w.node = node.Name
			applicationCases(t, w, rel)
		})
	}
}

// applicationCases are the users' cases on one release. Before v3.0 the
// repo-server sends no project, so the project-limited plugin refuses every
// Application (a rule that cannot be checked does not hold), and plugins get
// no git credentials before v2.14.
func applicationCases(t *testing.T, w *wholeArgo, rel harness.ArgoRelease) {
	v2 := strings.HasPrefix(rel.Version, "v2.")

	t.Run("the parameter form shows what the plugin announces", func(t *testing.T) {
		// What the UI posts when a user picks the plugin for a source.
		body := map[string]any{"source": argoAppSource{RepoURL: w.repoURL, Path: "apps/whole", TargetRevision: "HEAD",
			Plugin: &argoAppPlugin{Name: announcePlugin}}, "appName": "whole-params", "appProject": "default"}
		var details struct {
			Type   string `json:"type"`
			Plugin *struct {
				ParametersAnnouncement []argoAnnouncement `json:"parametersAnnouncement"`
			} `json:"plugin"`
		}
		path := "/api/v1/repositories/" + url.QueryEscape(w.repoURL) + "/appdetails"
		if err := w.argo.API(http.MethodPost, path, body, &details); err != nil {
			t.Fatal(err)
		}
		if details.Type != "Plugin" || details.Plugin == nil {
			t.Fatalf("appdetails: %+v", details)
		}
		var got []string
		for _, a := range details.Plugin.ParametersAnnouncement {
			got = append(got, fmt.Sprintf("%s %q %s %q", a.Name, a.Title, a.CollectionType, a.String))
		}
		sort.Strings(got)
		want := []string{`from-repo "From the repository"  "tide"`, `greeting "Greeting"  "hello"`, `labels "" map ""`, `list "" array ""`}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("the API announces\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	})

	t.Run("an Application with plugin parameters syncs into the cluster", func(t *testing.T) {
		app := w.application("whole-params", "default", &argoAppPlugin{
			Name: announcePlugin,
			Env:  []argoAppEnv{{Name: "FLAVOUR", Value: "vanilla"}},
			Parameters: []argoParam{{Name: "greeting", String: strPtr("bonjour")}, {Name: "list", Array: []string{"a", "b"}},
				{Name: "labels", Map: map[string]string{"team": "blue"}}, {Name: "from-repo", String: strPtr("ebb")}},
		})
		if err := w.create(app, true); err != nil {
			t.Fatal(err)
		}
		got := w.sync(t, "whole-params")
		if got.Status.Sync.Status != "Synced" || got.Status.Health.Status != "Healthy" {
			t.Fatalf("Application is %s and %s", got.Status.Sync.Status, got.Status.Health.Status)
		}
		data := w.configMap(t, "whole-params")
		project := "default"
		if v2 {
			project = "" // not sent before v3.0
		}
		want := map[string]string{"project": project, "ARGOCD_ENV_FLAVOUR": "vanilla", "PARAM_GREETING": "bonjour",
			"PARAM_LIST_0": "a", "PARAM_LIST_1": "b", "PARAM_LABELS_TEAM": "blue", "PARAM_FROM_REPO": "ebb"}
		for k, v := range want {
			if data[k] != v {
				t.Errorf("the synced ConfigMap has %s=%q, want %q (all: %v)", k, data[k], v, data)
			}
		}
	})

	t.Run("a Deployment syncs and becomes Healthy", func(t *testing.T) {
		app := w.application("whole-workload", "default", &argoAppPlugin{Name: workloadPlugin, Env: []argoAppEnv{{Name: "NODE", Value: w.node}}})
		if err := w.create(app, true); err != nil {
			t.Fatal(err)
		}
		got := w.sync(t, "whole-workload")
		if got.Status.Health.Status != "Healthy" {
			t.Fatalf("Application is %s", got.Status.Health.Status)
		}
		var dep struct {
			Status struct {
				AvailableReplicas int `json:"availableReplicas"`
			} `json:"status"`
		}
		if err := env.cp.Client().Get(harness.DeploymentPath(w.dest, "whole-workload"), &dep); err != nil || dep.Status.AvailableReplicas != 2 {
			t.Errorf("Deployment: %d available, %v", dep.Status.AvailableReplicas, err)
		}
	})

	t.Run("a failing plugin", func(t *testing.T) {
		// Argo CD renders the source before it stores an Application: the
		// user who creates it reads our message in the API's refusal; stored
		// without that check, the controller shows it as a condition.
		w.refused(t, w.application("whole-broken", "default", &argoAppPlugin{Name: brokenPlugin}), brokenMessage)
	})

	t.Run("tenants through the controller", func(t *testing.T) {
		for _, team := range []string{"team-a", "team-b"} {
			project := map[string]any{"project": map[string]any{"metadata": map[string]any{"name": team},
				"spec": map[string]any{"sourceRepos": []string{"*"}, "destinations": []any{map[string]any{"server": inCluster, "namespace": w.dest}}}}}
			if err := w.argo.API(http.MethodPost, "/api/v1/projects", project, nil); err != nil {
				t.Fatal(err)
			}
		}
		if v2 {
			missing := fmt.Sprintf(`plugin %q refuses this request: it names no Argo CD project, and the plugin is limited to allowedProjects [team-a]`, projectPlugin)
			w.refused(t, w.application("tenant-a", "team-a", &argoAppPlugin{Name: projectPlugin}), missing)
			w.refused(t, w.application("tenant-b", "team-b", &argoAppPlugin{Name: projectPlugin}), missing)
			return
		}
		if err := w.create(w.application("tenant-a", "team-a", &argoAppPlugin{Name: projectPlugin}), true); err != nil {
			t.Fatal(err)
		}
		got := w.sync(t, "tenant-a")
		if got.Status.Sync.Status != "Synced" {
			t.Fatalf("team-a's Application is %s", got.Status.Sync.Status)
		}
		if p := w.configMap(t, "tenant-a")["project"]; p != "team-a" {
			t.Errorf("team-a's ConfigMap names project %q", p)
		}
		w.refused(t, w.application("tenant-b", "team-b", &argoAppPlugin{Name: projectPlugin}),
			fmt.Sprintf(`plugin %q refuses project "team-b": it is not in allowedProjects [team-a]`, projectPlugin))
	})

	t.Run("git credentials of a repository Secret reach the consenting plugin", func(t *testing.T) {
		if v2 {
			t.Skipf("Argo CD %s gives plugins no git credentials: provideGitCreds arrived in v2.14", rel.Version)
		}
		// The admin's repository Secret for the Application's repository,
		// as `argocd repo add` or a GitOps'd Secret makes it.
		secret := map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata":   map[string]any{"name": "repo-whole", "labels": map[string]any{"argocd.argoproj.io/secret-type": "repository"}},
			"stringData": map[string]any{"type": "git", "url": w.repoURL, "username": w.user, "password": w.password, "insecure": "true"}}
		if err := env.cp.Client().Apply("/api/v1/namespaces/"+w.ns+"/secrets", "repo-whole", secret); err != nil {
			t.Fatal(err)
		}
		// The API server sees the Secret through its informer. Before v3.6
		// its answer leaves the username out (Repository.Sanitized), so the
		// repository being found is what those releases show.
		showsUser := !olderThan(rel, "v3.6.0")
		err := harness.Eventually(30*time.Second, 200*time.Millisecond, func() (bool, error) {
			var repo struct {
				Repo     string `json:"repo"`
				Username string `json:"username"`
			}
			err := w.argo.API(http.MethodGet, "/api/v1/repositories/"+url.QueryEscape(w.repoURL), nil, &repo)
			return err == nil && repo.Repo != "" && (repo.Username == w.user || !showsUser), fmt.Errorf("repository %s: %+v %w", w.repoURL, repo, err)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.create(w.application("creds-private", "default", &argoAppPlugin{Name: "git-private"}), true); err != nil {
			t.Fatal(err)
		}
		w.sync(t, "creds-private")
		if got := w.configMap(t, "from-the-private-repo"); got["secret"] != "no" {
			t.Errorf("the private repository's ConfigMap holds %v", got)
		}
		askPassProgram(t, w.configMap(t, "askpass"), w.rs)
		// A plugin that does not ask gets nothing: its clone fails, and the
		// Application says so without the password.
		if err := w.create(w.application("creds-plain", "default", &argoAppPlugin{Name: "git-plain"}), false); err != nil {
			t.Fatal(err)
		}
		msg := w.waitCondition(t, "creds-plain", "ComparisonError")
		if !strings.Contains(msg, "could not read Username") {
			t.Errorf("the plain plugin's condition does not show git asking for a user name:\n%s", msg)
		}
		if strings.Contains(msg, w.password) {
			t.Error("the password is in the Application's condition")
		}
		t.Logf("as expected, the plugin that does not ask is refused by git: …%s", msg[max(0, len(msg)-200):])
	})
}
