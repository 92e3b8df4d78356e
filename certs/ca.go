package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CA signs serving certificates.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
	KeyPEM  []byte
	// Trusted is the PEM of earlier CAs that clients should still trust while
	// a CA rotation rolls out (ca-previous.crt in a CA dir).
	Trusted []byte
}

// Files of a CA dir.
const (
	caCertFile     = "ca.crt"
	caKeyFile      = "ca.key"
	caPreviousFile = "ca-previous.crt"
)

// NewCA makes a self-signed CA for o's Service, valid for o.Validity.
func NewCA(o Options) (*CA, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	notBefore, notAfter := o.window()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "cmp-injector CA " + o.Service + "." + o.Namespace},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemBlock("CERTIFICATE", der), KeyPEM: pemBlock("EC PRIVATE KEY", keyDER)}, nil
}

// loadCA reads ca.crt, ca.key and, if present, ca-previous.crt from dir.
func loadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("%s: %s and %s must be PEM", dir, caCertFile, caKeyFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, caCertFile), err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, caKeyFile), err)
	}
	if !cert.IsCA || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, fmt.Errorf("%s: %s is not a CA certificate for %s", dir, caCertFile, caKeyFile)
	}
	ca := &CA{Cert: cert, Key: key, CertPEM: certPEM, KeyPEM: keyPEM}
	if prev, err := os.ReadFile(filepath.Join(dir, caPreviousFile)); err == nil {
		ca.Trusted = prev
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return ca, nil
}

// Rotate replaces the CA kept in dir with a new one for o, keeping the old
// certificate as ca-previous.crt so bundles issued next trust both.
func Rotate(dir string, o Options) (*CA, error) {
	old, err := loadCA(dir)
	if err != nil {
		return nil, fmt.Errorf("no CA to rotate in %s: %w", dir, err)
	}
	ca, err := NewCA(o)
	if err != nil {
		return nil, err
	}
	ca.Trusted = old.CertPEM
	if err := ca.WriteFiles(dir); err != nil {
		return nil, err
	}
	return ca, nil
}

// WriteFiles keeps the CA in dir: ca.crt, ca.key (0600) and, during a
// rotation, ca-previous.crt. Each file is replaced atomically.
func (ca *CA) WriteFiles(dir string) error {
	files := []file{{caCertFile, ca.CertPEM, 0o644}, {caKeyFile, ca.KeyPEM, 0o600}}
	if len(ca.Trusted) > 0 {
		files = append(files, file{caPreviousFile, ca.Trusted, 0o644})
	}
	return writeFiles(dir, 0o700, files)
}

// OpenCA loads the CA kept in dir, or makes one there when dir holds none.
func OpenCA(dir string, o Options) (ca *CA, created bool, err error) {
	ca, err = loadCA(dir)
	if err == nil {
		return ca, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if ca, err = NewCA(o); err != nil {
		return nil, false, err
	}
	if err := ca.WriteFiles(dir); err != nil {
		return nil, false, err
	}
	return ca, true, nil
}
