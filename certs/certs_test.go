package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

func TestGenerateServesTheServiceNames(t *testing.T) {
	now := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	b, err := Generate(Options{Service: "inj", Namespace: "ns", DNSNames: []string{"inj.example.com"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Validity: 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(b.Cert, b.Key); err != nil {
		t.Fatalf("pair: %v", err)
	}
	block, _ := pem.Decode(b.Cert)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"inj", "inj.ns", "inj.ns.svc", "inj.ns.svc.cluster.local", "inj.example.com"}
	if !reflect.DeepEqual(leaf.DNSNames, want) || !leaf.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1)) {
		t.Errorf("SANs %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b.CA)
	for _, name := range append(want, "127.0.0.1") {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: now.Add(time.Hour)}); err != nil {
			t.Errorf("verify %s: %v", name, err)
		}
	}
	if !leaf.NotAfter.Equal(now.Add(24 * time.Hour)) {
		t.Errorf("NotAfter %v", leaf.NotAfter)
	}
}

func TestWriteFilesAndSecret(t *testing.T) {
	b, err := Generate(Options{Service: "inj", Namespace: "ns", Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if err := b.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "tls.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("tls.key: %v %v", st, err)
	}
	y, err := b.Secret("inj-tls", "ns")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Type     string
		Metadata struct{ Name, Namespace string }
		Data     map[string]string
	}
	if err := yaml.Unmarshal(y, &s); err != nil {
		t.Fatal(err)
	}
	ca, _ := base64.StdEncoding.DecodeString(s.Data["ca.crt"])
	if s.Type != "kubernetes.io/tls" || s.Metadata.Name != "inj-tls" || s.Metadata.Namespace != "ns" || string(ca) != string(b.CA) || s.Data["tls.key"] == "" {
		t.Errorf("secret:\n%s", y)
	}
}

func TestGenerateRejectsMissingNames(t *testing.T) {
	if _, err := Generate(Options{Service: "x", Validity: time.Hour}); err == nil {
		t.Error("accepted a missing namespace")
	}
	if _, err := Generate(Options{Service: "x", Namespace: "y"}); err == nil {
		t.Error("accepted zero validity")
	}
}
