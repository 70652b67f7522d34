package harness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/jose"
)

// Signer signs JWTs with a key of its own. It uses the standard library
// only, so the tokens are made independently of the JWT library the
// sidecar verifies them with.
type Signer struct {
	// Kid is the key id written in the JWK and in token headers.
	Kid string
	// Alg is the algorithm published in the JWK and used by Token:
	// RS256, PS256 or ES256.
	Alg string

	key crypto.Signer
}

// NewRSASigner returns a signer with a fresh RSA key of the given size.
func NewRSASigner(t testing.TB, kid string, bits int, alg string) *Signer {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatalf("rsa key: %v", err)
	}
	return &Signer{Kid: kid, Alg: alg, key: k}
}

// NewECSigner returns an ES256 signer with a fresh P-256 key.
func NewECSigner(t testing.TB, kid string) *Signer {
	t.Helper()
	return &Signer{Kid: kid, Alg: "ES256", key: testkit.NewECKey(t)}
}

// WithKid returns a signer sharing this one's key under another kid.
func (s *Signer) WithKid(kid string) *Signer {
	return &Signer{Kid: kid, Alg: s.Alg, key: s.key}
}

// PublicJWK returns the public key as a JWK with kid, alg and use.
func (s *Signer) PublicJWK() map[string]any {
	var jwk map[string]any
	switch k := s.key.Public().(type) {
	case *rsa.PublicKey:
		jwk = jose.RSAJWK(s.Kid, k)
	case *ecdsa.PublicKey:
		jwk = jose.ECJWK(s.Kid, k)
	}
	jwk["alg"], jwk["use"] = s.Alg, "sig"
	return jwk
}

// Token signs claims with the signer's algorithm and kid.
func (s *Signer) Token(t testing.TB, claims map[string]any) string {
	t.Helper()
	return s.Sign(t, s.Alg, nil, claims)
}

// Sign signs claims with alg (which may differ from the JWK's, to test
// algorithm confusion). The header holds alg, typ "JWT" and kid; entries
// of header replace them, and a nil entry removes one.
func (s *Signer) Sign(t testing.TB, alg string, header, claims map[string]any) string {
	t.Helper()
	h := map[string]any{"alg": alg, "typ": "JWT", "kid": s.Kid}
	for k, v := range header {
		if v == nil {
			delete(h, k)
			continue
		}
		h[k] = v
	}
	switch alg {
	case "RS256", "PS256", "ES256":
	default:
		t.Fatalf("sign: unsupported alg %q", alg)
	}
	tok, err := jose.Sign(alg, Segment(t, h)+"."+Segment(t, claims), s.key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Public returns the public key.
func (s *Signer) Public() crypto.PublicKey { return s.key.Public() }

// PublicPEM returns the public key as a PEM "PUBLIC KEY" block, the
// secret of the classic RS256-to-HS256 confusion attack.
func (s *Signer) PublicPEM(t testing.TB) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(s.key.Public())
	if err != nil {
		t.Fatalf("marshal public key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// HS256Token returns a token with the given header and claims signed with
// HMAC-SHA256 under secret.
func HS256Token(t testing.TB, secret []byte, header, claims map[string]any) string {
	t.Helper()
	tok, err := jose.Sign("HS256", Segment(t, header)+"."+Segment(t, claims), secret)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// UnsignedToken returns a JWT with the given header and claims and an
// empty signature, as an "alg":"none" token has.
func UnsignedToken(t testing.TB, header, claims map[string]any) string {
	t.Helper()
	return Segment(t, header) + "." + Segment(t, claims) + "."
}

// Claims returns a valid claim set: sub, tenant_id, roles, email, iat and
// an exp five minutes ahead.
func Claims(sub, tenant string, roles ...string) map[string]any {
	now := time.Now()
	if roles == nil {
		roles = []string{}
	}
	return map[string]any{
		"sub":       sub,
		"tenant_id": tenant,
		"roles":     roles,
		"email":     sub + "@example.test",
		"iat":       now.Unix(),
		"exp":       now.Add(5 * time.Minute).Unix(),
	}
}

// Segment returns the base64url (unpadded) JSON encoding of a JWT header
// or claim set.
func Segment(t testing.TB, v map[string]any) string {
	t.Helper()
	return jose.Segment(v)
}

// JWKSServer serves a JWKS over plain http on 127.0.0.1, which the sidecar
// accepts for a loopback host.
type JWKSServer struct {
	// URL is the JWKS endpoint.
	URL string

	mu      sync.Mutex
	keys    []map[string]any
	gate    chan struct{} // non-nil while fetches are held
	held    chan struct{}
	fail    int // when non-zero, the status every fetch answers
	fetches atomic.Int64
}

// StartJWKS serves the public keys of signers until the test ends.
func StartJWKS(t testing.TB, signers ...*Signer) *JWKSServer {
	t.Helper()
	j := &JWKSServer{}
	j.Publish(signers...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/jwks.json" {
			http.NotFound(w, r)
			return
		}
		j.fetches.Add(1)
		j.mu.Lock()
		gate, held := j.gate, j.held
		j.mu.Unlock()
		if gate != nil {
			select {
			case held <- struct{}{}:
			default:
			}
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		j.mu.Lock()
		fail := j.fail
		body, err := json.Marshal(map[string]any{"keys": j.keys})
		j.mu.Unlock()
		if fail != 0 {
			http.Error(w, "identity provider unavailable", fail)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	j.URL = srv.URL + "/jwks.json"
	return j
}

// Publish replaces the served keys with the public keys of signers.
func (j *JWKSServer) Publish(signers ...*Signer) {
	keys := make([]map[string]any, 0, len(signers))
	for _, s := range signers {
		keys = append(keys, s.PublicJWK())
	}
	j.mu.Lock()
	j.keys = keys
	j.mu.Unlock()
}

// Fail makes every fetch answer status (an outage of the identity
// provider); 0 serves the keys again.
func (j *JWKSServer) Fail(status int) {
	j.mu.Lock()
	j.fail = status
	j.mu.Unlock()
}

// Hold makes fetches wait until release is called. Each fetch that waits
// is announced on held (buffered; announcements beyond its capacity are
// dropped).
func (j *JWKSServer) Hold() (held <-chan struct{}, release func()) {
	j.mu.Lock()
	defer j.mu.Unlock()
	gate := make(chan struct{})
	j.gate = gate
	j.held = make(chan struct{}, 16)
	var once sync.Once
	return j.held, func() {
		once.Do(func() {
			j.mu.Lock()
			j.gate = nil
			j.mu.Unlock()
			close(gate)
		})
	}
}

// Fetches returns how many times the JWKS was fetched.
func (j *JWKSServer) Fetches() int64 { return j.fetches.Load() }
