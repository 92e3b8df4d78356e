package sopsplugin

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"path"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// manifestFiles are the names among a directory's regular files that the
// plugin prints, in name order: YAML and JSON files, not dot files (SOPS's own
// .sops.yaml is configuration, not a manifest).
func manifestFiles(names []string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, ".") {
			continue
		}
		switch strings.ToLower(path.Ext(n)) {
		case ".yaml", ".yml", ".json":
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// format is the --input-type and --output-type sops is given for a file.
func format(name string) string {
	if strings.EqualFold(path.Ext(name), ".json") {
		return "json"
	}
	return "yaml"
}

// encrypted reports whether a file holds a document SOPS encrypted: a
// top-level sops key whose value is a map with a mac, SOPS's metadata. A file
// that does not parse is not encrypted: it is printed as it is, and the
// repo-server's parse error names it.
func encrypted(content []byte) bool {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(bytes.NewReader(content)), 4096)
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) || err != nil {
			return false
		}
		if meta, ok := doc["sops"].(map[string]any); ok {
			if _, ok := meta["mac"]; ok {
				return true
			}
		}
	}
}
