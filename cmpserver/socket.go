package cmpserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// socket is the unix socket the plugin is served on: moved when a reload
// renames the plugin, closed for good at shutdown.
type socket struct {
	// serve serves gRPC on a listener until it is closed.
	serve func(net.Listener) error
	// served receives serve's error for the current listener, once.
	served chan error

	mu       sync.Mutex
	lis      net.Listener
	path     string
	stopping bool
}

func newSocket(serve func(net.Listener) error) *socket {
	return &socket{serve: serve, served: make(chan error, 1)}
}

// listening says whether the socket has been listened on (a server that
// Serve has not started yet has none to move).
func (k *socket) listening() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lis != nil
}

// listen serves gRPC on a new socket at path and makes it the current one; the
// previous socket, if any, is removed and its listener closed. Connections
// already accepted on it are the gRPC server's and keep being served, so a
// request in flight while the socket moves finishes.
func (k *socket) listen(path string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopping {
		return errors.New("server is stopping")
	}
	if path == k.path {
		return nil
	}
	if err := removeStaleSocket(path); err != nil {
		return err
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("error listening on %s: %w", path, err)
	}
	go func() {
		err := k.serve(lis)
		k.mu.Lock()
		current := k.lis == lis
		k.mu.Unlock()
		// A listener closed because the socket moved is not the end of serving.
		if current {
			select {
			case k.served <- err:
			default:
			}
		}
	}()
	// The new socket exists before the old one goes: the repo-server always
	// finds one (Argo CD takes the first socket whose plugin matches).
	old, oldPath := k.lis, k.path
	k.lis, k.path = lis, path
	if old != nil {
		_ = os.Remove(oldPath)
		_ = old.Close()
	}
	return nil
}

// removeStaleSocket removes what a server that is gone left at path (a
// killed container's socket), so that it can be created again. A socket that
// still accepts a connection is another live server's (two sidecars given the
// same plugin name and version, a second cmp-server in the container):
// unlinking it would silently take that server's traffic, so that is an error.
func removeStaleSocket(path string) error {
	if err := checkSocketFree(path); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("error removing stale socket: %w", err)
	}
	return nil
}

// checkSocketFree fails if a server accepts connections on path.
func checkSocketFree(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		conn.Close()
		return fmt.Errorf("socket %s is in use: another plugin server answers on it (not taking it over; stop that server, or give this plugin another metadata.name or spec.version)", path)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, os.ErrNotExist):
		// Nobody listens (or it went meanwhile): stale.
	default:
		// E.g. EAGAIN: a live server whose backlog is full.
		return fmt.Errorf("socket %s exists and may be in use (not taking it over): %w", path, err)
	}
	return nil
}

// close removes the socket file and stops accepting on it for good.
func (k *socket) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopping = true
	if k.path != "" {
		_ = os.Remove(k.path)
	}
}
