//go:build tools

// Package tools pins argocd-vault-plugin for its plugin's image and tests.
package tools

import _ "github.com/argoproj-labs/argocd-vault-plugin"
