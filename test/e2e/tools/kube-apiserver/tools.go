//go:build tools

// Package tools pins kube-apiserver and kube-controller-manager (the same
// Kubernetes release) for the end-to-end tests.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
