// Command pause is the pod sandbox of the end-to-end suite's real node (the
// image containerd's sandbox_image names): it holds the pod's namespaces, reaps
// the zombies a shared PID namespace hands it, and exits on SIGTERM or SIGINT.
// Built locally so that the node pulls nothing.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
