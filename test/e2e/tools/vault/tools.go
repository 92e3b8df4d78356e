//go:build tools

// Package tools pins the Vault server the helmfile plugin's tests authenticate
// against. Vault is BUSL-1.1: it is built for the tests only and never shipped
// (test/e2e/README.md).
package tools

import _ "github.com/hashicorp/vault"
