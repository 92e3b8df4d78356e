package injector

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	admissionv1 "k8s.io/api/admission/v1"
)

// h2Client speaks HTTP/2 to the test server, as kube-apiserver does when the
// webhook offers it.
func h2Client(ts *testServer) *http.Client {
	tr := ts.client.Transport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = true
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

func h2Review(t *testing.T, c *http.Client, ts *testServer, body []byte) (*admissionv1.AdmissionResponse, string) {
	t.Helper()
	resp, err := c.Post(ts.webhookURL+"/mutate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var r admissionv1.AdmissionReview
	if resp.StatusCode != 200 || json.Unmarshal(out, &r) != nil || r.Response == nil {
		t.Fatalf("%s %d: %s", resp.Proto, resp.StatusCode, out)
	}
	return r.Response, resp.Proto
}

// TestHTTP2Review: the webhook negotiates HTTP/2 and answers the same review
// as over HTTP/1.1.
func TestHTTP2Review(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	body := podReview("u2", "argocd", []byte(testPod), false)
	h2, proto := h2Review(t, h2Client(ts), ts, body)
	if proto != "HTTP/2.0" {
		t.Fatalf("negotiated %s, want HTTP/2.0", proto)
	}
	h1 := ts.review(t, body)
	if !h2.Allowed || !bytes.Equal(h2.Patch, h1.Patch) || h2.UID != "u2" {
		t.Errorf("HTTP/2 answer %+v differs from HTTP/1.1's %+v", h2, h1)
	}
}

// TestHTTP2RapidResetKeepsServing: a client that opens streams and cancels
// them at once, as fast as it can (CVE-2023-44487), must neither stop the
// server from answering others nor leave work running.
func TestHTTP2RapidResetKeepsServing(t *testing.T) {
	ts := startServer(t, "testdata/catalog.yaml")
	cfg := ts.client.Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.NextProtos = []string{"h2"}
	addr := strings.TrimPrefix(ts.webhookURL, "https://")
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if conn.ConnectionState().NegotiatedProtocol != "h2" {
		t.Fatalf("negotiated %q, want h2", conn.ConnectionState().NegotiatedProtocol)
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The server's frames are read and dropped so its writes never block.
	go func() { _, _ = io.Copy(io.Discard, conn) }()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", addr}, {":path", "/mutate"}, {"content-type", "application/json"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	const streams = 20000
	sent := 0
	for id := uint32(1); sent < streams; id += 2 {
		if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true}) != nil ||
			fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break // the server closed the connection: also a defence
		}
		sent++
	}
	t.Logf("%d streams opened and reset before the server ended the connection or the flood", sent)
	// Others are served at once, over HTTP/2 and HTTP/1.1.
	body := podReview("after", "argocd", []byte(testPod), false)
	start := time.Now()
	if r, _ := h2Review(t, h2Client(ts), ts, body); !r.Allowed || r.Patch == nil {
		t.Errorf("review after the flood: %+v", r)
	}
	if r := ts.review(t, body); !r.Allowed || r.Patch == nil {
		t.Errorf("HTTP/1.1 review after the flood: %+v", r)
	}
	t.Logf("reviews after the flood answered in %v", time.Since(start))
}
