package request

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/cmp-injector/cmp-injector/cmpserver/command"
	"github.com/cmp-injector/cmp-injector/cmpserver/engine"
	"github.com/cmp-injector/cmp-injector/cmpserver/manifests"
	"github.com/cmp-injector/cmp-injector/cmpserver/pluginpb"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack"
	"github.com/cmp-injector/cmp-injector/cmpserver/unpack/tartest"
	"github.com/cmp-injector/cmp-injector/pkg/pluginconfig"
)

// newEngine serves a read-only plugin whose generate prints somefile, after,
// on its first run only (marked in the test's dir), making the shared tree
// writable and rewriting it: what readOnlyRepository cannot stop, since a
// command runs as the tree's owner.
func newEngine(t *testing.T, marker string) *engine.Engine {
	t.Helper()
	p, _, err := pluginconfig.Parse([]byte(`kind: ConfigManagementPlugin
metadata: {name: tamper}
spec:
  readOnlyRepository: true
  generate:
    command: [sh, -c]
    args:
    - |
      set -e
      if [ ! -e ` + marker + ` ]; then : > ` + marker + `; chmod -R u+w . && echo poisoned > somefile; fi
      printf '{"kind":"ConfigMap","data":{"content":"%s"}}' "$(cat somefile)"
`))
	if err != nil {
		t.Fatal(err)
	}
	return engine.New(p, unpack.DefaultLimits(), t.TempDir(), command.DefaultOptions(), os.Environ(), zap.NewNop(),
		command.ObserverFunc(func(command.Report) {}))
}

// A request on a shared tree that a command changed runs again on a private
// copy, and its answer is the second run's alone: each run builds its own.
func TestRerunOnAChangedSharedTreeAnswersAfresh(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	e := newEngine(t, marker)
	tgz := tartest.Tgz(t, tartest.File("somefile", "original"))
	runs := 0
	r := &Request{Engine: e, Extract: true, Trees: unpack.NewTrees(), Limits: unpack.DefaultLimits(), Log: zap.NewNop()}
	out, stage, err := Run(context.Background(), r, tartest.NewStream(tgz, "."), func(ctx context.Context, ws *engine.Workspace) ([]string, error) {
		runs++
		var docs []string
		err := e.Generate(ctx, ws, manifests.SinkFunc(func(doc []byte) error {
			docs = append(docs, string(doc))
			return nil
		}))
		return docs, err
	})
	if err != nil || stage != "" {
		t.Fatalf("stage %q: %v", stage, err)
	}
	if runs != 2 {
		t.Fatalf("%d runs, want the first on the shared tree and one on the private copy", runs)
	}
	if len(out) != 1 || !strings.Contains(out[0], `"content":"original"`) {
		t.Errorf("answer %q, want only the private copy's run, which saw the file as sent", out)
	}
}

// Run says which step failed: a refused header, a broken stream, a failing
// plugin call.
func TestRunNamesTheFailedStage(t *testing.T) {
	e := newEngine(t, filepath.Join(t.TempDir(), "ran"))
	tgz := tartest.Tgz(t, tartest.File("somefile", "x"))
	call := func(context.Context, *engine.Workspace) (int, error) { return 0, errors.New("plugin failed") }
	refuse := func(*pluginpb.ManifestRequestMetadata) error { return errors.New("not yours") }
	for _, tc := range []struct {
		name   string
		r      *Request
		stream unpack.Stream
		want   Stage
	}{
		{"admit", &Request{Engine: e, Extract: true, Log: zap.NewNop(), Admit: refuse}, tartest.NewStream(tgz, "."), StageAdmit},
		{"receive", &Request{Engine: e, Extract: true, Log: zap.NewNop()}, &tartest.Stream{}, StageReceive},
		{"run", &Request{Engine: e, Extract: true, Log: zap.NewNop()}, tartest.NewStream(tgz, "."), StageRun},
	} {
		if _, stage, err := Run(context.Background(), tc.r, tc.stream, call); stage != tc.want || err == nil {
			t.Errorf("%s: stage %q, %v; want %q", tc.name, stage, err, tc.want)
		}
	}
}
