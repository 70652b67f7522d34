// Package testkit holds the helpers that tests of several packages share,
// so that each is written once: servers on loopback ports (gRPC, a peer
// that never answers, a redirector, a request log), HTTP requests read
// to the end, outside programs run to their exit code, waits on a
// condition instead of fixed sleeps, the race-detector skip, the
// skip-or-fail rule for outside programs (a missing one fails the test
// under CI), testdata globs and the files tests write, the error check
// of a table case, a log buffer safe for concurrent writers, bundle and
// token signing keys, certificates, the live-heap check of a bounded
// cache.
// It imports nothing of this module, so any package's tests can use it.
// Its sub-packages hold larger pieces: jose (JWKs and signed JWTs),
// metrictest (recorded metrics), histtest (the otelhist tests'
// histogram), bundletest (policy bundles), policytest (the default
// policy set), tcpproxy, rawcodec and noopauthz.
package testkit

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"sync"
	"testing"
)

// SyncBuffer is a bytes.Buffer that a logger's goroutines may write to
// while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ECKeyPEM returns a fresh P-256 key pair as PEM: the private key ("EC
// PRIVATE KEY", to sign bundles) and the public key ("PUBLIC KEY", to
// verify them).
func ECKeyPEM(t testing.TB) (private, public []byte) {
	t.Helper()
	k := NewECKey(t)
	der, err := x509.MarshalECPrivateKey(k)
	return pemBlock(t, "EC PRIVATE KEY", der, err), PublicKeyPEM(t, &k.PublicKey)
}

// PublicKeyPEM is pub (an *ecdsa.PublicKey, *rsa.PublicKey or
// ed25519.PublicKey) as a "PUBLIC KEY" PEM block (PKIX).
func PublicKeyPEM(t testing.TB, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	return pemBlock(t, "PUBLIC KEY", der, err)
}

// PrivateKeyPEM is key (an *ecdsa.PrivateKey, *rsa.PrivateKey or
// ed25519.PrivateKey) as a "PRIVATE KEY" PEM block (PKCS #8).
func PrivateKeyPEM(t testing.TB, key any) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	return pemBlock(t, "PRIVATE KEY", der, err)
}

// pemBlock is der, as the marshalling that returned err made it, in a
// PEM block of type typ; the marshalling's error fails t.
func pemBlock(t testing.TB, typ string, der []byte, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// TokenKeyFile writes a fresh P-256 private key, PKCS #8 in a "PRIVATE
// KEY" PEM block, to a file in the test's temporary directory and returns
// its path: a token signing key (sdk.saml.token_signing_key_file).
func TokenKeyFile(t testing.TB) string {
	t.Helper()
	return TempFile(t, "token-key.pem", PrivateKeyPEM(t, NewECKey(t)))
}
