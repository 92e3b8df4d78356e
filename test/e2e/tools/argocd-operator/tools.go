//go:build tools

// Package tools pins argocd-operator's manager for the end-to-end tests.
package tools

import _ "github.com/argoproj-labs/argocd-operator/cmd"
