package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// helm's release build derives the Kubernetes version it assumes without a
// cluster from the k8s.io/client-go its go.mod requires (v0.N.x → 1.N, its
// Makefile's K8S_MODULES_*); the pins must say the same for the pinned helm.
func TestHelmKubeVersionPin(t *testing.T) {
	b, err := newBuildInfo("ghcr.io/cmp-injector", "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "mod", "download", "-json", "helm.sh/helm/v3@"+b.Pins["HELM_VERSION"]).Output()
	if err != nil {
		t.Fatalf("go mod download helm %s: %v", b.Pins["HELM_VERSION"], err)
	}
	var dl struct{ GoMod string }
	if err := json.Unmarshal(out, &dl); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(dl.GoMod)
	if err != nil {
		t.Fatal(err)
	}
	// A require line, in a block or alone: [require] k8s.io/client-go vX.Y.Z.
	var clientGo string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == "k8s.io/client-go" {
			clientGo = f[1]
		}
	}
	parts := strings.Split(strings.TrimPrefix(clientGo, "v"), ".")
	if len(parts) < 2 {
		t.Fatalf("helm %s requires no k8s.io/client-go version I can read (%q)", b.Pins["HELM_VERSION"], clientGo)
	}
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"HELM_KUBE_MAJOR": strconv.Itoa(major + 1), "HELM_KUBE_MINOR": parts[1]}
	for name, v := range want {
		if got := b.Pins[name]; got != v {
			t.Errorf("hack/versions.sh: %s=%s, but helm %s requires k8s.io/client-go %s: its release build sets %s", name, got, b.Pins["HELM_VERSION"], clientGo, v)
		}
	}
}

// TestVersionNumbersMatch: a tool whose release build sets its version
// without the v (ytt) reads it from NAME_VERSION_NUMBER, which must be
// NAME_VERSION without the v.
func TestVersionNumbersMatch(t *testing.T) {
	pins, err := readPins(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range pins {
		if base, ok := strings.CutSuffix(k, "_VERSION_NUMBER"); ok {
			n++
			if want := strings.TrimPrefix(pins[base+"_VERSION"], "v"); v != want {
				t.Errorf("%s=%s, want %s (%s_VERSION without the v)", k, v, want, base)
			}
		}
	}
	if n == 0 {
		t.Error("hack/versions.sh has no *_VERSION_NUMBER pin: the test checks nothing")
	}
}
