//go:build tools

// Package tools pins helmfile for the helmfile plugin's image and tests.
package tools

import _ "github.com/helmfile/helmfile"
