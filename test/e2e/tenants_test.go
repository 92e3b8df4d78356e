package e2e

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/test/e2e/harness"
)

// Plugins per Argo CD project and repository (argo-cd#21177, issue 26): two
// catalog plugins, one limited to project team-a, one to repositories named
// team-a, injected by the webhook into a repo-server pod shaped like Argo
// CD's and booted with each pinned release's own repo-server. Two
// Applications, in two projects and two repositories, name each plugin: one
// renders, the other is refused with Argo CD's error text around ours.
// Argo CD's repo-server sends the project only since v3.0, so on v2 the
// project-limited plugin refuses both (a rule that cannot be checked does
// not hold) and says why. On the newest release, the admin then lets team-b
// in: the reconciler carries the catalog change to the running pod's config
// annotation, the kubelet (here: the boot) re-projects it, and the running
// sidecar serves team-b without a restart. (Two tenants reading two Vault
// roles on the real node is not here: there is no Vault server yet.)

// The plugins' catalog names (and plugin.yaml names), and the deny pattern
// of repoPlugin: it allows the teams' repositories but team-b's.
const (
	projectPlugin = "tenant-project"
	repoPlugin    = "tenant-repo"
	repoDeny      = "file:///**/team-b.git"
)

// tenantCatalog is the example catalog plus projectPlugin, limited to
// projects, and repoPlugin, limited to team-a's repository, which print one
// ConfigMap naming the project they rendered for.
func tenantCatalog(t *testing.T, ns string, projects ...string) []byte {
	t.Helper()
	var cat map[string]any
	if err := yaml.Unmarshal(catalogFor(t, true, map[string][]string{ns: {"helm", projectPlugin, repoPlugin}}), &cat); err != nil {
		t.Fatal(err)
	}
	plugin := func(name string) map[string]any {
		return map[string]any{
			"image": "registry.example/e2e/shell:1",
			"config": map[string]any{"inline": map[string]any{
				"apiVersion": "argoproj.io/v1alpha1", "kind": "ConfigManagementPlugin",
				"metadata": map[string]any{"name": name},
				"spec": map[string]any{
					"parameters": map[string]any{"static": []any{map[string]any{"name": "greeting"}}},
					"generate": map[string]any{"command": []string{"sh", "-c",
						`printf '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s"},"data":{"project":"%s"}}\n' "$ARGOCD_APP_NAME" "$ARGOCD_APP_PROJECT_NAME"`}},
				},
			}},
		}
	}
	plugins, _ := cat["plugins"].(map[string]any)
	plugins[projectPlugin] = plugin(projectPlugin)
	plugins[projectPlugin].(map[string]any)["allowedProjects"] = projects
	plugins[repoPlugin] = plugin(repoPlugin)
	plugins[repoPlugin].(map[string]any)["allowedSourceRepos"] = []string{"file:///**/team-*.git", "!" + repoDeny}
	b, err := yaml.Marshal(cat)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTenantsThroughArgoCD(t *testing.T) {
	rels, err := harness.ArgoReleases()
	if err != nil {
		t.Fatal(err)
	}
	c := env.cp.Client()
	ns := newNamespace(t, "tenants", map[string]string{keys.NamespaceEnabledLabel: keys.EnabledValue, day2Label: "true"})
	argoConfig(t, ns, "tenants-redis")
	// The reconciler is on: the day-2 case needs it.
	injectors := reconcilingInjectors(t, 1, ns, tenantCatalog(t, ns, "team-a"))
	waitActive(t, ns)
	// One repository per team, the same content.
	var repos [2]tenantRepo
	for i, team := range []string{"team-a", "team-b"} {
		url, commit, err := harness.GitRepo(filepath.Join(t.TempDir(), team+".git"), filepath.Join("testdata", "chain", "repo"))
		if err != nil {
			t.Fatal(err)
		}
		repos[i] = tenantRepo{url, commit}
	}

	for i, rel := range rels {
		t.Run("Argo CD "+rel.Version, func(t *testing.T) {
			pod := createStored(t, ns, repoServerPod(t, "repo-tenants-"+strconv.Itoa(i), rel.Image(), projectPlugin+","+repoPlugin))
			if got := strings.Join(status(t, pod).Plugins, ","); got != projectPlugin+","+repoPlugin {
				t.Fatalf("pod injected with %v", got)
			}
			if cfg := pod.Annotations[keys.ConfigAnnotationPrefix+projectPlugin]; !strings.Contains(cfg, "allowedProjects:\n  - team-a") {
				t.Fatalf("the sidecar's plugin.yaml does not carry the rules:\n%s", cfg)
			}
			rs, err := harness.BootRepoServer(c, pod, rel, env.bins["cmp-server"], filepath.Join(env.root, "tn"+strconv.Itoa(i)), env.logFile)
			if err != nil {
				t.Fatal(err)
			}
			defer rs.Stop()
			tenantCases(t, rs, rel, repos)
			if i == 0 {
				tenantRulesChange(t, injectors[0], rs, pod, repos[0])
			}
		})
	}
}

// tenantRequest is the manifest request of Application app of project,
// from repo, naming plugin.
func tenantRequest(plugin, app, project string, repo tenantRepo) manifestRequest {
	return manifestRequest{
		Repo: &argoRepo{Repo: repo.url}, Revision: "HEAD", NoCache: true,
		AppName: app, Namespace: "demo",
		ApplicationSource: &argoSource{RepoURL: repo.url, Path: "apps/params", TargetRevision: "HEAD", Plugin: &argoPlugin{Name: plugin}},
		KubeVersion:       kubeVersion(), APIVersions: []string{"v1"},
		ProjectName: project, ProjectSourceRepos: []string{"*"},
	}
}

// tenantRulesChange lets team-b use projectPlugin in the catalog: the
// reconciler updates the running pod's config annotation, the boot
// re-projects it as the kubelet would, and the same sidecar process, reloaded,
// renders team-b's Application.
func tenantRulesChange(t *testing.T, in *harness.Injector, rs *harness.RepoServer, pod *corev1.Pod, repo tenantRepo) {
	t.Run("a catalog change of the rules reaches the running sidecar", func(t *testing.T) {
		c := env.cp.Client()
		var sidecar *harness.Process
		for _, p := range rs.Pod.Processes() {
			if p.Name == keys.SidecarName(projectPlugin) {
				sidecar = p
			}
		}
		if sidecar == nil {
			t.Fatalf("no %s process", keys.SidecarName(projectPlugin))
		}
		if err := in.SetCatalog(tenantCatalog(t, pod.Namespace, "team-a", "team-b")); err != nil {
			t.Fatal(err)
		}
		key := keys.ConfigAnnotationPrefix + projectPlugin
		var live *corev1.Pod
		err := harness.Eventually(60*time.Second, 200*time.Millisecond, func() (bool, error) {
			p, err := c.GetPod(pod.Namespace, pod.Name)
			if err != nil {
				return false, err
			}
			live = p
			return strings.Contains(p.Annotations[key], "- team-b"), fmt.Errorf("annotation %s still %q", key, p.Annotations[key])
		})
		if err != nil {
			t.Fatalf("the reconciler did not carry the change: %v\n%s", err, in.Output())
		}
		if err := rs.Pod.Update(live); err != nil {
			t.Fatal(err)
		}
		err = harness.Eventually(30*time.Second, 200*time.Millisecond, func() (bool, error) {
			var resp manifestResponse
			err := rs.Call("generate", tenantRequest(projectPlugin, "app-b", "team-b", repo), &resp)
			return err == nil && len(resp.Manifests) == 1, err
		})
		if err != nil {
			t.Fatalf("team-b still refused after the change: %v", err)
		}
		if done, _ := sidecar.Exited(); done {
			t.Error("the sidecar process ended: the change needed a restart")
		}
		t.Logf("as expected, the running sidecar serves team-b after the catalog change")
		// Back to team-a alone for the pods of the next releases: wait until
		// the webhook injects that catalog again.
		if err := in.SetCatalog(tenantCatalog(t, pod.Namespace, "team-a")); err != nil {
			t.Fatal(err)
		}
		probe := repoServerPod(t, "tenants-probe", pod.Spec.Containers[0].Image, projectPlugin+","+repoPlugin)
		err = harness.Eventually(30*time.Second, 200*time.Millisecond, func() (bool, error) {
			got, err := c.CreatePod(pod.Namespace, probe.DeepCopy(), true)
			if err != nil {
				return false, err
			}
			return !strings.Contains(got.Annotations[key], "team-b"), errors.New("the webhook still injects the changed catalog")
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// tenantRepo is a team's repository.
type tenantRepo struct{ url, commit string }

// tenantCases are two Applications, team-a's and team-b's, each in its own
// project and repository, as the application controller asks for their
// manifests through each plugin, and the parameters announcement the UI
// asks for, which carries no project.
func tenantCases(t *testing.T, rs *harness.RepoServer, rel harness.ArgoRelease, repos [2]tenantRepo) {
	request := tenantRequest
	renders := func(t *testing.T, plugin string) {
		t.Helper()
		var resp manifestResponse
		if err := rs.Call("generate", request(plugin, "app-a", "team-a", repos[0]), &resp); err != nil {
			t.Fatal(err)
		}
		project := "team-a"
		if strings.HasPrefix(rel.Version, "v2.") {
			project = "" // not sent before v3.0
		}
		want := `{"apiVersion":"v1","data":{"project":"` + project + `"},"kind":"ConfigMap","metadata":{"name":"app-a"}}`
		if resp.Revision != repos[0].commit || len(resp.Manifests) != 1 || resp.Manifests[0] != want {
			t.Errorf("revision %s, manifests %q; want %s and %s", resp.Revision, resp.Manifests, repos[0].commit, want)
		}
	}
	// refused asks for app's manifests and checks that Argo CD's error
	// carries ours, after its own words (the repo-server's, then its CMP
	// client's) and the sidecar's status code.
	refused := func(t *testing.T, plugin, app, project string, repo tenantRepo, ours string) {
		t.Helper()
		var resp manifestResponse
		err := rs.Call("generate", request(plugin, app, project, repo), &resp)
		var rpcErr *harness.RPCError
		if !errors.As(err, &rpcErr) {
			t.Fatalf("%s rendered: %v %q", app, err, resp.Manifests)
		}
		argo := "error generating manifests in cmp: rpc error: code = PermissionDenied desc = "
		if i := strings.Index(rpcErr.Message, argo+ours); i < 0 {
			t.Errorf("Argo CD's error does not end with ours after %q:\n  got  %s\n  want %s", argo, rpcErr.Message, ours)
		}
		t.Logf("as expected, Argo CD says: %s", rpcErr.Message)
	}
	const projectRule = "allowedProjects [team-a]"
	if strings.HasPrefix(rel.Version, "v2.") {
		t.Run("without a project from the repo-server, the project-limited plugin refuses both", func(t *testing.T) {
			missing := fmt.Sprintf(`plugin %q refuses this request: it names no Argo CD project, and the plugin is limited to %s`, projectPlugin, projectRule)
			refused(t, projectPlugin, "app-a", "team-a", repos[0], missing)
			refused(t, projectPlugin, "app-b", "team-b", repos[0], missing)
		})
	} else {
		t.Run("team-a's Application renders", func(t *testing.T) { renders(t, projectPlugin) })
		t.Run("team-b's Application is refused", func(t *testing.T) {
			refused(t, projectPlugin, "app-b", "team-b", repos[0],
				fmt.Sprintf(`plugin %q refuses project "team-b": it is not in %s`, projectPlugin, projectRule))
		})
	}
	t.Run("the repository-limited plugin renders team-a's repository", func(t *testing.T) { renders(t, repoPlugin) })
	t.Run("the repository-limited plugin refuses team-b's repository", func(t *testing.T) {
		project := `project "team-b"`
		if strings.HasPrefix(rel.Version, "v2.") {
			project = "project (none)"
		}
		rule := "allowedSourceRepos [file:///**/team-*.git, !" + repoDeny + "]"
		refused(t, repoPlugin, "app-b", "team-b", repos[1],
			fmt.Sprintf(`plugin %q refuses repository %q of %s: it matches %q in %s`, repoPlugin, repos[1].url, project, "!"+repoDeny, rule))
		// Other spellings of team-b's repository that git clones as it:
		// Argo CD's repo-server fetches each, and the plugin resolves each
		// as git does before the deny pattern is tried.
		dir, base := path.Split(repos[1].url)
		for _, spelling := range []string{repos[1].url + "/", dir + "./" + base, dir + base + "/../" + base} {
			refused(t, repoPlugin, "app-b", "team-b", tenantRepo{spelling, repos[1].commit},
				fmt.Sprintf(`plugin %q refuses repository %q of %s: it matches %q in %s`, repoPlugin, spelling, project, "!"+repoDeny, rule))
		}
	})
	t.Run("the parameters announcement is judged by repository", func(t *testing.T) {
		details := func(plugin string, repo tenantRepo) (appDetailsResponse, error) {
			var d appDetailsResponse
			err := rs.Call("appdetails", appDetailsQuery{Repo: &argoRepo{Repo: repo.url}, AppName: "app", NoCache: true,
				Source: &argoSource{RepoURL: repo.url, Path: "apps/params", TargetRevision: "HEAD", Plugin: &argoPlugin{Name: plugin}}}, &d)
			return d, err
		}
		// No project is sent: the project-limited plugin announces anyway.
		d, err := details(projectPlugin, repos[1])
		if err != nil || d.Plugin == nil || len(d.Plugin.ParametersAnnouncement) != 1 || d.Plugin.ParametersAnnouncement[0].Name != "greeting" {
			t.Errorf("announcement %+v, %v", d.Plugin, err)
		}
		if _, err := details(repoPlugin, repos[1]); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("plugin %q refuses repository", repoPlugin)) {
			t.Errorf("team-b's repository announced through %s: %v", repoPlugin, err)
		}
	})
}
