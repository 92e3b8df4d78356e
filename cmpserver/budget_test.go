package cmpserver

import (
	"fmt"
	"strings"
	"testing"
)

const catPlugin = `kind: ConfigManagementPlugin
metadata: {name: cat}
spec:
  generate:
    command: [cat, out.yaml]
`

// TestManyKeysRefusedOverTheWire: a plugin printing one document of more
// tokens than manifests' budget gets the budget's message as the request's
// error, which Argo CD shows in the Application's condition (issue 37 item
// 7: 4,000,000 keys peaked at 2.11 GB in the sidecar).
func TestManyKeysRefusedOverTheWire(t *testing.T) {
	t.Parallel()
	ts := startServer(t, catPlugin, nil)
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: many\ndata:\n")
	for i := range 300_000 {
		fmt.Fprintf(&b, "  k%07d: v\n", i)
	}
	tgz := craftTgz(t, dir("."), file("out.yaml", b.String()))
	_, err := sendTgz(t, ts.dial(t), ".", tgz)
	t.Logf("the client gets: %v", err)
	wantErr(t, err, "failed to unmarshal manifest: YAML document 1 (bytes 0 to 4200060 of the output) has more than 500000 keys, values and items: cmp-server does not decode it")
}
