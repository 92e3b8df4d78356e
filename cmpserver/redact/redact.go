// Package redact keeps the values of a plugin server's Secret-backed env out
// of what it says: its logs, the errors Argo CD shows, the playground and the
// local runner. The injector tells the sidecar which variables those are by
// name (keys.EnvSecretEnv); the values are read from the server's own env at
// start and every occurrence is replaced with "[redacted NAME]".
//
// A plugin's manifests are never redacted: rendering a Secret from a key or a
// Vault path is what sops and helmfile plugins are for, and Argo CD treats the
// manifests as it treats every other.
package redact

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/status"

	"github.com/cmp-injector/cmp-injector/pkg/keys"
)

// MinLen is the shortest value redacted, in bytes. Shorter values ("true",
// "8200", "admin") occur in ordinary output often enough that replacing them
// would mangle messages (every "true" in a log line), and a secret that short
// is guessed faster than it is read from a log. Vault tokens, API keys and
// passwords are longer.
const MinLen = 6

// Redactor replaces the known values. The zero value and nil redact nothing.
type Redactor struct {
	forms []form // longest first
	// count is how many values were replaced (a metric: a plugin whose
	// tools print their secrets shows up without anyone reading its logs).
	count atomic.Int64
	// maxLen is the longest form, what a stream holds back.
	maxLen int
	// index finds the forms in one pass over the text (index.go).
	index *prefixIndex
	names []string // the variables redacted, sorted
	short []string // the variables left alone: shorter than MinLen
}

// form is one spelling of a value as it may be printed.
type form struct {
	text []byte
	tag  string
}

// newRedactor redacts the value of each variable in secrets (name → value).
func newRedactor(secrets map[string]string) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for name, value := range secrets {
		if len(value) < MinLen {
			if value != "" {
				r.short = append(r.short, name)
			}
			continue
		}
		r.names = append(r.names, name)
		tag := "[redacted " + name + "]"
		for _, f := range spellings(value) {
			if len(f) >= MinLen && !seen[f] {
				seen[f] = true
				r.forms = append(r.forms, form{text: []byte(f), tag: tag})
				r.maxLen = max(r.maxLen, len(f))
			}
		}
	}
	// Longest first: a value that contains another is replaced whole, and
	// the order does not depend on the map's.
	sort.Slice(r.forms, func(i, j int) bool {
		a, b := r.forms[i], r.forms[j]
		if len(a.text) != len(b.text) {
			return len(a.text) > len(b.text)
		}
		return bytes.Compare(a.text, b.text) < 0
	})
	sort.Strings(r.names)
	sort.Strings(r.short)
	r.index = newPrefixIndex(r.forms)
	return r
}

// spellings are the ways value shows up in output: as is; escaped as a JSON
// string (the server's JSON logs, the playground's answers; with and without
// HTML escaping); Go-quoted (%q, and how a command's arguments are shown);
// quoted as YAML, Python and a shell print it; upper- and lower-cased;
// percent-encoded, hex and base64 (encodings); and, for a value of several
// lines (a PEM block, a kubeconfig), each line, since tools print such
// values line by line.
func spellings(value string) []string {
	out := []string{value}
	if b, err := json.Marshal(value); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	if enc.Encode(value) == nil {
		s := strings.TrimSuffix(sb.String(), "\n")
		out = append(out, s[1:len(s)-1])
	}
	q := strconv.Quote(value)
	out = append(out, q[1:len(q)-1])
	out = append(out, quotings(value)...)
	out = append(out, strings.ToUpper(value), strings.ToLower(value))
	out = append(out, encodings(value)...)
	if strings.ContainsAny(value, "\r\n") {
		out = append(out, strings.FieldsFunc(value, func(c rune) bool { return c == '\n' || c == '\r' })...)
	}
	return out
}

// FromEnv is the Redactor of a plugin server whose environment is env: the
// values of the variables keys.EnvSecretEnv names there.
func FromEnv(env []string) *Redactor {
	spec, ok := lookup(env, keys.EnvSecretEnv)
	if !ok || spec == "" {
		return newRedactor(nil)
	}
	m := parseRule(spec)
	secrets := map[string]string{}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if name != keys.EnvSecretEnv && m.matches(name) {
			secrets[name] = value
		}
	}
	return newRedactor(secrets)
}

// lookup is the last value of name in env (the one exec gives a process).
func lookup(env []string, name string) (string, bool) {
	value, found := "", false
	for _, kv := range env {
		if n, v, _ := strings.Cut(kv, "="); n == name {
			value, found = v, true
		}
	}
	return value, found
}

// notUnderPatterns are variables a pattern ("*", "AVP_*") never takes: the
// image and the runtime set them, they hold paths and settings that messages
// quote ("open /home/argocd/..." would read "[redacted HOME]/..."), and a
// Secret that replaced them would break the sidecar before anything leaked.
// A variable named outright (a secretKeyRef) is redacted all the same.
var notUnderPatterns = map[string]bool{
	"PATH": true, "HOME": true, "HOSTNAME": true, "PWD": true, "TMPDIR": true,
	keys.EnvPluginSockFilePath: true, keys.EnvCMPWorkDir: true, keys.EnvGRPCMaxSizeMB: true,
	keys.EnvGRPCKeepAliveMin: true, keys.EnvCMPServerLogLevel: true, keys.EnvCMPServerLogFormat: true,
}

// rule is a parsed keys.EnvSecretEnv value.
type rule struct {
	names    map[string]bool
	prefixes []string
	excluded map[string]bool
}

// parseRule reads a comma-separated list of names, prefixes ending in "*" and
// "!"-excluded names. Empty items are skipped; an item is never an error: the
// rule is written by the injector, and reading too much as secret costs only
// a clearer log.
func parseRule(s string) rule {
	r := rule{names: map[string]bool{}, excluded: map[string]bool{}}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		switch {
		case item == "":
		case strings.HasPrefix(item, "!"):
			r.excluded[item[1:]] = true
		case strings.HasSuffix(item, "*"):
			r.prefixes = append(r.prefixes, strings.TrimSuffix(item, "*"))
		default:
			r.names[item] = true
		}
	}
	return r
}

// matches says whether the rule makes name a Secret's variable: named, or
// under a prefix and not excluded.
func (r rule) matches(name string) bool {
	if r.names[name] {
		return true
	}
	if r.excluded[name] || notUnderPatterns[name] {
		return false
	}
	for _, p := range r.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Names are the variables whose values are redacted; Short those whose
// values are too short to be (MinLen). For logs: names, never values.
func (r *Redactor) Names() []string {
	if r == nil {
		return nil
	}
	return r.names
}

func (r *Redactor) Short() []string {
	if r == nil {
		return nil
	}
	return r.short
}

// Count is how many values were replaced so far.
func (r *Redactor) Count() int64 {
	if r == nil {
		return 0
	}
	return r.count.Load()
}

// Empty says whether there is nothing to redact.
func (r *Redactor) Empty() bool { return r == nil || len(r.forms) == 0 }

// String is s with every known value replaced by its tag, leftmost first.
func (r *Redactor) String(s string) string {
	if r.Empty() {
		return s
	}
	out, _ := r.scan(nil, []byte(s), len(s))
	return string(out)
}

// Bytes is b redacted; b itself when nothing was replaced.
func (r *Redactor) Bytes(b []byte) []byte {
	if r.Empty() {
		return b
	}
	out, _ := r.scan(nil, b, len(b))
	return out
}

// scan appends to out the redaction of buf's bytes before limit, and returns
// how many bytes of buf it used: limit, or more when a value starting before
// limit ends after it. A value found must lie wholly in buf; one starting at
// or after limit is left for later (see Stream).
func (r *Redactor) scan(out, buf []byte, limit int) ([]byte, int) {
	pos := 0
	for pos < limit {
		at, f := r.index.find(r.forms, buf, pos, limit)
		if at < 0 {
			return append(out, buf[pos:limit]...), limit
		}
		out = append(out, buf[pos:at]...)
		out = append(out, r.forms[f].tag...)
		r.count.Add(1)
		pos = at + len(r.forms[f].text)
	}
	return out, pos
}

// Error is err with its text redacted; err itself when nothing in it is a
// known value. A gRPC status keeps its code. errors.Is and errors.As still
// see err, so callers keep their decisions; only the text changes.
func (r *Redactor) Error(err error) error {
	if err == nil || r.Empty() {
		return err
	}
	msg := err.Error()
	red := r.String(msg)
	if red == msg {
		return err
	}
	if st, ok := status.FromError(err); ok {
		return &redactedStatus{redacted{msg: red, err: err}, status.New(st.Code(), r.String(st.Message()))}
	}
	return &redacted{msg: red, err: err}
}

// redacted is an error whose text was redacted. It unwraps to the original
// for errors.Is; a caller that prints an error prints Error().
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// redactedStatus is a redacted gRPC status error: gRPC sends its code and
// the redacted message.
type redactedStatus struct {
	redacted
	st *status.Status
}

func (e *redactedStatus) GRPCStatus() *status.Status { return e.st }
