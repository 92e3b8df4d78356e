package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cmp-injector/cmp-injector/hack/images/oci"
)

// cdk8sModules is where the cdk8s image holds cdk8s-cli and the libraries
// an app requires.
const cdk8sModules = "usr/local/lib/cdk8s/node_modules"

// cdk8sRootfs is Node.js from Debian and cdk8s from npm.
var cdk8sRootfs = rootfsSpec{
	Name:    "cdk8s",
	Dir:     "deploy/plugins/cdk8s",
	Modules: cdk8sModules,
	Scripts: cdk8sScripts,
	// nodejs MIT; glibc LGPL; OpenSSL Apache-2.0; ICU; libstdc++ and
	// libgcc GPL with the runtime exception; zlib; brotli, c-ares, libuv
	// and nghttp2 MIT; dash BSD. Each package's copyright file is in
	// /usr/share/doc.
	DebianLicenses: []string{"MIT", "LGPL-2.1-or-later", "Apache-2.0", "ICU", "GPL-3.0-or-later WITH GCC-exception-3.1", "Zlib", "BSD-3-Clause"},
}

// cdk8sScripts are /usr/local/bin/cdk8s, /usr/local/bin/npx and /bin/sh.
//
// cdk8s: cdk8s-cli on Debian's Node.js. An app's require() finds the
// image's libraries through NODE_PATH, so a repository need not commit
// node_modules. TypeScript resolves types from the app's own node_modules
// only, never NODE_PATH, so ts-node type-checks nothing
// (TS_NODE_TRANSPILE_ONLY): rendering is not the place for type errors,
// the app's CI is.
//
// npx: `cdk8s init typescript-app` writes `app: npx ts-node main.ts`; npx
// here runs the commands of the image's packages and never downloads one,
// so a missing package is an error that names it rather than a hang on a
// registry the sidecar cannot reach.
//
// /bin/sh: cdk8s synth runs the app command through a shell (dash ships
// /bin/dash; the link is made by its maintainer script, never run here).
func cdk8sScripts(bins map[string]string) []oci.Entry {
	node := "/usr/bin/node"
	// env is what both scripts set, so that `npx cdk8s` runs as cdk8s does.
	env := fmt.Sprintf(`export NODE_PATH="${NODE_PATH:-/%s}"
export CDK8S_CHECK_UPGRADE="${CDK8S_CHECK_UPGRADE:-false}"
export TS_NODE_TRANSPILE_ONLY="${TS_NODE_TRANSPILE_ONLY:-true}"
`, cdk8sModules)
	cdk8s := fmt.Sprintf(`#!/bin/sh
# cdk8s-cli on Debian's Node.js (cmp-injector's cmp-cdk8s image)
%[3]sexec %[2]s /%[1]s/cdk8s-cli/bin/cdk8s "$@"
`, cdk8sModules, node, env)
	names := make([]string, 0, len(bins))
	for n := range bins {
		names = append(names, n)
	}
	slices.Sort(names)
	var cases strings.Builder
	for _, n := range names {
		fmt.Fprintf(&cases, "%s) shift; exec %s /%s \"$@\" ;;\n", n, node, bins[n])
	}
	npx := fmt.Sprintf(`#!/bin/sh
# npx for the packages this image holds under /%[1]s: it runs their
# commands and never downloads one.
%[4]swhile [ $# -gt 0 ]; do
  case "$1" in
  -y|--yes|--no|--no-install|--offline|--prefer-offline|-q|--quiet) shift ;;
  *) break ;;
  esac
done
case "$1" in
%[2]s*) echo "npx: \"$1\" is not a command of this image's packages (/%[1]s) and nothing is downloaded here: use one of %[3]s, or build an image with the package" >&2; exit 127 ;;
esac
`, cdk8sModules, cases.String(), strings.Join(names, ", "), env)
	return []oci.Entry{
		{Path: "usr/local/bin/cdk8s", Mode: 0o755, Data: []byte(cdk8s)},
		{Path: "usr/local/bin/npx", Mode: 0o755, Data: []byte(npx)},
		{Path: "bin/sh", Link: "dash"},
	}
}
