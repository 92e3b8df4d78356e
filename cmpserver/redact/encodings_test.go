package redact

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// password has what makes encodings differ: characters URLs escape, quotes,
// a backslash and bytes whose base64 differs between the two alphabets.
const password = `S3cr3t/p@ss+w0rd'"\x$y~?>`

// TestEncodings is issue 37's item 9: a Secret's value in a failing
// command's stderr or in the error sent to Argo CD is redacted however a
// tool prints it: base64 (both alphabets, with and without padding, and
// inside a longer encoded text such as curl's Authorization header), hex,
// percent-encoded (what git and curl print of a URL's userinfo), upper- or
// lower-cased, and quoted by YAML, Python or a shell.
func TestEncodings(t *testing.T) {
	r := newRedactor(map[string]string{"P": password, "T": token})
	pyRepr := `'S3cr3t/p@ss+w0rd\'"\\x$y~?>'`
	cases := []struct{ name, printed string }{
		{"base64 std", base64.StdEncoding.EncodeToString([]byte(password))},
		{"base64 std unpadded", base64.RawStdEncoding.EncodeToString([]byte(password))},
		{"base64 url", base64.URLEncoding.EncodeToString([]byte(password))},
		{"base64 url unpadded", base64.RawURLEncoding.EncodeToString([]byte(password))},
		{"base64 of the token", base64.StdEncoding.EncodeToString([]byte(token))},
		{"base64 inside basic auth (curl -v)", "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))},
		{"base64 at offset 1", base64.StdEncoding.EncodeToString([]byte("u:" + password))},
		{"base64 at offset 2", base64.StdEncoding.EncodeToString([]byte("us:" + password + "\n"))},
		{"hex", hex.EncodeToString([]byte(password))},
		{"hex upper", strings.ToUpper(hex.EncodeToString([]byte(password)))},
		{"hex of the token", hex.EncodeToString([]byte(token))},
		{"query-escaped", "https://vault/?token=" + url.QueryEscape(password)},
		{"path-escaped", "https://vault/v1/" + url.PathEscape(password)},
		{"userinfo (git)", "fatal: unable to access 'https://" + url.UserPassword("git", password).String() + "@github.com/org/repo/'"},
		{"percent-encoded every byte", percentEach(password, "%%%02X")},
		{"percent-encoded lower-case hex", regexp.MustCompile(`%[0-9A-F]{2}`).ReplaceAllStringFunc(url.QueryEscape(password), strings.ToLower)},
		{"upper-cased", "TOKEN " + strings.ToUpper(token)},
		{"lower-cased", strings.ToLower(password)},
		{"YAML single-quoted", "password: '" + strings.ReplaceAll(password, "'", "''") + "'"},
		{"YAML double-quoted", `password: "` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(password) + `"`},
		{"Python repr", "KeyError: " + pyRepr},
		{"shell single-quoted (set -x)", "+ vault login '" + strings.ReplaceAll(password, "'", `'\''`) + "'"},
		{"shell double-quoted", `+ export P="` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`").Replace(password) + `"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := "helm: failed: " + tc.printed + " (exit 1)"
			check := func(where, got string) {
				t.Helper()
				if !strings.Contains(got, "[redacted ") {
					t.Errorf("%s: nothing redacted in %q", where, got)
				}
				for _, leak := range []string{password, token, tc.printed} {
					if strings.Contains(got, leak) {
						t.Errorf("%s: %q still holds %q", where, got, leak)
					}
				}
			}
			check("String", r.String(in))
			st, _ := status.FromError(r.Error(status.Error(codes.Unknown, in)))
			check("gRPC status", st.Message())
			var out strings.Builder
			s := r.Stream(&out)
			for i := range len(in) {
				_, _ = s.Write([]byte{in[i]})
			}
			_ = s.Flush()
			check("stream", out.String())
		})
	}
	// Short values stay unredacted in every spelling: "true" in base64 is
	// dGJ1ZQ, and replacing it would mangle output that merely contains it.
	short := newRedactor(map[string]string{"S": "12345"})
	for _, s := range []string{"12345", base64.StdEncoding.EncodeToString([]byte("12345")), hex.EncodeToString([]byte("12345"))} {
		if got := short.String(s); got != s {
			t.Errorf("a value shorter than MinLen is redacted in %q: %q", s, got)
		}
	}
}

func percentEach(s, format string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}
