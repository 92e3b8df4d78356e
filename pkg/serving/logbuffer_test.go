package serving_test

import (
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/cmp-injector/cmp-injector/pkg/serving"
	"github.com/cmp-injector/cmp-injector/pkg/serving/servingtest"
)

// Info lines wait in the buffer; a warning writes them and itself at once, in
// order; stop writes the rest. The hour-long interval keeps the timer out of
// the test.
func TestBufferedLogCore(t *testing.T) {
	var out servingtest.SyncBuffer
	core, stop := serving.BufferedLogCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), &out, zapcore.InfoLevel, time.Hour)
	log := zap.New(core).With(zap.String("component", "test"))
	log.Debug("below the level")
	log.Info("review", zap.Int("n", 1))
	log.Info("review", zap.Int("n", 2))
	if got := out.String(); got != "" {
		t.Fatalf("info lines written before a flush: %q", got)
	}
	log.Warn("catalog rejected")
	got := out.String()
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 3 ||
		!strings.Contains(lines[0], `"n":1`) || !strings.Contains(lines[1], `"n":2`) || !strings.Contains(lines[2], `"catalog rejected"`) ||
		!strings.Contains(lines[2], `"component":"test"`) {
		t.Fatalf("after a warning: %q", got)
	}
	log.Info("review", zap.Int("n", 3))
	if out.String() != got {
		t.Fatalf("info line written before a flush: %q", out.String())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if rest := strings.TrimPrefix(out.String(), got); !strings.Contains(rest, `"n":3`) || strings.Contains(out.String(), "below the level") {
		t.Fatalf("after stop: %q", out.String())
	}
}

// With no interval every line is written at once.
func TestUnbufferedLogCore(t *testing.T) {
	var out servingtest.SyncBuffer
	core, stop := serving.BufferedLogCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), &out, zapcore.InfoLevel, 0)
	zap.New(core).Info("review")
	if !strings.Contains(out.String(), `"review"`) {
		t.Fatalf("not written at once: %q", out.String())
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// A container's stderr is a pipe, which cannot be fsynced (EINVAL): writing a
// warning through and stopping must not report that as a write error, which
// zap would print as a "write error: sync /dev/stderr" line after each warning.
func TestBufferedLogCoreOnAPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	core, stop := serving.BufferedLogCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), w, zapcore.InfoLevel, time.Hour)
	var errOut servingtest.SyncBuffer
	log := zap.New(core, zap.ErrorOutput(zapcore.AddSync(&errOut)))
	log.Info("review")
	log.Warn("catalog rejected")
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	w.Close()
	// Two lines fit in the pipe's buffer: no reader is needed while writing.
	b, _ := io.ReadAll(r)
	if got := string(b); !strings.Contains(got, `"review"`) || !strings.Contains(got, `"catalog rejected"`) {
		t.Errorf("written to the pipe: %q", got)
	}
	if errOut.String() != "" {
		t.Errorf("zap's error output: %q", errOut.String())
	}
}
