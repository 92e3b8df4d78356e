//go:build tools

// Package tools pins kube-apiserver for the end-to-end tests.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
