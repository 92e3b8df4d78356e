package cmpserver

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/cmp-injector/cmp-injector/cmpserver/client"
	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
)

// The expected texts below are written out by hand from argocd-cmp-server's
// runCommand and its callers (v3.6.1): users paste these messages into search
// engines, so ours must start with exactly Argo CD's text. Anything we add comes
// after it.

func TestCommandErrorTextsMatchArgo(t *testing.T) {
	t.Parallel()
	const head = "kind: ConfigManagementPlugin\nmetadata: {name: errs}\nspec:\n"
	for _, tc := range []struct {
		name   string
		spec   string
		rpc    string
		prefix string // Argo CD's full message
		exact  bool   // no detail of ours follows
	}{
		{
			name:   "generate exit with stderr",
			spec:   `  generate: {command: [sh, -c, 'echo "x" >&2; exit 3']}`,
			rpc:    "generate",
			prefix: "error generating manifests: `sh -c \"echo \\\"x\\\" >&2; exit 3\"` failed exit status 3: x",
			exact:  true,
		},
		{
			name:   "generate multi-line script, empty argument, no stderr",
			spec:   "  generate:\n    command: [sh, -c]\n    args: [\"test -n \\\"$1\\\"\\nexit 2\\n\", \"\", \"it's\"]",
			rpc:    "generate",
			prefix: "error generating manifests: `sh -c \"test -n \\\"$1\\\"\\nexit 2\\n\" \"\" it's` failed exit status 2",
			exact:  true,
		},
		{
			name:   "init",
			spec:   "  init: {command: [sh, -c, 'echo no init >&2; exit 5']}\n  generate: {command: [\"true\"]}",
			rpc:    "generate",
			prefix: "error generating manifests: `sh -c \"echo no init >&2; exit 5\"` failed exit status 5: no init",
			exact:  true,
		},
		{
			name:   "discovery find.command",
			spec:   "  generate: {command: [\"true\"]}\n  discover: {find: {command: [sh, -c, 'exit 1']}}",
			rpc:    "match",
			prefix: "match repository error: error running find command: `sh -c \"exit 1\"` failed exit status 1",
			exact:  true,
		},
		{
			name:   "dynamic parameters",
			spec:   "  generate: {command: [\"true\"]}\n  parameters: {dynamic: {command: [sh, -c, 'echo boom >&2; exit 1']}}",
			rpc:    "parameters",
			prefix: "get parameters announcement error: error executing dynamic parameter output command: `sh -c \"echo boom >&2; exit 1\"` failed exit status 1: boom",
			exact:  true,
		},
		{
			// Argo CD returns exec's own error; our detail names the command.
			name:   "start failure",
			spec:   "  generate: {command: [no-such-cmp-command, --flag]}",
			rpc:    "generate",
			prefix: `error generating manifests: exec: "no-such-cmp-command": executable file not found in $PATH`,
		},
		{
			name:   "start failure in discovery",
			spec:   "  generate: {command: [\"true\"]}\n  discover: {find: {command: [no-such-cmp-command]}}",
			rpc:    "match",
			prefix: `match repository error: error running find command: exec: "no-such-cmp-command": executable file not found in $PATH`,
		},
	} {
		ts := startServer(t, head+tc.spec+"\n", nil)
		c := ts.dial(t)
		ctx := ctxTimeout(t, 30*time.Second)
		req := client.Request{RepoRoot: writeTree(t, map[string]string{"f": "x"})}
		var err error
		switch tc.rpc {
		case "generate":
			_, err = c.Generate(ctx, req)
		case "match":
			_, err = c.Match(ctx, req)
		case "parameters":
			_, err = c.Parameters(ctx, req)
		}
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		msg := status.Convert(err).Message()
		if tc.exact && msg != tc.prefix {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, msg, tc.prefix)
		}
		if !tc.exact && (!strings.HasPrefix(msg, tc.prefix) || len(msg) == len(tc.prefix)) {
			t.Errorf("%s:\n got %s\nwant %s followed by our detail", tc.name, msg, tc.prefix)
		}
	}
}

// TestDeadlineErrorTextMatchesArgo: Argo CD SIGKILLs the command when the request
// deadline (minus its buffer) passes, so its message says "signal: killed". We
// send SIGTERM to the group first, but keep Argo CD's text and add after it why
// the command was stopped and how it really ended. (TestCommandTimeoutFlag covers
// --exec-timeout.)
func TestDeadlineErrorTextMatchesArgo(t *testing.T) {
	t.Parallel()
	plugin := "kind: ConfigManagementPlugin\nmetadata: {name: slow}\nspec:\n  generate: {command: [sleep, \"60\"]}\n"
	core, logs := observer.New(zap.WarnLevel)
	ts := startServer(t, plugin, func(o *Options) {
		o.Exec = command.DefaultOptions()
		// A wide buffer so that the server's answer usually comes before the
		// client's own deadline (which gives the same code, with gRPC's text).
		o.Exec.DeadlineBuffer = time.Second
		o.Logger = zap.New(core)
	})
	_, err := ts.dial(t).Generate(ctxTimeout(t, 3*time.Second), client.Request{RepoRoot: writeTree(t, map[string]string{"f": "x"})})
	// Argo CD's repo-server gets DeadlineExceeded, "context deadline
	// exceeded"; ours says why after that text. The log has what the
	// server sent, whichever deadline the client saw first.
	want := "context deadline exceeded (error generating manifests: `sleep 60` failed signal: killed (killed at the request deadline; the command ended with signal: terminated))"
	st := status.Convert(err)
	if st.Code() != codes.DeadlineExceeded || (st.Message() != want && st.Message() != "context deadline exceeded") {
		t.Errorf("got %v\nwant code DeadlineExceeded, %s", err, want)
	}
	// When the client's own deadline came first, the server may not have
	// logged yet: wait for the line.
	sent := ""
	for end := time.Now().Add(20 * time.Second); sent == "" && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, e := range logs.FilterMessage("request failed").All() {
			sent, _ = e.ContextMap()["error"].(string)
		}
	}
	if sent != "rpc error: code = DeadlineExceeded desc = "+want {
		t.Errorf("the server sent %q\nwant code DeadlineExceeded, %s", sent, want)
	}
}

// rawMessage is sent as its bytes by rawCodec; anything else as protobuf.
type rawMessage []byte

type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.(rawMessage); ok {
		return b, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (rawCodec) Unmarshal(b []byte, v any) error { return proto.Unmarshal(b, v.(proto.Message)) }

// TestStreamErrorTextsMatchArgo: what goes wrong on the stream reads as
// argocd-cmp-server's ReceiveRepoStream and its callers word it, whole.
func TestStreamErrorTextsMatchArgo(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.WarnLevel)
	ts := startServer(t, discoveryPlugin, func(o *Options) { o.Logger = zap.New(core) })
	tgz := craftTgz(t, dir("."), file("data.txt", "x"))
	header, err := proto.Marshal(metaMsg(".", checksum(tgz)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		msgs []any
		code codes.Code
		want string // a regular expression of the whole message
	}{
		{"no header", nil, codes.Unknown,
			`generate manifest error receiving stream: error receiving stream header: EOF`},
		// Field 1 with a length past the end: the server's Recv fails, and
		// gRPC answers the client itself; our text is in the log.
		{"a message that does not decode", []any{rawMessage(header), rawMessage{0x0a, 0x7f}}, codes.Internal,
			`grpc: failed to unmarshal the received message: .+`},
		{"checksum", []any{metaMsg(".", strings.Repeat("0", 64)), chunkMsg(tgz)}, codes.Unknown,
			`generate manifest error receiving stream: error receiving tgz file: file checksum validation error`},
	} {
		stream, err := pluginpb.NewConfigManagementPluginServiceClient(ts.dial(t).Conn()).GenerateManifest(ctxTimeout(t, 30*time.Second), grpc.ForceCodec(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tc.msgs {
			if stream.SendMsg(m) != nil {
				break
			}
		}
		_, err = stream.CloseAndRecv()
		st := status.Convert(err)
		if !regexp.MustCompile(`^`+tc.want+`$`).MatchString(st.Message()) || st.Code() != tc.code {
			t.Errorf("%s: got %v %q\nwant %v %s", tc.name, st.Code(), st.Message(), tc.code, tc.want)
		}
	}
	recvErr := regexp.MustCompile(`^generate manifest error receiving stream: error receiving tgz file: stream Recv error: rpc error: code = Internal desc = grpc: failed to unmarshal the received message: .+$`)
	// gRPC answers the client before the handler returns and logs: wait for
	// the line.
	found := false
	for end := time.Now().Add(20 * time.Second); !found && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		for _, e := range logs.FilterMessage("receive failed").All() {
			if err, ok := e.ContextMap()["error"].(string); ok && recvErr.MatchString(err) {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no receive failure logged as %s", recvErr)
	}
	// Match and parameters have their own words before the same text.
	for rpc, prefix := range map[string]string{"match": "match repository error receiving stream: ", "parameters": "parameters announcement error receiving stream: "} {
		var stream interface {
			Send(*pluginpb.AppStreamRequest) error
			CloseSend() error
			RecvMsg(any) error
		}
		var err error
		pc := pluginpb.NewConfigManagementPluginServiceClient(ts.dial(t).Conn())
		if rpc == "match" {
			stream, err = pc.MatchRepository(ctxTimeout(t, 30*time.Second))
		} else {
			stream, err = pc.GetParametersAnnouncement(ctxTimeout(t, 30*time.Second))
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = stream.Send(metaMsg(".", strings.Repeat("0", 64)))
		_ = stream.Send(chunkMsg(tgz))
		_ = stream.CloseSend()
		err = stream.RecvMsg(&emptypb.Empty{})
		if want := prefix + "error receiving tgz file: file checksum validation error"; status.Convert(err).Message() != want {
			t.Errorf("%s: got %v\nwant %s", rpc, err, want)
		}
	}
}

// TestDynamicParametersErrorTextsMatchArgo: output Argo CD's server cannot
// decode reads as its error, with its JSON error, and ours after it.
func TestDynamicParametersErrorTextsMatchArgo(t *testing.T) {
	t.Parallel()
	const argo = "get parameters announcement error: error unmarshaling dynamic parameter output into ParametersAnnouncementResponse: "
	for _, tc := range []struct{ out, json string }{
		{`{"a":1}`, "json: cannot unmarshal object into Go value of type []*apiclient.ParameterAnnouncement"},
		{"", "unexpected end of JSON input"},
		{"\n", "unexpected end of JSON input"},
		{`[{"name":"a"}] trailing`, "invalid character 't' after top-level value"},
		{`[5]`, "json: cannot unmarshal number into Go value of type apiclient.ParameterAnnouncement"},
		{`[{"name":"a","required":"yes"}]`, "json: cannot unmarshal string into Go struct field ParameterAnnouncement.required of type bool"},
	} {
		plugin := strings.Replace(discoveryPlugin, `echo '[{\"name\":\"dyn\",\"collectionType\":\"map\",\"map\":{\"a\":\"b\"}}]'`, "cat out.json", 1)
		ts := startServer(t, plugin, nil)
		root := writeTree(t, map[string]string{"out.json": tc.out})
		_, err := ts.dial(t).Parameters(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: root})
		msg := status.Convert(err).Message()
		if want := argo + tc.json + " ("; !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, ")") {
			t.Errorf("output %q:\n got %s\nwant %s<our detail>)", tc.out, msg, want)
		}
	}
}

// TestGlobWithoutWildcardTextMatchesArgo: a find.glob naming a file that is
// not there fails discovery with zglob's error, as in Argo CD (whose
// repo-server then prefixes "error checking repository support for plugin
// <socket>: ").
func TestGlobWithoutWildcardTextMatchesArgo(t *testing.T) {
	t.Parallel()
	plugin := "kind: ConfigManagementPlugin\nmetadata: {name: glob}\nspec:\n  generate: {command: [\"true\"]}\n  discover: {find: {glob: Chart.yaml}}\n"
	ts := startServer(t, plugin, nil)
	_, err := ts.dial(t).Match(ctxTimeout(t, 30*time.Second), client.Request{RepoRoot: writeTree(t, map[string]string{"app/f": "x"}), AppRelPath: "app"})
	want := `^match repository error: error finding glob match for pattern "` + regexp.QuoteMeta(ts.srv.opts.WorkDir) + `/[0-9a-f-]{36}/app/Chart\.yaml": file does not exist$`
	if msg := status.Convert(err).Message(); !regexp.MustCompile(want).MatchString(msg) {
		t.Errorf("got %v\nwant %s", err, want)
	}
}
