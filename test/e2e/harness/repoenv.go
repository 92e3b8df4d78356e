package harness

import (
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// RepoServerEnv is the build env Argo CD's repo-server sends with a
// GenerateManifest request for an Application with plugin parameters, in the
// repo-server's order: the nine ARGOCD_APP_* variables, KUBE_VERSION,
// KUBE_API_VERSIONS, ARGOCD_APP_PARAMETERS and the PARAM_* variables.
func RepoServerEnv(appName, destNamespace, sourcePath, kubeVersion string, ps []params.AppParameter) ([]string, error) {
	const revision = "0123456789abcdef0123456789abcdef01234567"
	env := []string{
		"ARGOCD_APP_NAME=" + appName,
		"ARGOCD_APP_NAMESPACE=" + destNamespace,
		"ARGOCD_APP_PROJECT_NAME=default",
		"ARGOCD_APP_REVISION=" + revision,
		"ARGOCD_APP_REVISION_SHORT=" + revision[:7],
		"ARGOCD_APP_REVISION_SHORT_8=" + revision[:8],
		"ARGOCD_APP_SOURCE_REPO_URL=https://git.example.com/platform/apps.git",
		"ARGOCD_APP_SOURCE_PATH=" + sourcePath,
		"ARGOCD_APP_SOURCE_TARGET_REVISION=main",
		"KUBE_VERSION=" + kubeVersion,
		"KUBE_API_VERSIONS=v1,apps/v1",
	}
	encoded, err := params.Encode(ps)
	if err != nil {
		return nil, err
	}
	env = append(env, keys.EnvAppParameters+"="+encoded)
	return append(env, params.Environ(ps)...), nil
}
