package redact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

const token = "hvs.CAESIJ-planted-token-value"

func TestFromEnv(t *testing.T) {
	env := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/cmp-plugin",
		"VAULT_TOKEN=" + token,
		"AVP_ROLE_ID=role-0123456789",
		"AVP_TYPE=vault",           // too short to redact: named in Short
		"AVP_AUTH_TYPE=kubernetes", // excluded by the rule: the catalog's literal
		"OTHER=not-a-secret-value",
		keys.EnvSecretEnv + "=VAULT_TOKEN,AVP_*,!AVP_AUTH_TYPE",
	}
	r := FromEnv(env)
	if got, want := fmt.Sprint(r.Names()), "[AVP_ROLE_ID VAULT_TOKEN]"; got != want {
		t.Errorf("names %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(r.Short()), "[AVP_TYPE]"; got != want {
		t.Errorf("short %s, want %s", got, want)
	}
	in := "login with " + token + " as role-0123456789 (auth kubernetes, home /home/cmp-plugin, not-a-secret-value)"
	want := "login with [redacted VAULT_TOKEN] as [redacted AVP_ROLE_ID] (auth kubernetes, home /home/cmp-plugin, not-a-secret-value)"
	if got := r.String(in); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for _, env := range [][]string{nil, {"VAULT_TOKEN=" + token}, {"VAULT_TOKEN=" + token, keys.EnvSecretEnv + "="}} {
		if r := FromEnv(env); !r.Empty() || r.String(token) != token {
			t.Errorf("env %q: redacts %v without a rule", env, r.Names())
		}
	}
	// "*" (an envFrom Secret without prefix) takes every variable but the
	// rule itself, the excluded ones and those of the image and runtime;
	// a name given outright is taken whatever it is.
	r = FromEnv([]string{"A=aaaaaaaa", "KEY_FILE=/keys/key.txt", "HOME=/home/argocd", "PATH=/usr/bin:/bin",
		keys.EnvPluginSockFilePath + "=/home/argocd/cmp-server/plugins", keys.EnvSecretEnv + "=*,!KEY_FILE"})
	if got := fmt.Sprint(r.Names()); got != "[A]" {
		t.Errorf("* takes %s, want [A]", got)
	}
	if got := fmt.Sprint(FromEnv([]string{"HOME=/home/argocd", keys.EnvSecretEnv + "=HOME"}).Names()); got != "[HOME]" {
		t.Errorf("a named HOME: %s, want [HOME]", got)
	}
}

func TestString(t *testing.T) {
	r := newRedactor(map[string]string{
		"T":   token,
		"Q":   `pa"ss\word<&>`,
		"PEM": "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD\n-----END KEY-----\n",
		"SUB": "planted", // contained in T's value: T is replaced whole
	})
	jsonOf := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, tc := range []struct{ in, want string }{
		{"no secret here", "no secret here"},
		{token, "[redacted T]"},
		{token + token, "[redacted T][redacted T]"},
		{"x" + token[:10] + "x", "x" + token[:10] + "x"},
		{"just planted", "just [redacted SUB]"},
		{`{"msg":` + jsonOf("failed: "+`pa"ss\word<&>`) + `}`, `{"msg":"failed: [redacted Q]"}`},
		{fmt.Sprintf("%q", `pa"ss\word<&>`), `"[redacted Q]"`},
		{"line MIIBOgIBAAJBAKj34GkxFhD printed alone", "line [redacted PEM] printed alone"},
		{`{"k":` + jsonOf("-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD\n-----END KEY-----\n") + `}`, `{"k":"[redacted PEM]"}`},
	} {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("String(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
	if got := newRedactor(map[string]string{"S": "12345"}).String("12345"); got != "12345" {
		t.Errorf("a value shorter than MinLen is redacted: %q", got)
	}
	var nilR *Redactor
	if nilR.String(token) != token || !nilR.Empty() || nilR.Names() != nil {
		t.Error("a nil Redactor must pass everything through")
	}
}

func TestError(t *testing.T) {
	r := newRedactor(map[string]string{"T": token})
	plain := errors.New("no secret")
	if got := r.Error(plain); got != plain { //nolint:errorlint // the very same error, not one wrapping it
		t.Error("an error without a secret must be returned as is")
	}
	wrapped := fmt.Errorf("`sh -c env` failed exit status 1: VAULT_TOKEN=%s: %w", token, context.DeadlineExceeded)
	got := r.Error(wrapped)
	if strings.Contains(got.Error(), token) || !strings.Contains(got.Error(), "VAULT_TOKEN=[redacted T]") {
		t.Errorf("Error() = %q", got)
	}
	if !errors.Is(got, context.DeadlineExceeded) {
		t.Error("errors.Is no longer sees the cause")
	}
	if st, ok := status.FromError(got); ok || strings.Contains(st.Message(), token) {
		t.Errorf("a plain error became a status %v, or its message kept the value: %q", ok, st.Message())
	}
	se := fmt.Errorf("receive: %w", status.Errorf(codes.DeadlineExceeded, "deadline: token %s", token))
	st, ok := status.FromError(r.Error(se))
	if !ok || st.Code() != codes.DeadlineExceeded || strings.Contains(st.Message(), token) || !strings.Contains(st.Message(), "[redacted T]") {
		t.Errorf("status error: ok %v code %v message %q", ok, st.Code(), st.Message())
	}
}

func TestStream(t *testing.T) {
	r := newRedactor(map[string]string{"T": token, "U": "another-secret"})
	in := "a " + token + " b another-secret c " + token[:len(token)-1] + " end " + token
	want := r.String(in)
	if strings.Contains(want, token) || strings.Contains(want, "another-secret") {
		t.Fatalf("String left a value: %q", want)
	}
	// Every split into two writes, and byte by byte.
	for cut := 0; cut <= len(in); cut++ {
		var out bytes.Buffer
		s := r.Stream(&out)
		_, _ = s.Write([]byte(in[:cut]))
		_, _ = s.Write([]byte(in[cut:]))
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Fatalf("cut at %d: %q, want %q", cut, out.String(), want)
		}
	}
	var out bytes.Buffer
	s := r.Stream(&out)
	for i := range len(in) {
		_, _ = s.Write([]byte{in[i]})
	}
	_ = s.Flush()
	if out.String() != want {
		t.Fatalf("byte by byte: %q, want %q", out.String(), want)
	}
	// Nothing to redact: writes pass straight through.
	out.Reset()
	s = newRedactor(nil).Stream(&out)
	_, _ = s.Write([]byte(token))
	if out.String() != token {
		t.Errorf("empty redactor held back %q", out.String())
	}
}

func TestWriter(t *testing.T) {
	var out bytes.Buffer
	w := newRedactor(map[string]string{"T": token}).Writer(&out)
	line := []byte(`{"level":"warn","msg":"request failed","error":"` + token + `"}` + "\n")
	if n, err := w.Write(line); n != len(line) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if strings.Contains(out.String(), token) || !strings.Contains(out.String(), "[redacted T]") {
		t.Errorf("log line %q", out.String())
	}
}

// A command's stderr through the stream: a 1 MiB trace with a token on
// every line, against 20 variables (80 spellings).
func BenchmarkStream(b *testing.B) {
	secrets := map[string]string{}
	for i := range 20 {
		secrets[fmt.Sprintf("S%d", i)] = fmt.Sprintf("secret-value-%02d-0123456789abcdef", i)
	}
	r := newRedactor(secrets)
	var in bytes.Buffer
	for in.Len() < 1<<20 {
		fmt.Fprintf(&in, "+ curl -H 'X-Vault-Token: %s' https://vault:8200/v1/secret/data/app\n", secrets["S7"])
	}
	b.SetBytes(int64(in.Len()))
	for b.Loop() {
		s := r.Stream(io.Discard)
		for p := in.Bytes(); len(p) > 0; p = p[min(len(p), 32<<10):] {
			_, _ = s.Write(p[:min(len(p), 32<<10)])
		}
		_ = s.Flush()
	}
}
