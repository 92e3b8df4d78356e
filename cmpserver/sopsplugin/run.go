package sopsplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cmp-injector/cmp-injector/cmpserver/toolrun"
	"github.com/cmp-injector/cmp-injector/pkg/serving"
)

// generate prints the manifest files of dir as one YAML stream, decrypting
// those SOPS encrypted. The plaintext goes to stdout only: never to stderr
// (which the plugin server logs) nor into an error.
func generate(ctx context.Context, dir string, env []string, stdio serving.IO) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	files := manifestFiles(names)
	if len(files) == 0 {
		return fmt.Errorf("no manifest files (*.yaml, *.yml, *.json) in the app directory")
	}
	for i, name := range files {
		content, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if encrypted(content) {
			if content, err = decrypt(ctx, dir, name, env); err != nil {
				return err
			}
		}
		if i > 0 {
			content = append([]byte("---\n"), content...)
		}
		if len(content) > 0 && content[len(content)-1] != '\n' {
			content = append(content, '\n')
		}
		if _, err := stdio.Stdout.Write(content); err != nil {
			return err
		}
	}
	return nil
}

// decrypt runs sops on one file of dir. On failure the error is sops's own
// message (which names keys by their public recipient, never a secret) and
// its exit code is ours; sops's stderr on success is dropped, so nothing it
// prints there can reach the plugin server's log.
func decrypt(ctx context.Context, dir, name string, env []string) ([]byte, error) {
	f := format(name)
	// "./": a file name starting with "-" stays a file name.
	out, _, err := toolrun.Run(ctx, "sops", []string{"decrypt", "--input-type", f, "--output-type", f, "./" + name}, dir, env,
		func(msg string) string { return "sops could not decrypt " + name + ": " + msg })
	return out, err
}
