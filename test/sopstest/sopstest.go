// Package sopstest makes what the sops plugin's tests need at run time: a
// fresh age key (age-keygen of bin/), an app encrypted to it by the pinned
// sops with a random planted value, and the check that neither the key nor
// the value shows up where it must not. Nothing secret is committed, and a
// value new on every run found in a log can only have leaked.
package sopstest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Key is an age identity file and its public recipient.
type Key struct {
	File      string // the identity file, as the Secret holds it (keys.txt)
	Recipient string // age1...
	Secret    string // AGE-SECRET-KEY-1...
}

// NewKey runs bin/age-keygen into a new directory.
func NewKey(t testing.TB, bin string) Key {
	t.Helper()
	file := filepath.Join(t.TempDir(), "keys.txt")
	if out, err := exec.Command(filepath.Join(bin, "age-keygen"), "-o", file).CombinedOutput(); err != nil {
		t.Fatalf("age-keygen: %v\n%s (run hack/tools.sh age-keygen)", err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "age-keygen"), "-y", file).Output()
	if err != nil {
		t.Fatalf("age-keygen -y: %v", err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	k := Key{File: file, Recipient: strings.TrimSpace(string(out))}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "AGE-SECRET-KEY-") {
			k.Secret = line
		}
	}
	if !strings.HasPrefix(k.Recipient, "age1") || k.Secret == "" {
		t.Fatalf("age-keygen made no key: recipient %q", k.Recipient)
	}
	return k
}

// Planted is a random value to hide in a Secret.
func Planted(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "planted-" + hex.EncodeToString(b)
}

// WriteApp writes an app into dir: .sops.yaml (the creation rule, public
// recipient only), configmap.yaml in plain text, and secret.yaml, a Secret
// whose stringData.password is planted, encrypted by bin/sops to recipient.
func WriteApp(t testing.TB, bin, dir, recipient, planted string) {
	t.Helper()
	const rule = `^(data|stringData)$`
	files := map[string]string{
		".sops.yaml":     "creation_rules:\n  - encrypted_regex: '" + rule + "'\n    age: " + recipient + "\n",
		"configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: plain\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The plaintext never enters dir: only its encryption does.
	plain := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(plain, []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  user: app\n  password: "+planted+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "sops"), "encrypt", "--age", recipient, "--encrypted-regex", rule,
		"--input-type", "yaml", "--output-type", "yaml", plain)
	cmd.Dir = filepath.Dir(plain)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	enc, err := cmd.Output()
	if err != nil {
		t.Fatalf("sops encrypt: %v\n%s (run hack/tools.sh sops)", err, stderr.String())
	}
	if bytes.Contains(enc, []byte(planted)) || !bytes.Contains(enc, []byte("ENC[AES256_GCM")) {
		t.Fatalf("sops did not encrypt the value:\n%s", enc)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.yaml"), enc, 0o644); err != nil {
		t.Fatal(err)
	}
}

// NotLeaked fails when text (named where) holds the key's secret, a half of
// its body (a partial echo), or planted as it is or base64-encoded (as a
// Secret's data would carry it). An empty planted is not checked.
func NotLeaked(t testing.TB, where, text string, key Key, planted string) {
	t.Helper()
	body := strings.TrimPrefix(key.Secret, "AGE-SECRET-KEY-1")
	needles := map[string]string{
		"the age key":                key.Secret,
		"the first half of the key":  body[:len(body)/2],
		"the second half of the key": body[len(body)/2:],
		"the key, lower case":        strings.ToLower(body[len(body)/2:]),
	}
	if planted != "" {
		needles["the planted value"] = planted
		needles["the planted value in base64"] = base64.StdEncoding.EncodeToString([]byte(planted))
	}
	for what, needle := range needles {
		if strings.Contains(text, needle) {
			t.Errorf("%s holds %s", where, what)
		}
	}
}
