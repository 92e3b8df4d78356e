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
	"strings"
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

// A kept CA signs every later leaf: the caBundle never changes on a leaf
// rotation. A CA rotation hands out the new and the old CA together.
func TestCADirReuseAndRotation(t *testing.T) {
	dir := t.TempDir()
	o := Options{Service: "s", Namespace: "n", Validity: time.Hour}
	ca1, created, err := OpenCA(dir, o)
	if err != nil || !created {
		t.Fatalf("first OpenCA: %v created=%v", err, created)
	}
	if fi, err := os.Stat(filepath.Join(dir, caKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ca.key: %v %v", fi, err)
	}
	ca2, created, err := OpenCA(dir, o)
	if err != nil || created || string(ca2.CertPEM) != string(ca1.CertPEM) {
		t.Fatalf("second OpenCA made a new CA: %v created=%v", err, created)
	}
	b1, _ := ca1.Issue(o)
	b2, err := ca2.Issue(o)
	if err != nil || string(b1.CA) != string(b2.CA) || string(b1.Cert) == string(b2.Cert) {
		t.Fatalf("leaf rotation: CA changed or leaf did not (%v)", err)
	}
	verify(t, b2, b1.CA)

	ca3, err := Rotate(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	b3, err := ca3.Issue(o)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b3.CA), "BEGIN CERTIFICATE"); n != 2 || !strings.Contains(string(b3.CA), string(ca1.CertPEM)) {
		t.Errorf("rotated bundle holds %d CAs", n)
	}
	verify(t, b3, b3.CA)
	// Reloaded from disk, the rotated CA still hands out both.
	ca4, err := loadCA(dir)
	if err != nil || string(ca4.CertPEM) != string(ca3.CertPEM) || string(ca4.Trusted) != string(ca1.CertPEM) {
		t.Fatalf("reload after rotation: %v", err)
	}
	if _, err := Rotate(t.TempDir(), o); err == nil {
		t.Error("rotating a dir without a CA succeeded")
	}
}

// A leaf never outlives its CA.
func TestLeafEndsWithItsCA(t *testing.T) {
	now := time.Now()
	ca, err := NewCA(Options{Service: "s", Namespace: "n", Validity: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.Issue(Options{Service: "s", Namespace: "n", Validity: 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b.Cert)
	leaf, _ := x509.ParseCertificate(blk.Bytes)
	if leaf.NotAfter.After(ca.Cert.NotAfter) {
		t.Errorf("leaf ends %s after its CA %s", leaf.NotAfter, ca.Cert.NotAfter)
	}
	if _, err := ca.Issue(Options{Service: "s", Namespace: "n", Validity: time.Hour, Now: now.Add(2 * time.Hour)}); err == nil {
		t.Error("an expired CA issued a leaf")
	}
}

func verify(t *testing.T, b *Bundle, roots []byte) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	blk, _ := pem.Decode(b.Cert)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "s.n.svc"}); err != nil {
		t.Errorf("leaf does not verify: %v", err)
	}
}
