package sidecar

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/tlsfiles"
)

// certCheckInterval is how often, at most, a handshake looks whether the
// certificate files changed.
const certCheckInterval = time.Second

// certs serves the certificate and client CAs of sidecar.tls_cert_file,
// tls_key_file and tls_client_ca_file, reading the files again when
// their size or modification time changes (a renewed certificate, a
// rotated CA) and keeping the last good ones when the new files do not
// load.
type certs struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger

	mu      sync.Mutex
	checked time.Time
	stamp   string
	cert    *tls.Certificate
	pool    *x509.CertPool // nil without a client CA: no client certificate asked for
}

// newCerts loads the configured files; nil without TLS configured.
func newCerts(c config.Sidecar, log *slog.Logger) (*certs, error) {
	if c.TLSCertFile == "" {
		return nil, nil
	}
	r := &certs{certFile: c.TLSCertFile, keyFile: c.TLSKeyFile, caFile: c.TLSClientCAFile, log: log}
	stamp, err := r.fileStamp()
	if err != nil {
		return nil, err
	}
	if err := r.load(stamp); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certs) files() []string {
	f := []string{r.certFile, r.keyFile}
	if r.caFile != "" {
		f = append(f, r.caFile)
	}
	return f
}

func (r *certs) fileStamp() (string, error) {
	var b strings.Builder
	for _, f := range r.files() {
		st, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("tls: %w", err)
		}
		fmt.Fprintf(&b, "%s:%d:%d;", f, st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

// load reads the files; the caller holds mu or owns r.
func (r *certs) load(stamp string) error {
	cert, pool, err := tlsfiles.Load(r.certFile, r.keyFile, r.caFile)
	if err != nil {
		return err
	}
	r.cert, r.pool, r.stamp = cert, pool, stamp
	return nil
}

// current returns the certificate and client CAs, reloading them first
// when the files changed.
func (r *certs) current() (*tls.Certificate, *x509.CertPool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) >= certCheckInterval {
		r.checked = time.Now()
		stamp, err := r.fileStamp()
		if err == nil && stamp != r.stamp {
			err = r.load(stamp)
			if err == nil {
				r.log.Info("TLS certificate files reloaded")
			}
		}
		if err != nil {
			r.log.Error("TLS certificate files not reloaded; the loaded ones stay", "err", err)
		}
	}
	return r.cert, r.pool
}

// config returns a server TLS configuration that offers the protocols
// nextProtos (ALPN) and picks up reloaded files on every handshake.
func (r *certs) config(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := r.current()
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   nextProtos,
				Certificates: []tls.Certificate{*cert},
			}
			if pool != nil {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = pool
			}
			return c, nil
		},
	}
}
