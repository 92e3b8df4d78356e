//go:build tools

// Package tools pins promtool for the observability tests.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
