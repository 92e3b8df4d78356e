//go:build tools

// Package tools pins kube-apiserver 1.32 for the end-to-end tests.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
