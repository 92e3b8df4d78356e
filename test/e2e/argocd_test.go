package e2e

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// Argo CD's own JSON of the repo-server messages the cases send and read: only
// the fields they use (repoclient decodes them into Argo CD's own types and
// rejects unknown ones, so a typo here fails loudly).
type (
	argoRepo struct {
		Repo string `json:"repo"`
		// Credentials, as an Argo CD repository Secret gives them.
		Username string `json:"username,omitempty"`
		Password string `json:"password,omitempty"`
		Insecure bool   `json:"insecure,omitempty"`
	}
	argoParam struct {
		Name   string            `json:"name"`
		String *string           `json:"string,omitempty"`
		Array  []string          `json:"array,omitempty"`
		Map    map[string]string `json:"map,omitempty"`
	}
	argoPlugin struct {
		Name       string      `json:"name,omitempty"`
		Parameters []argoParam `json:"parameters,omitempty"`
	}
	argoHelmParam struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	argoHelm struct {
		ValueFiles  []string        `json:"valueFiles,omitempty"`
		Parameters  []argoHelmParam `json:"parameters,omitempty"`
		ReleaseName string          `json:"releaseName,omitempty"`
	}
	argoSource struct {
		RepoURL        string      `json:"repoURL"`
		Path           string      `json:"path"`
		TargetRevision string      `json:"targetRevision"`
		Plugin         *argoPlugin `json:"plugin,omitempty"`
		Helm           *argoHelm   `json:"helm,omitempty"`
	}
	manifestRequest struct {
		Repo               *argoRepo   `json:"repo"`
		Revision           string      `json:"revision"`
		NoCache            bool        `json:"noCache"`
		AppName            string      `json:"appName"`
		Namespace          string      `json:"namespace"`
		ApplicationSource  *argoSource `json:"applicationSource"`
		KubeVersion        string      `json:"kubeVersion"`
		APIVersions        []string    `json:"apiVersions"`
		ProjectName        string      `json:"projectName"`
		ProjectSourceRepos []string    `json:"projectSourceRepos"`
	}
	manifestResponse struct {
		Manifests  []string `json:"manifests"`
		Revision   string   `json:"revision"`
		SourceType string   `json:"sourceType"`
		Commands   []string `json:"commands"`
	}
	appDetailsQuery struct {
		Repo    *argoRepo   `json:"repo"`
		Source  *argoSource `json:"source"`
		AppName string      `json:"appName"`
		NoCache bool        `json:"noCache"`
	}
	appDetailsResponse struct {
		Type   string `json:"type"`
		Plugin *struct {
			ParametersAnnouncement []struct {
				Name           string `json:"name"`
				Title          string `json:"title"`
				CollectionType string `json:"collectionType"`
				ItemType       string `json:"itemType"`
			} `json:"parametersAnnouncement"`
		} `json:"plugin"`
	}
)

func strPtr(s string) *string { return &s }

// argoCases drive Argo CD's repo-server through its gRPC API the way the
// application controller (GenerateManifest) and the API server (GetAppDetails)
// call it, for Applications of the repository at repoURL.
func argoCases(t *testing.T, rs *harness.RepoServer, rel harness.ArgoRelease, repoURL, commit string) {
	request := func(app, path string, plugin *argoPlugin, helm *argoHelm) manifestRequest {
		return manifestRequest{
			Repo: &argoRepo{Repo: repoURL}, Revision: "HEAD", NoCache: true,
			AppName: app, Namespace: "demo",
			ApplicationSource: &argoSource{RepoURL: repoURL, Path: path, TargetRevision: "HEAD", Plugin: plugin, Helm: helm},
			KubeVersion:       kubeVersion(), APIVersions: []string{"v1", "apps/v1"},
			ProjectName: "default", ProjectSourceRepos: []string{"*"},
		}
	}
	generate := func(t *testing.T, req manifestRequest) manifestResponse {
		t.Helper()
		var resp manifestResponse
		if err := rs.Call("generate", req, &resp); err != nil {
			t.Fatal(err)
		}
		// Only Argo CD's repo-server resolves HEAD to the commit and names
		// the source type: a response without them did not come from it.
		if resp.Revision != commit {
			t.Errorf("revision %q, want the commit HEAD resolves to, %s", resp.Revision, commit)
		}
		return resp
	}
	configMap := func(t *testing.T, manifests []string) map[string]string {
		t.Helper()
		if len(manifests) != 1 {
			t.Fatalf("want one ConfigMap, got %d manifests: %v", len(manifests), manifests)
		}
		var cm struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if err := json.Unmarshal([]byte(manifests[0]), &cm); err != nil || cm.Kind != "ConfigMap" {
			t.Fatalf("not the params plugin's ConfigMap (%v): %s", err, manifests[0])
		}
		return cm.Data
	}

	t.Run("named plugin with string, array and map parameters", func(t *testing.T) {
		resp := generate(t, request("shop", "apps/params", &argoPlugin{Name: "params", Parameters: []argoParam{
			{Name: "greeting", String: strPtr("hello")},
			{Name: "list", Array: []string{"first", "second"}},
			{Name: "labels", Map: map[string]string{"team": "platform", "tier": "web"}},
		}}, nil))
		if resp.SourceType != "Plugin" {
			t.Errorf("source type %q, want Plugin", resp.SourceType)
		}
		got := configMap(t, resp.Manifests)
		// Argo CD's server unpacks the repository straight into the request
		// dir and exports its log settings; so must ours.
		want := map[string]string{
			"revision": commit, "workdir": "apps/params", "logFormat": "json", "logLevel": "info",
			"PARAM_GREETING": "hello", "PARAM_LIST_0": "first", "PARAM_LIST_1": "second",
			"PARAM_LABELS_TEAM": "platform", "PARAM_LABELS_TIER": "web",
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("the plugin saw %s=%q, want %q (all: %v)", k, got[k], v, got)
			}
		}
		if len(got) != len(want) {
			t.Errorf("the plugin saw %v, want exactly %v", got, want)
		}
	})

	// The same requests through Argo CD's repo-server to Argo CD's own
	// argocd-cmp-server (the hand-made sidecar) and to ours: what a plugin sees,
	// the errors users read and the announcements must be the same.
	t.Run("parity with Argo CD's own argocd-cmp-server", func(t *testing.T) {
		ps := []argoParam{
			{Name: "greeting", String: strPtr("hello")},
			{Name: "list", Array: []string{"first", "second"}},
			{Name: "labels", Map: map[string]string{"team": "platform"}},
		}
		var seen [2]map[string]string
		var failed [2]string
		var announced [2]string
		for i, name := range []string{"params", argoSidecar} {
			seen[i] = configMap(t, generate(t, request("parity", "apps/params", &argoPlugin{Name: name, Parameters: ps}, nil)).Manifests)
			var resp manifestResponse
			err := rs.Call("generate", request("parity", "apps/params", &argoPlugin{Name: name,
				Parameters: append(ps, argoParam{Name: "fail", String: strPtr("yes")})}, nil), &resp)
			var rpcErr *harness.RPCError
			if !errors.As(err, &rpcErr) {
				t.Fatalf("%s: a failing generate succeeded: %v", name, err)
			}
			failed[i] = rpcErr.Message
			var details appDetailsResponse
			if err := rs.Call("appdetails", appDetailsQuery{Repo: &argoRepo{Repo: repoURL}, AppName: "parity", NoCache: true,
				Source: &argoSource{RepoURL: repoURL, Path: "apps/params", TargetRevision: "HEAD", Plugin: &argoPlugin{Name: name}}}, &details); err != nil {
				t.Fatalf("%s: GetAppDetails (dynamic parameters print null): %v", name, err)
			}
			b, _ := json.Marshal(details)
			announced[i] = string(b)
		}
		// The one known difference: Argo CD v2's argocd-cmp-server logs text
		// by default, ours (like v3's) json; cmpserver/README.md says so.
		if strings.HasPrefix(rel.Version, "v2.") {
			if seen[0]["logFormat"] != "json" || seen[1]["logFormat"] != "text" {
				t.Errorf("ARGOCD_LOG_FORMAT: ours %q, Argo CD %s's %q; want json and text", seen[0]["logFormat"], rel.Version, seen[1]["logFormat"])
			}
			delete(seen[0], "logFormat")
			delete(seen[1], "logFormat")
		}
		if !reflect.DeepEqual(seen[0], seen[1]) {
			t.Errorf("the command saw different things:\n  ours: %v\n  Argo: %v", seen[0], seen[1])
		}
		if failed[0] != failed[1] {
			t.Errorf("error texts differ:\n  ours: %s\n  Argo: %s", failed[0], failed[1])
		}
		if announced[0] != announced[1] {
			t.Errorf("announcements differ:\n  ours: %s\n  Argo: %s", announced[0], announced[1])
		}
		t.Logf("as expected, both servers answer alike: %v; the same expected error text: %s", seen[0], failed[0])
	})

	t.Run("discovery chooses the right plugin of two", func(t *testing.T) {
		params := generate(t, request("disc-params", "apps/params", &argoPlugin{}, nil))
		if data := configMap(t, params.Manifests); data["revision"] != commit {
			t.Errorf("apps/params was not rendered by the params plugin: %v", data)
		}
		chart := generate(t, request("disc-chart", "apps/guestbook", &argoPlugin{}, nil))
		all := strings.Join(chart.Manifests, "\n")
		if !strings.Contains(all, `"kind":"Deployment"`) || strings.Contains(all, `"kind":"ConfigMap"`) {
			t.Errorf("apps/guestbook was not rendered by the helm plugin:\n%s", all)
		}
		if params.SourceType != "Plugin" || chart.SourceType != "Plugin" {
			t.Errorf("source types %q and %q, want Plugin", params.SourceType, chart.SourceType)
		}
	})

	t.Run("helm on par with Argo CD's native Helm", func(t *testing.T) {
		native := generate(t, request("shop", "apps/guestbook", nil, &argoHelm{
			ValueFiles: []string{"values-prod.yaml"}, ReleaseName: "shop",
			Parameters: []argoHelmParam{{Name: "service.port", Value: "8081"}, {Name: "message", Value: "hello, world"}},
		}))
		plugin := generate(t, request("shop", "apps/guestbook", &argoPlugin{Name: "helm", Parameters: []argoParam{
			{Name: "values-files", Array: []string{"values-prod.yaml"}},
			{Name: "helm-parameters", Map: map[string]string{"service.port": "8081", "message": "hello, world"}},
			{Name: "release-name", String: strPtr("shop")},
		}}, nil))
		if native.SourceType != "Helm" || plugin.SourceType != "Plugin" {
			t.Errorf("source types: native %q, plugin %q", native.SourceType, plugin.SourceType)
		}
		a, b := sortedManifests(t, native.Manifests), sortedManifests(t, plugin.Manifests)
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("native Helm and the helm plugin differ:\n--- native (%s)\n%s\n--- plugin\n%s",
				strings.Join(native.Commands, " "), strings.Join(a, "\n"), strings.Join(b, "\n"))
		}
		t.Logf("%d manifests equal; Argo ran: %s", len(a), strings.Join(native.Commands, "; "))
	})

	t.Run("GetAppDetails announces the helm plugin's parameters", func(t *testing.T) {
		var resp appDetailsResponse
		err := rs.Call("appdetails", appDetailsQuery{Repo: &argoRepo{Repo: repoURL}, AppName: "shop", NoCache: true,
			Source: &argoSource{RepoURL: repoURL, Path: "apps/guestbook", TargetRevision: "HEAD", Plugin: &argoPlugin{Name: "helm"}}}, &resp)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Type != "Plugin" || resp.Plugin == nil {
			t.Fatalf("app details type %q, plugin %v", resp.Type, resp.Plugin)
		}
		seen := map[string]string{}
		for _, a := range resp.Plugin.ParametersAnnouncement {
			seen[a.Name] = a.CollectionType
		}
		for name, coll := range map[string]string{"values-files": "array", "helm-parameters": "map", "release-name": ""} {
			if got, ok := seen[name]; !ok || got != coll {
				t.Errorf("announcement %s: collectionType %q (present %v), want %q", name, got, ok, coll)
			}
		}
	})

	t.Run("a failing plugin's stderr reaches the user", func(t *testing.T) {
		var resp manifestResponse
		err := rs.Call("generate", request("broken", "apps/params", &argoPlugin{Name: "broken"}, nil), &resp)
		var rpcErr *harness.RPCError
		if !errors.As(err, &rpcErr) {
			t.Fatalf("broken plugin rendered: %v %v", err, resp.Manifests)
		}
		if !strings.Contains(rpcErr.Message, "mapping values are not allowed here") {
			t.Errorf("Argo CD's error lacks the plugin's stderr: %s", rpcErr.Message)
		}
		t.Logf("Argo CD says: %s", rpcErr.Message)
	})
}
