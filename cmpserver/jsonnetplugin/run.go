package jsonnetplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// generate runs jsonnet with argv in dir and env and prints each manifest of
// its result as one JSON line. jsonnet's stderr on success (std.trace) is
// passed on; when it fails, its message is the error text the user reads and
// its exit code is ours.
func generate(ctx context.Context, argv []string, dir string, env []string, stdio serving.IO) error {
	out, stderr, err := toolrun.Run(ctx, "jsonnet", argv, dir, env, func(msg string) string { return msg })
	if err != nil {
		return err
	}
	if msg := bytes.TrimSpace(stderr); len(msg) > 0 {
		fmt.Fprintf(stdio.Stderr, "%s\n", msg)
	}
	docs, err := manifests(out)
	if err != nil {
		return err
	}
	for _, d := range docs {
		var line bytes.Buffer
		if err := json.Compact(&line, d); err != nil {
			return err
		}
		line.WriteByte('\n')
		if _, err := stdio.Stdout.Write(line.Bytes()); err != nil {
			return err
		}
	}
	return nil
}
