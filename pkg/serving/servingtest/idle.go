// Package servingtest checks the connection bounds of a running server.
package servingtest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// ExpectIdleClose makes one keep-alive GET /healthz on a raw connection to addr
// and fails t unless the server then closes the idle connection within wait.
func ExpectIdleClose(t testing.TB, addr string, wait time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	if _, err := rd.ReadByte(); err != io.EOF {
		t.Errorf("idle connection to %s still open after %s (read: %v)", addr, wait, err)
	}
}
