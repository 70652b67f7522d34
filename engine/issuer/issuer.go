// Package issuer signs the short-lived JWTs that svc itself issues (after
// a SAML sign-on) and is the key source that verifies them locally, so
// the engine trusts them without any HTTP round trip.
//
// Tokens are ES256 (EC P-256) with a kid, the RFC 7638 thumbprint of the
// public key. The first key of the signing key file signs; every key of
// the file verifies, so a key can be rotated by putting the new key first
// and keeping the old one after it for one token lifetime. Without a file
// a key is generated: its tokens die with the process.
package issuer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/reason"
)

// Options configures an Issuer.
type Options struct {
	// KeyFile is a PEM file of EC P-256 keys; the first must be private.
	// Empty: a key is generated.
	KeyFile string
	// Issuer is the iss claim, and the aud claim, of every token.
	Issuer string
	// TTL is the lifetime of a token.
	TTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Issuer signs tokens and verifies them. It is safe for concurrent use.
type Issuer struct {
	signer    *ecdsa.PrivateKey
	kid       string
	keys      map[string]jwks.Key
	order     []string
	iss       string
	ttl       time.Duration
	now       func() time.Time
	generated bool
}

// New loads (or generates) the keys.
func New(opts Options) (*Issuer, error) {
	if opts.Issuer == "" {
		return nil, errors.New("issuer: an issuer is required")
	}
	if opts.TTL <= 0 {
		return nil, errors.New("issuer: the token lifetime must be positive")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	is := &Issuer{keys: map[string]jwks.Key{}, iss: opts.Issuer, ttl: opts.TTL, now: opts.Now}
	var ks Keys
	if opts.KeyFile == "" {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("issuer: generate key: %w", err)
		}
		is.generated = true
		if ks, err = KeysOf(k, []*ecdsa.PublicKey{&k.PublicKey}); err != nil {
			return nil, err
		}
	} else {
		var err error
		if ks, err = ReadKeys(opts.KeyFile); err != nil {
			return nil, fmt.Errorf("issuer: %w", err)
		}
	}
	is.signer, is.kid = ks.Signer, ks.KeyID
	for _, k := range ks.Verify {
		is.keys[k.ID] = k
		is.order = append(is.order, k.ID)
	}
	return is, nil
}

// ParseKeys reads PEM blocks of EC P-256 keys: the first must be a private
// key (PKCS#8 or SEC 1) and signs; it and every further key (private, or
// a PKIX public key) verify.
func ParseKeys(data []byte) (*ecdsa.PrivateKey, []*ecdsa.PublicKey, error) {
	var (
		signer *ecdsa.PrivateKey
		pubs   []*ecdsa.PublicKey
	)
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		var key any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(b.Bytes)
		default:
			return nil, nil, fmt.Errorf("unexpected PEM block %q", b.Type)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("PEM block %q: %w", b.Type, err)
		}
		var pub *ecdsa.PublicKey
		switch k := key.(type) {
		case *ecdsa.PrivateKey:
			if signer == nil && len(pubs) == 0 {
				signer = k
			}
			pub = &k.PublicKey
		case *ecdsa.PublicKey:
			pub = k
		default:
			return nil, nil, fmt.Errorf("PEM block %q is not an EC key", b.Type)
		}
		if pub.Curve != elliptic.P256() {
			return nil, nil, errors.New("keys must be on the P-256 curve (ES256)")
		}
		pubs = append(pubs, pub)
	}
	if signer == nil {
		return nil, nil, errors.New("no EC private key first in the file")
	}
	return signer, pubs, nil
}

// Generated reports whether the signing key was generated at start (no
// key file): its tokens do not survive a restart nor reach other replicas.
func (is *Issuer) Generated() bool { return is.generated }

// KeyID is the kid of the signing key.
func (is *Issuer) KeyID() string { return is.kid }

// Issuer is the iss (and aud) of the tokens.
func (is *Issuer) Issuer() string { return is.iss }

// TTL is the lifetime of a token.
func (is *Issuer) TTL() time.Duration { return is.ttl }

// Key implements the engine's key source: it knows only its own kids.
func (is *Issuer) Key(_ context.Context, kid string) (jwks.Key, error) {
	if k, ok := is.keys[kid]; ok && kid != "" {
		return k, nil
	}
	return jwks.Key{}, reason.New(reason.UnknownKID, "kid is not one of the local signing keys")
}

// Issue signs a token carrying claims plus iss, aud, iat, nbf, exp and a
// random jti (claims may not override them). It returns the token and its
// expiry.
func (is *Issuer) Issue(claims map[string]any) (string, time.Time, error) {
	now := is.now().Truncate(time.Second)
	exp := now.Add(is.ttl)
	body := make(map[string]any, len(claims)+6)
	for k, v := range claims {
		body[k] = v
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("issuer: jti: %w", err)
	}
	body["iss"] = is.iss
	body["aud"] = is.iss
	body["iat"] = now.Unix()
	body["nbf"] = now.Unix()
	body["exp"] = exp.Unix()
	body["jti"] = base64.RawURLEncoding.EncodeToString(jti[:])
	payload, err := json.Marshal(body)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("issuer: encode claims: %w", err)
	}
	tok, err := Sign(is.signer, is.kid, payload)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("issuer: %w", err)
	}
	return tok, exp, nil
}

// JWKS returns the public keys as a JSON Web Key Set document.
func (is *Issuer) JWKS() ([]byte, error) {
	keys := make([]jwks.Key, len(is.order))
	for i, kid := range is.order {
		keys[i] = is.keys[kid]
	}
	b, err := KeySet(keys)
	if err != nil {
		return nil, fmt.Errorf("issuer: %w", err)
	}
	return b, nil
}
