//go:build tools

// Package tools pins ytt for its plugin's image and tests.
package tools

import _ "carvel.dev/ytt/cmd/ytt"
