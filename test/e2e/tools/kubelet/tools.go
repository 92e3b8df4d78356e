//go:build tools

// Package tools pins the kubelet of the real node (make e2e-node). It stays
// behind the pinned kube-apiserver on purpose: the node runs Debian's
// containerd 1.6, and Kubernetes has deprecated containerd 1.x with its removal
// planned for 1.37 (deferred from 1.36 by kubernetes/kubernetes#136846). A
// kubelet up to three minors older than its API server is a supported skew.
package tools

import _ "k8s.io/kubernetes/cmd/kubelet"
