// Package certs creates the webhook's serving certificate: a private ECDSA
// P-256 CA and a leaf for the Service's DNS names, as files or as a
// kubernetes.io/tls Secret. A kept CA signs later leaves, so rotating the leaf
// never changes what the API server trusts; rotating the CA hands out a bundle
// of the new and the old CA for the switch.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// Options describe the certificate to issue.
type Options struct {
	Service, Namespace string
	DNSNames           []string
	IPs                []net.IP
	Validity           time.Duration
	// Now is the issue time; zero means time.Now (tests pin it).
	Now time.Time
}

// Bundle is PEM: the CA certificate, the serving chain and its key.
type Bundle struct {
	CA, Cert, Key []byte
}

// Names are the Service's in-cluster names plus the extra ones, in that order.
func (o Options) Names() []string {
	svc, ns := o.Service, o.Namespace
	names := []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}
	return append(names, o.DNSNames...)
}

// Generate issues a new CA and a serving certificate signed by it.
func Generate(o Options) (*Bundle, error) {
	ca, err := NewCA(o)
	if err != nil {
		return nil, err
	}
	return ca.Issue(o)
}

// Issue signs a new serving certificate for o's names with the CA. Its
// validity ends with the CA's at the latest; the bundle's CA is the CA's PEM
// plus any previous CA it still trusts (Trusted).
func (ca *CA) Issue(o Options) (*Bundle, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	notBefore, notAfter := o.window()
	if !notAfter.Before(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	if !notAfter.After(notBefore.Add(5 * time.Minute)) {
		return nil, fmt.Errorf("the CA %q expires %s: rotate the CA (--rotate-ca)", ca.Cert.Subject.CommonName, ca.Cert.NotAfter.Format(time.RFC3339))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	names := o.Names()
	leafTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: names[2]},
		DNSNames:     names,
		IPAddresses:  o.IPs,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &Bundle{
		CA:   append(append([]byte{}, ca.CertPEM...), ca.Trusted...),
		Cert: pemBlock("CERTIFICATE", leafDER),
		Key:  pemBlock("EC PRIVATE KEY", keyDER),
	}, nil
}

func (o Options) check() error {
	if o.Service == "" || o.Namespace == "" {
		return errors.New("service and namespace are required")
	}
	if o.Validity <= 0 {
		return errors.New("validity must be positive")
	}
	return nil
}

// window is o's validity, back-dated a little so a skewed API server clock
// accepts a new certificate at once.
func (o Options) window() (notBefore, notAfter time.Time) {
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	return now.Add(-5 * time.Minute), now.Add(o.Validity)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// WriteFiles writes ca.crt, tls.crt and tls.key (0600) into dir.
func (b *Bundle) WriteFiles(dir string) error {
	return writeFiles(dir, 0o755, []file{{"ca.crt", b.CA, 0o644}, {"tls.crt", b.Cert, 0o644}, {"tls.key", b.Key, 0o600}})
}

type file struct {
	name string
	data []byte
	mode os.FileMode
}

// writeFiles replaces each file atomically, so a reader polling the directory
// (the injector's certificate reloader) never sees half a file.
func writeFiles(dir string, dirMode os.FileMode, files []file) error {
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p+".tmp", f.data, f.mode); err != nil {
			return err
		}
		if err := os.Rename(p+".tmp", p); err != nil {
			return err
		}
	}
	return nil
}

// Secret renders a kubernetes.io/tls Secret holding the pair and ca.crt.
func (b *Bundle) Secret(name, namespace string) ([]byte, error) {
	if name == "" {
		return nil, fmt.Errorf("secret name is required")
	}
	secret := map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"type":       "kubernetes.io/tls",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		// []byte marshals as base64, which is the Secret's data encoding.
		"data": map[string][]byte{"ca.crt": b.CA, "tls.crt": b.Cert, "tls.key": b.Key},
	}
	return yaml.Marshal(secret)
}
