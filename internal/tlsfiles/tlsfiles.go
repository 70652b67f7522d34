// Package tlsfiles reads the sidecar's TLS files: its certificate and key,
// and the client CAs it requires certificates of. The sidecar loads them
// with it at start and on every change, and `core config validate` checks
// them with it, so that both read the files one way.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Load reads the certificate and key (PEM) and, when caFile is not empty,
// the client CA certificates. Errors name the setting of the file.
func Load(certFile, keyFile, caFile string) (*tls.Certificate, *x509.CertPool, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("sidecar.tls_cert_file / tls_key_file: %w", err)
	}
	var pool *x509.CertPool
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, nil, fmt.Errorf("sidecar.tls_client_ca_file: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, errors.New("sidecar.tls_client_ca_file: no PEM certificate in it")
		}
	}
	return &cert, pool, nil
}
