package client

import (
	"fmt"
	"os"
	"strings"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// App is what the repo-server knows about an Application when it builds a
// plugin's env for GenerateManifest.
type App struct {
	Name            string // ARGOCD_APP_NAME
	Namespace       string // ARGOCD_APP_NAMESPACE: the destination namespace
	Project         string // ARGOCD_APP_PROJECT_NAME
	Revision        string // ARGOCD_APP_REVISION (and its 7/8-character forms)
	RepoURL         string // ARGOCD_APP_SOURCE_REPO_URL
	SourcePath      string // ARGOCD_APP_SOURCE_PATH
	TargetRevision  string // ARGOCD_APP_SOURCE_TARGET_REVISION
	KubeVersion     string // KUBE_VERSION, without a leading v
	KubeAPIVersions []string
	// PluginEnv is spec.source.plugin.env as NAME=VALUE; each becomes
	// ARGOCD_ENV_NAME, with $VAR/${VAR} expanded from the build env above.
	PluginEnv []string
	// Parameters is spec.source.plugin.parameters; with HasPlugin set it is sent
	// as ARGOCD_APP_PARAMETERS (null when empty) plus the PARAM_ variables.
	Parameters []params.AppParameter
	HasPlugin  bool
}

// Environ renders the request env in the repo-server's order.
func (a App) Environ() ([]string, error) {
	short := func(n int) string { return a.Revision[:min(n, len(a.Revision))] }
	build := []string{
		keys.EnvAppName + "=" + a.Name,
		keys.EnvAppNamespace + "=" + a.Namespace,
		keys.EnvAppProjectName + "=" + a.Project,
		keys.EnvAppRevision + "=" + a.Revision,
		keys.EnvAppRevisionShort + "=" + short(7),
		keys.EnvAppRevisionShort8 + "=" + short(8),
		keys.EnvAppSourceRepoURL + "=" + a.RepoURL,
		keys.EnvAppSourcePath + "=" + a.SourcePath,
		keys.EnvAppSourceTargetRevision + "=" + a.TargetRevision,
		keys.EnvKubeVersion + "=" + strings.TrimPrefix(a.KubeVersion, "v"),
		keys.EnvKubeAPIVersions + "=" + strings.Join(a.KubeAPIVersions, ","),
	}
	lookup := map[string]string{}
	for _, kv := range build {
		k, v, _ := strings.Cut(kv, "=")
		lookup[k] = v
	}
	env := build
	for _, kv := range a.PluginEnv {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("plugin env %q is not NAME=VALUE", kv)
		}
		expanded := os.Expand(value, func(v string) string {
			if v == "$" {
				return "$"
			}
			return lookup[v]
		})
		env = append(env, keys.EnvPluginEnvPrefix+name+"="+expanded)
	}
	if a.HasPlugin {
		encoded, err := params.Encode(a.Parameters)
		if err != nil {
			return nil, err
		}
		env = append(env, keys.EnvAppParameters+"="+encoded)
		env = append(env, params.Environ(a.Parameters)...)
	}
	return env, nil
}

// ParametersEnviron renders the smaller env the repo-server sends with
// GetParametersAnnouncement: the app name, repo URL, source path and target
// revision, the ARGOCD_ENV_ variables (expanded from those four only) and the
// parameters. A dynamic parameters command that reads KUBE_VERSION or the
// namespace sees them empty in Argo CD, and so here.
func (a App) ParametersEnviron() ([]string, error) {
	reduced := App{Name: a.Name, RepoURL: a.RepoURL, SourcePath: a.SourcePath, TargetRevision: a.TargetRevision,
		PluginEnv: a.PluginEnv, Parameters: a.Parameters, HasPlugin: a.HasPlugin}
	env, err := reduced.Environ()
	if err != nil {
		return nil, err
	}
	dropped := map[string]bool{
		keys.EnvAppNamespace: true, keys.EnvAppProjectName: true, keys.EnvAppRevision: true,
		keys.EnvAppRevisionShort: true, keys.EnvAppRevisionShort8: true,
		keys.EnvKubeVersion: true, keys.EnvKubeAPIVersions: true,
	}
	out := env[:0]
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !dropped[name] {
			out = append(out, kv)
		}
	}
	return out, nil
}
