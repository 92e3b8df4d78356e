package harness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports handed to servers come from below the kernel's ephemeral range. A port
// the kernel picks for 127.0.0.1:0 is an ephemeral one, and between FreePort
// closing it and the server binding it, any outgoing connection on the machine
// (a client of the apiserver, of etcd, of the repo-server) may take it as its
// local port: CI saw argocd-repo-server fail with "bind: address already in
// use" that way. Outgoing connections never take a port below the range.
const lowestPort = 10000

var ports = struct {
	sync.Mutex
	lo, hi, next int
	given        map[int]bool
}{}

// FreePort returns an unused loopback TCP port below the ephemeral range,
// never the same one twice in a process. The start is random so that test
// binaries running side by side walk different stretches of the range.
func FreePort() (int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.lo, ports.hi = lowestPort, ephemeralStart()
		if ports.hi-ports.lo < 1000 {
			// The range starts too low to leave room: fall back to the
			// kernel's choice.
			return kernelPort()
		}
		ports.next = ports.lo + rand.IntN(ports.hi-ports.lo)
		ports.given = map[int]bool{}
	}
	for tries := 0; tries < ports.hi-ports.lo; tries++ {
		p := ports.next
		ports.next++
		if ports.next >= ports.hi {
			ports.next = ports.lo
		}
		if ports.given[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		ports.given[p] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d", ports.lo, ports.hi-1)
}

// ephemeralStart reads the first port of the kernel's ephemeral range, or
// Linux's default when it cannot.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}

func kernelPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("listener without a TCP address")
	}
	return addr.Port, nil
}
