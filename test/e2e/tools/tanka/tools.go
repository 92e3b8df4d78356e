//go:build tools

// Package tools pins Tanka's tk for its plugin's image and tests.
package tools

import _ "github.com/grafana/tanka/cmd/tk"
