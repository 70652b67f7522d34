// Package tlsfiles reads the sidecar's TLS files: its certificate and key,
// and the client CAs it requires certificates of. The sidecar loads them
// with it at start and on every change, and `core config validate` checks
// them with it, so that both read the files one way.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
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
		if pool, err = CAPool("sidecar.tls_client_ca_file", caFile); err != nil {
			return nil, nil, err
		}
	}
	return &cert, pool, nil
}

// FileError is the error of a file that cannot be used; it names the
// setting that names the file.
type FileError struct {
	Key string
	Err error
}

func (e *FileError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// CAPool is the pool of the PEM certificates in the file at path, which
// setting key names; errors are *FileError.
func CAPool(key, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, &FileError{key, err}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, &FileError{key, fmt.Errorf("%s holds no PEM certificate", path)}
	}
	return pool, nil
}
