package command

import (
	"fmt"
	"strings"

	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/pkg/keys"
	"github.com/cmp-injector/cmp-injector/pkg/params"
)

// Env is the environment of every plugin command: the sidecar's own env,
// then the request's entries (request wins; entries without a name are dropped,
// empty values kept as Argo CD 3 does), then the PARAM_ variables derived again
// from ARGOCD_APP_PARAMETERS. The repo-server already sends PARAM_ variables, but
// picks a random winner when two map keys escape to the same name; deriving them
// here makes the result deterministic (see params.Environ).
func Env(sidecar []string, request []*pluginpb.EnvEntry) ([]string, error) {
	req := make([]string, 0, len(request))
	var appParams string
	hasParams := false
	for _, e := range request {
		if e.GetName() == "" {
			continue
		}
		req = append(req, e.GetName()+"="+e.GetValue())
		if e.GetName() == keys.EnvAppParameters {
			appParams, hasParams = e.GetValue(), true
		}
	}
	var derived []string
	if hasParams {
		ps, err := params.Decode([]byte(appParams))
		if err != nil {
			return nil, fmt.Errorf("invalid %s: %w", keys.EnvAppParameters, err)
		}
		derived = params.Environ(ps)
	}
	return params.MergeEnv(sidecar, req, derived), nil
}

// EnvNames lists the variable names of env for logs; values may hold secrets and
// are never logged.
func EnvNames(request []*pluginpb.EnvEntry) string {
	names := make([]string, 0, len(request))
	for _, e := range request {
		names = append(names, e.GetName())
	}
	return strings.Join(names, ",")
}
