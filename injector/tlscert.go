package injector

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// certReloader serves the newest valid key pair from two files. The server
// polls both with a serving.Poller (content fingerprints: Secrets mounted as
// volumes are replaced by a symlink swap, which file events miss) and calls
// Reload on each change, so each distinct error is reported once.
type certReloader struct {
	certFile, keyFile string
	onLoad            func(notAfter time.Time)
	onError           func(error)

	current  atomic.Pointer[tls.Certificate]
	mu       sync.Mutex
	lastCert []byte
	lastKey  []byte
}

// newCertReloader returns a reloader; nothing is read before the first Reload.
func newCertReloader(certFile, keyFile string, onLoad func(time.Time), onError func(error)) *certReloader {
	return &certReloader{certFile: certFile, keyFile: keyFile, onLoad: onLoad, onError: onError}
}

// Loaded reports whether a valid pair is in use.
func (r *certReloader) Loaded() bool { return r.current.Load() != nil }

// GetCertificate is the tls.Config hook.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := r.current.Load()
	if c == nil {
		return nil, errors.New("no serving certificate loaded")
	}
	return c, nil
}

// Reload reads both files and installs the pair if it changed and is valid.
func (r *certReloader) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	certPEM, err := os.ReadFile(r.certFile)
	if err != nil {
		return r.fail(err)
	}
	keyPEM, err := os.ReadFile(r.keyFile)
	if err != nil {
		return r.fail(err)
	}
	if bytes.Equal(certPEM, r.lastCert) && bytes.Equal(keyPEM, r.lastKey) {
		return nil
	}
	// A rotation writes two files; until both are new the pair does not match
	// and the old one stays in use.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return r.fail(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return r.fail(err)
	}
	pair.Leaf = leaf
	r.lastCert, r.lastKey = certPEM, keyPEM
	r.current.Store(&pair)
	if r.onLoad != nil {
		r.onLoad(leaf.NotAfter)
	}
	return nil
}

// fail reports err; the Poller calls Reload once per change or distinct
// error, so it is not repeated on every poll.
func (r *certReloader) fail(err error) error {
	if r.onError != nil {
		r.onError(err)
	}
	return err
}
