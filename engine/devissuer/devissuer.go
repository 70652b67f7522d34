// Package devissuer is the local development issuer: an RS256 key pair
// kept in a directory of the user's, which `core dev token` signs with
// and svc-sidecar in development mode verifies with, so that a newcomer
// gets a real token, and an allowed request, without an identity
// provider. Its tokens carry iss "svc-dev"; it is never trusted outside
// development mode.
//
// The key pair lives in <dir>/key.pem (PKCS#8, mode 0600, the directory
// 0700). Whichever program runs first creates it; creation is atomic, so
// two programs starting at once agree on one key.
package devissuer

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/reason"
)

const (
	// Issuer is the iss of every development token.
	Issuer = "svc-dev"
	// EnvDir names the directory of the key pair, for svc-sidecar and
	// core alike (core's --dir wins over it).
	EnvDir = "SVC_DEV_ISSUER_DIR"
	// KeyFile is the key pair's file in the directory.
	KeyFile = "key.pem"
	// keyBits is the RSA modulus size: the least the engine accepts.
	keyBits = 2048
	// MaxTTL bounds a development token's lifetime.
	MaxTTL = 30 * 24 * time.Hour
)

// DefaultDir is the directory of the key pair when neither --dir nor
// SVC_DEV_ISSUER_DIR names one: svc/dev-issuer in the user's
// configuration directory (~/.config/svc/dev-issuer on Linux).
func DefaultDir() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "svc", "dev-issuer")
	}
	return ".svc-dev-issuer"
}

// Dir is the directory named by dir, else by SVC_DEV_ISSUER_DIR read
// through getenv, else DefaultDir.
func Dir(dir string, getenv func(string) string) string {
	if dir != "" {
		return dir
	}
	if getenv != nil {
		if d := getenv(EnvDir); d != "" {
			return d
		}
	}
	return DefaultDir()
}

// DevIssuer signs and verifies development tokens. It is safe for
// concurrent use.
type DevIssuer struct {
	key *rsa.PrivateKey
	pub jwks.Key
	dir string
}

// Open loads the key pair in dir, creating it when the directory has
// none; created reports whether this call created it.
func Open(dir string) (d *DevIssuer, created bool, err error) {
	path := filepath.Join(dir, KeyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if created, err = create(dir, path); err != nil {
			return nil, false, err
		}
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("development issuer key %s: %w", path, err)
	}
	key, err := parseKey(data)
	if err != nil {
		return nil, false, fmt.Errorf("development issuer key %s: %w", path, err)
	}
	pub, err := verificationKey(&key.PublicKey)
	if err != nil {
		return nil, false, err
	}
	return &DevIssuer{key: key, pub: pub, dir: dir}, created, nil
}

// create writes a new key pair to path unless another program got there
// first: the key is written to a temporary file, then linked to path,
// which fails when path exists.
func create(dir, path string) (bool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("development issuer directory: %w", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return false, fmt.Errorf("development issuer: generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return false, fmt.Errorf("development issuer: encode key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".key-*.pem")
	if err != nil {
		return false, fmt.Errorf("development issuer: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := pem.Encode(tmp, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		tmp.Close()
		return false, fmt.Errorf("development issuer: write key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, fmt.Errorf("development issuer: write key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("development issuer: write key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil // another program created it first
		}
		return false, fmt.Errorf("development issuer: %w", err)
	}
	return true, nil
}

func parseKey(data []byte) (*rsa.PrivateKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM \"PRIVATE KEY\" block")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an RSA key")
	}
	if key.N.BitLen() < keyBits {
		return nil, fmt.Errorf("an RSA key of %d bits; at least %d are required", key.N.BitLen(), keyBits)
	}
	return key, nil
}

func verificationKey(pub *rsa.PublicKey) (jwks.Key, error) {
	k, err := jwks.LocalKey(pub, jwa.RS256())
	if err != nil {
		return jwks.Key{}, fmt.Errorf("development issuer: %w", err)
	}
	return k, nil
}

// Dir is the directory of the key pair.
func (d *DevIssuer) Dir() string { return d.dir }

// KeyID is the kid of the key.
func (d *DevIssuer) KeyID() string { return d.pub.ID }

// Key is the engine's key source: it knows only its own kid.
func (d *DevIssuer) Key(_ context.Context, kid string) (jwks.Key, error) {
	if kid != "" && kid == d.pub.ID {
		return d.pub, nil
	}
	return jwks.Key{}, reason.New(reason.UnknownKID, "kid is not the development issuer's key")
}

// JWKS returns the public key as a JSON Web Key Set document, for a
// second sidecar that verifies development tokens through sdk.jwks_url.
func (d *DevIssuer) JWKS() ([]byte, error) {
	set := jwk.NewSet()
	if err := set.AddKey(d.pub.JWK); err != nil {
		return nil, fmt.Errorf("development issuer: jwks: %w", err)
	}
	return json.Marshal(set)
}

// Token is what a development token says of its user.
type Token struct {
	Subject string
	Tenant  string
	Roles   []string
	// Email is optional.
	Email string
	TTL   time.Duration
}

// Sign returns an RS256 token for t, issued now: iss svc-dev, sub,
// tenant_id, roles, iat, nbf, exp and a random jti.
func (d *DevIssuer) Sign(t Token, now time.Time) (string, error) {
	if t.Subject == "" || t.Tenant == "" {
		return "", errors.New("a subject and a tenant are required")
	}
	if t.TTL <= 0 || t.TTL > MaxTTL {
		return "", fmt.Errorf("the lifetime must be positive and at most %s", MaxTTL)
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", fmt.Errorf("jti: %w", err)
	}
	roles := t.Roles
	if roles == nil {
		roles = []string{}
	}
	now = now.Truncate(time.Second)
	claims := map[string]any{
		"iss": Issuer, "sub": t.Subject, "tenant_id": t.Tenant, "roles": roles,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(t.TTL).Unix(),
		"jti": base64.RawURLEncoding.EncodeToString(jti[:]),
	}
	if t.Email != "" {
		claims["email"] = t.Email
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("encode claims: %w", err)
	}
	h := jws.NewHeaders()
	if err := h.Set(jws.KeyIDKey, d.pub.ID); err != nil {
		return "", err
	}
	if err := h.Set(jws.TypeKey, "JWT"); err != nil {
		return "", err
	}
	tok, err := jws.Sign(payload, jws.WithKey(jwa.RS256(), d.key, jws.WithProtectedHeaders(h)))
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return string(tok), nil
}

// maxPeek bounds the tokens IssuedBy reads: the engine's own bound.
const maxPeek = 32 << 10

// IssuedBy reports whether raw is a compact JWS whose payload, unverified,
// names Issuer as iss: such a token is verified for real in development
// mode, every other bearer is anonymous. Anyone can write any iss; what
// this decides is only which check a token gets, never that it passes.
func IssuedBy(raw string) bool {
	if len(raw) > maxPeek {
		return false
	}
	_, rest, ok := strings.Cut(raw, ".")
	if !ok {
		return false
	}
	payload, _, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return false
	}
	var c struct {
		Iss string `json:"iss"`
	}
	return json.Unmarshal(b, &c) == nil && c.Iss == Issuer
}
