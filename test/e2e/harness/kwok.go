package harness

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// SimulatedNode is a Node that kwok (bin/kwok, the Kubernetes SIG's node
// simulator, built by hack/tools.sh from the Go module proxy) keeps Ready:
// the pods bound to it (spec.nodeName; no scheduler runs here) are marked
// Running and Ready without running anything, so the Deployment controller
// counts them available and Argo CD finds their Deployment Healthy. kwok
// manages this node only; every other pod of the suite is left alone.
type SimulatedNode struct {
	Name string
	c    *Client
	proc *Process
}

// StartSimulatedNode creates Node name and runs kwok for it with the admin
// kubeconfig until the Node reports Ready.
func StartSimulatedNode(c *Client, kubeconfig, name, dir string, logTo io.Writer) (*SimulatedNode, error) {
	bin, err := Tool("kwok")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	node := map[string]any{"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": name, "annotations": map[string]any{"kwok.x-k8s.io/node": "fake"}}}
	if err := c.Apply("/api/v1/nodes", name, node); err != nil {
		return nil, fmt.Errorf("create Node %s: %w", name, err)
	}
	n := &SimulatedNode{Name: name, c: c}
	port, err := FreePort()
	if err != nil {
		n.Stop()
		return nil, err
	}
	stages, err := kwokStages()
	if err != nil {
		n.Stop()
		return nil, err
	}
	n.proc, err = Start("kwok", []string{bin, "--kubeconfig", kubeconfig, "--manage-single-node", name, "--config", strings.Join(stages, ","),
		"--server-address", "127.0.0.1:" + strconv.Itoa(port), "--node-ip", "127.0.0.1", "--cidr", "10.244.0.0/24"}, nil, dir, logTo)
	if err != nil {
		n.Stop()
		return nil, err
	}
	err = Eventually(60*time.Second, 200*time.Millisecond, func() (bool, error) {
		if done, werr := n.proc.Exited(); done {
			return false, Final(fmt.Errorf("kwok exited: %w\n%s", werr, tail(n.proc.Output(), 4000)))
		}
		var got corev1.Node
		if err := c.Get("/api/v1/nodes/"+name, &got); err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, errors.New("Node " + name + " is not Ready yet")
	})
	if err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

// kwokStages are the Stage files of kwok's module that kwokctl gives kwok
// by default: a node made Ready at once and kept so, and pods made Ready at
// once, completed and deleted.
func kwokStages() ([]string, error) {
	src, err := toolSource("kwok", "sigs.k8s.io/kwok")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range []string{"node/fast/node-initialize.yaml", "node/heartbeat/node-heartbeat.yaml",
		"pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml"} {
		p := filepath.Join(src, "kustomize", "stage", f)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("kwok's stage %s: %w", f, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// Stop ends kwok and deletes the Node.
func (n *SimulatedNode) Stop() {
	if n.proc != nil {
		_ = n.proc.Stop(10 * time.Second)
	}
	_ = n.c.Delete("/api/v1/nodes/" + n.Name)
}
