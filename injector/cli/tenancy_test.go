package cli

import (
	"bytes"
	"strings"
	"testing"
)

// explain says who may use an injected plugin that the catalog limits to
// some projects or repositories, and nothing more for the others.
func TestExplainShowsTenancy(t *testing.T) {
	var out bytes.Buffer
	err := run("explain", []string{"--catalog", "../testdata/golden/tenancy.catalog.yaml", "-f", "../testdata/golden/tenancy.yaml"}, nil, &out)
	want := "  plugin vault serves only projects [team-a, platform-*] and source repositories [https://github.com/example-org/*, !https://github.com/example-org/secrets]\n"
	if err != nil || !strings.Contains(out.String(), want) {
		t.Errorf("explain: %v\n%s\nwant a line %q", err, out.String(), want)
	}
	out.Reset()
	if err := run("explain", []string{"--catalog", catalogFile, "-f", "../testdata/golden/argocd-repo-server.yaml"}, nil, &out); err != nil || strings.Contains(out.String(), " serves ") {
		t.Errorf("explain of plugins without rules: %v\n%s", err, out.String())
	}
}
