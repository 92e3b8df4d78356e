//go:build tools

// Package tools pins Argo CD's multi-call binary for the end-to-end tests.
package tools

import _ "github.com/argoproj/argo-cd/v2/cmd"
