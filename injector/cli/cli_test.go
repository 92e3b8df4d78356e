package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const catalogFile = "../testdata/catalog.yaml"

// run is Main with the command's error as stderr's text: nil on exit 0.
func run(cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	code, stderr := runCode(cmd, args, stdin, stdout)
	if code == 0 {
		return nil
	}
	return &exitErr{code, stderr}
}

func runCode(cmd string, args []string, stdin io.Reader, stdout io.Writer) (int, string) {
	var stderr bytes.Buffer
	code := Main(context.Background(), append([]string{cmd}, args...), stdin, stdout, &stderr)
	return code, stderr.String()
}

type exitErr struct {
	code   int
	stderr string
}

func (e *exitErr) Error() string { return e.stderr }

func TestInjectAndExplainCommands(t *testing.T) {
	in, err := os.ReadFile("../testdata/golden/argocd-repo-server.yaml")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("../testdata/golden/argocd-repo-server.golden.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, want, _ := bytes.Cut(golden, []byte("\n---\n")) // the decision, then the object
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
	if err := run("explain", []string{"--catalog", catalogFile}, bytes.NewReader(in), &out); err != nil || !strings.Contains(out.String(), "Deployment argocd/argocd-repo-server: injected plugins: helm, kustomize [injected]") {
		t.Errorf("explain: %v\n%s", err, out.String())
	}
	// explain exits like inject: 1 when an object would be denied.
	out.Reset()
	code, stderr := runCode("explain", []string{"--catalog", catalogFile, "--namespace", "team-a", "-f", "../testdata/golden/argocd-repo-server.yaml"}, nil, &out)
	if code != 1 || !strings.Contains(out.String(), "plugin_not_enabled") || !strings.Contains(stderr, "1 of 1 objects would be denied") {
		t.Errorf("denied explain: exit %d, stderr %q, output %q", code, stderr, out.String())
	}
}

// explain says where each injected pod's sidecars take the plugin server
// from, and why: the catalog's serverPath for every plugin, or the plugins
// without it.
func TestExplainSaysWhereTheServerComesFrom(t *testing.T) {
	for _, tc := range []struct{ input, catalog, want string }{
		{"server-from-images", "server-from-images", "  plugin server: each sidecar runs cmp-server from its own image (every plugin's catalog entry has serverPath): no cmp-injector-copy init container [from_images]\n"},
		{"server-mixed", "server-mixed", "  plugin server: copied by the cmp-injector-copy init container from defaults.copyImage: no serverPath in the catalog for trivial-cmp [copied]\n"},
		{"argocd-repo-server", "", "  plugin server: copied by the cmp-injector-copy init container from defaults.copyImage: no serverPath in the catalog for helm, kustomize [copied]\n"},
	} {
		cat := catalogFile
		if tc.catalog != "" {
			cat = "../testdata/golden/" + tc.catalog + ".catalog.yaml"
		}
		var out bytes.Buffer
		if err := run("explain", []string{"--catalog", cat, "-f", "../testdata/golden/" + tc.input + ".yaml"}, nil, &out); err != nil || !strings.Contains(out.String(), tc.want) {
			t.Errorf("explain %s: %v\n%s\nwant a line %q", tc.input, err, out.String(), tc.want)
		}
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
	for _, args := range [][]string{{"nope"}, {"serve"}, {"inject"}, {"inject", "--catalog", catalogFile, "extra"}, {"certs", "--service", "s"}} {
		var out bytes.Buffer
		if code, stderr := runCode(args[0], args[1:], nil, &out); code != 2 || stderr == "" || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q", args, code, stderr, out.String())
		}
	}
}

// A mistyped flag is reported once, on the stderr given to Main, with a
// pointer to the command's help.
func TestBadFlagPrintedOnce(t *testing.T) {
	code, stderr := runCode("inject", []string{"--catalgo", "x"}, nil, io.Discard)
	if code != 2 || strings.Count(stderr, "flag provided but not defined: -catalgo") != 1 ||
		!strings.Contains(stderr, "Run 'cmp-injector inject --help' for usage.") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// --help, -h and help print usage on stdout and exit 0, for the program and
// every command; the program's help lists every command.
func TestHelpEverywhere(t *testing.T) {
	var lists []string
	for _, c := range program.Commands {
		lists = append(lists, c.Name)
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		var out bytes.Buffer
		code := Main(context.Background(), args, nil, &out, io.Discard)
		for _, name := range lists {
			if !strings.Contains(out.String(), "\n  "+name+" ") {
				t.Errorf("%v: help lacks command %s", args, name)
			}
		}
		if code != 0 || !strings.Contains(out.String(), "Exit codes: 0 success, 1 failure") {
			t.Errorf("%v: exit %d\n%s", args, code, out.String())
		}
	}
	for _, name := range lists {
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}} {
			var out, errOut bytes.Buffer
			code := Main(context.Background(), args, nil, &out, &errOut)
			if code != 0 || !strings.HasPrefix(out.String(), "usage: cmp-injector "+name) || errOut.Len() != 0 {
				t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
			}
		}
	}
}

// serve with a broken catalog and no certificate exits 1 at once, naming both
// problems in one message, with no stack trace.
func TestServeFailsFast(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "catalog.yaml")
	if err := os.WriteFile(bad, []byte("plugins: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stderr := runCode("serve", []string{"--catalog", bad, "--tls-cert-file", filepath.Join(dir, "tls.crt"),
		"--tls-key-file", filepath.Join(dir, "tls.key"), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, nil, io.Discard)
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	for _, want := range []string{"cmp-injector serve: catalog " + bad + ": yaml: line 1", "\nserving certificate: open "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	for _, not := range []string{"keeping the previous", "goroutine ", "\n\t", ": yaml: yaml:"} {
		if strings.Contains(stderr, not) {
			t.Errorf("stderr has %q", not)
		}
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", stderr)
	}
}

// Values that cannot work are usage errors naming the flag, not a panic.
func TestServeRejectsBadValues(t *testing.T) {
	base := []string{"--catalog", catalogFile, "--tls-cert-file", "c", "--tls-key-file", "k"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--poll-interval=0"}, "--poll-interval must be more than 0, got 0s"},
		{[]string{"--poll-interval=-1s"}, "--poll-interval must be more than 0, got -1s"},
		{[]string{"--max-connections=-1"}, "--max-connections must be at least 1, got -1"},
		{[]string{"--max-connections-per-ip=-1"}, "--max-connections-per-ip must be at least 1, got -1"},
		{[]string{"--max-connections=10", "--max-connections-per-ip=11"}, "--max-connections-per-ip (11) must not be more than --max-connections (10)"},
		{[]string{"--metrics-max-connections=-1"}, "--metrics-max-connections must be at least 1"},
		{[]string{"--metrics-max-connections=10", "--metrics-max-connections-per-ip=11"}, "--metrics-max-connections-per-ip (11) must not be more than --metrics-max-connections (10)"},
		{[]string{"--shutdown-delay=-1s"}, "--shutdown-delay and --shutdown-timeout must not be negative"},
		{[]string{"--log-flush-interval=-1s"}, "--log-flush-interval must not be negative, got -1s"},
	} {
		code, stderr := runCode("serve", append(append([]string{}, base...), tc.args...), nil, io.Discard)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "panic") {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, stderr)
		}
	}
}
