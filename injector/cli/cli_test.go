package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const catalogFile = "../testdata/catalog.yaml"

func TestInjectAndExplainCommands(t *testing.T) {
	in, err := os.ReadFile("../testdata/golden/argocd-repo-server.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("../testdata/golden/argocd-repo-server.injected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run("inject", []string{"--catalog", catalogFile}, bytes.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("inject output differs from the golden")
	}
	out.Reset()
	err = run("inject", []string{"--catalog", catalogFile, "--namespace", "team-a", "-f", "../testdata/golden/argocd-repo-server.yaml"}, nil, &out)
	if err == nil || !strings.Contains(err.Error(), `plugin "kustomize" is not enabled in namespace "team-a"`) || out.Len() != 0 {
		t.Errorf("denied inject: err %v, output %q", err, out.String())
	}
	out.Reset()
	if err := run("explain", []string{"--catalog", catalogFile}, bytes.NewReader(in), &out); err != nil || !strings.Contains(out.String(), "Deployment argocd/argocd-repo-server: injected") {
		t.Errorf("explain: %v\n%s", err, out.String())
	}
}

func TestCertsCommand(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := run("certs", []string{"--service", "s", "--namespace", "n", "--ip", "127.0.0.1", "--dns", "a.example", "--out-dir", dir}, nil, &out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if err := run("certs", []string{"--service", "s", "--namespace", "n", "--secret-name", "s-tls"}, nil, &out); err != nil || !strings.Contains(out.String(), "kubernetes.io/tls") {
		t.Errorf("secret: %v %s", err, out.String())
	}
	if err := run("certs", []string{"--service", "s", "--namespace", "n", "--ip", "nope"}, nil, &out); err == nil {
		t.Error("accepted a bad IP")
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"serve"}, {"inject"}, {"inject", "--catalog", catalogFile, "extra"}} {
		err := run(args[0], args[1:], nil, &bytes.Buffer{})
		if _, ok := err.(usageError); !ok {
			t.Errorf("%v: %v is not a usage error", args, err)
		}
	}
}
