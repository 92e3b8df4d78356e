package cmpserver

import (
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/tenancy"
)

// A plugin.yaml's spec.allowedProjects and spec.allowedSourceRepos (written
// by the injector from the catalog) limit who may use the plugin: Argo CD
// itself lets any Application name any plugin (argo-cd#21177). The
// repo-server sends the Application's project and repository in the env of
// the stream's first message, so every request is judged on its header,
// before anything of it is written (package request); pkg/tenancy decides.

// tenancyCalls maps an RPC to what the rules check of it.
var tenancyCalls = map[string]tenancy.Call{
	"GenerateManifest":          tenancy.Generate,
	"GetParametersAnnouncement": tenancy.Parameters,
	"MatchRepository":           tenancy.Match,
}

// admission is the check of rpc's requests against cfg's rules; nil when
// the plugin has none. A refusal is counted by reason, logged without env
// values other than the project and the repository (its credentials
// hidden), and answered PermissionDenied with a message that Argo CD shows
// on the Application.
func admission(m *metrics, rpc string, cfg *loaded, log *zap.Logger) func(*pluginpb.ManifestRequestMetadata) error {
	rules := cfg.plugin.Spec.Rules
	call, known := tenancyCalls[rpc]
	if !rules.IsSet() || !known {
		return nil
	}
	return func(meta *pluginpb.ManifestRequestMetadata) error {
		d := tenancy.Decide(rules, tenancyRequest(call, meta))
		if d.Allowed() {
			return nil
		}
		m.refused(rpc, d.Reason)
		log.Warn("request refused: the plugin is limited to some projects or repositories",
			zap.String("reason", string(d.Reason)), zap.String("rule", d.Field), zap.Strings("patterns", d.Patterns),
			zap.String("deny_pattern", d.Deny), zap.String("project", d.Project), zap.String("repo", d.Repo))
		return status.Error(codes.PermissionDenied, d.Message(cfg.plugin.Metadata.Name))
	}
}

// tenancyRequest reads what the rules check from a request's env: every
// value of the project and the repository, so that a duplicate with another
// value is seen rather than one of them picked.
func tenancyRequest(call tenancy.Call, meta *pluginpb.ManifestRequestMetadata) tenancy.Request {
	req := tenancy.Request{Call: call}
	for _, e := range meta.GetEnv() {
		switch e.GetName() {
		case keys.EnvAppProjectName:
			req.Projects = append(req.Projects, e.GetValue())
		case keys.EnvAppSourceRepoURL:
			req.Repos = append(req.Repos, e.GetValue())
		}
	}
	return req
}
