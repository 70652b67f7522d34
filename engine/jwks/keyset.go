package jwks

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/svc-dev/svc/reason"
)

// MinRSABits is the smallest RSA modulus accepted.
const MinRSABits = 2048

var (
	rs256 = jwa.RS256()
	ps256 = jwa.PS256()
	es256 = jwa.ES256()

	// Both RSA algorithms are allowed on an RSA key that names no alg:
	// the key's material fits either and RFC 7517 leaves the choice open.
	rsaAlgs = []jwa.SignatureAlgorithm{rs256, ps256}
	ecAlgs  = []jwa.SignatureAlgorithm{es256}
)

// allowedAlg maps the name of an allowed signature algorithm to its value.
func allowedAlg(name string) (jwa.SignatureAlgorithm, bool) {
	switch name {
	case "RS256":
		return rs256, true
	case "PS256":
		return ps256, true
	case "ES256":
		return es256, true
	}
	return jwa.SignatureAlgorithm{}, false
}

// rejection records why a key of the set is not usable, so that a token
// naming it gets that reason rather than unknown-kid.
type rejection struct {
	code reason.Code
	why  string
}

// keySet is one loaded JWKS, immutable once built.
type keySet struct {
	keys     map[string]*Key
	rejected map[string]rejection
	// only is the set's single usable key, nil unless there is exactly one.
	only *Key
	// nrejected counts the entries that failed validation.
	nrejected int
	fetched   time.Time
}

// lookup finds kid in the set. found is false when the set knows nothing
// of kid; err is set when it knows the kid was rejected.
func (s *keySet) lookup(kid string) (k Key, found bool, err error) {
	if kid == "" {
		if s.only != nil {
			return *s.only, true, nil
		}
		return Key{}, false, nil
	}
	if p, ok := s.keys[kid]; ok {
		return *p, true, nil
	}
	if r, ok := s.rejected[kid]; ok {
		return Key{}, true, reason.New(r.code, "key rejected: %s", r.why)
	}
	return Key{}, false, nil
}

// sameKeys reports whether s and o hold the same kids with the same
// thumbprints.
func (s *keySet) sameKeys(o *keySet) bool {
	if s == nil || o == nil || len(s.keys) != len(o.keys) {
		return false
	}
	for kid, k := range s.keys {
		ok, found := o.keys[kid]
		if !found || ok.Thumbprint != k.Thumbprint {
			return false
		}
	}
	return true
}

// rejectedKey names a key that failed validation, for the log.
type rejectedKey struct {
	kid string
	rejection
}

// buildKeySet validates every key of set. Keys without a usable
// combination of type, size and algorithm are kept out and reported; a
// later duplicate of a usable kid is ignored.
func buildKeySet(set jwk.Set, fetched time.Time) (*keySet, []rejectedKey) {
	s := &keySet{
		keys:     make(map[string]*Key, set.Len()),
		rejected: make(map[string]rejection),
		fetched:  fetched,
	}
	var rejected []rejectedKey
	for i := range set.Len() {
		jk, ok := set.Key(i)
		if !ok {
			continue
		}
		kid, _ := jk.KeyID()
		k, rej := validate(jk)
		if rej != nil {
			rejected = append(rejected, rejectedKey{kid: kid, rejection: *rej})
			if _, ok := s.rejected[kid]; !ok && kid != "" {
				s.rejected[kid] = *rej
			}
			continue
		}
		if _, dup := s.keys[kid]; dup {
			rejected = append(rejected, rejectedKey{kid: kid, rejection: rejection{reason.AlgNotAllowed, "duplicate kid, first key kept"}})
			continue
		}
		k.ID = kid
		tp, err := jk.Thumbprint(crypto.SHA256)
		if err != nil || len(tp) != len(k.Thumbprint) {
			rejected = append(rejected, rejectedKey{kid: kid, rejection: rejection{reason.AlgNotAllowed, "no RFC 7638 thumbprint"}})
			continue
		}
		copy(k.Thumbprint[:], tp)
		s.keys[kid] = k
	}
	for kid := range s.keys {
		delete(s.rejected, kid)
	}
	s.nrejected = len(rejected)
	if len(s.keys) == 1 {
		for _, k := range s.keys {
			s.only = k
		}
	}
	return s, rejected
}

// validate turns a JWK into a Key, or says why it cannot verify tokens.
func validate(jk jwk.Key) (*Key, *rejection) {
	if uk, ok := jk.(jwk.UnsupportedKey); ok {
		return nil, classifyUnparsed(uk)
	}
	if use, ok := jk.KeyUsage(); ok && use != string(jwk.ForSignature) {
		return nil, &rejection{reason.AlgNotAllowed, fmt.Sprintf("key use %q is not %q", use, jwk.ForSignature)}
	}
	if ops, ok := jk.KeyOps(); ok && !slices.Contains(ops, jwk.KeyOpVerify) {
		return nil, &rejection{reason.AlgNotAllowed, "key_ops does not allow verify"}
	}
	var algs []jwa.SignatureAlgorithm
	if a, ok := jk.Algorithm(); ok {
		alg, ok := allowedAlg(a.String())
		if !ok {
			return nil, &rejection{reason.AlgNotAllowed, fmt.Sprintf("alg %q not allowed (RS256, PS256, ES256 only)", a.String())}
		}
		algs = []jwa.SignatureAlgorithm{alg}
	}
	if priv, err := jwk.IsPrivateKey(jk); err == nil && priv {
		return nil, &rejection{reason.AlgNotAllowed, "jwk holds private key material"}
	}
	kty := jk.KeyType().String()
	switch kty {
	case jwa.RSA().String():
		pub, ok := export(jk).(*rsa.PublicKey)
		if !ok {
			return nil, &rejection{reason.AlgNotAllowed, "unusable rsa key"}
		}
		if bits := pub.N.BitLen(); bits < MinRSABits {
			return nil, &rejection{reason.KeyTooWeak, fmt.Sprintf("rsa key of %d bits (minimum %d)", bits, MinRSABits)}
		}
		if algs == nil {
			algs = rsaAlgs
		} else if !slices.Contains(rsaAlgs, algs[0]) {
			return nil, &rejection{reason.AlgNotAllowed, fmt.Sprintf("alg %s does not fit an rsa key", algs[0])}
		}
		return &Key{JWK: jk, Public: pub, Algs: algs}, nil
	case jwa.EC().String():
		pub, ok := export(jk).(*ecdsa.PublicKey)
		if !ok {
			return nil, &rejection{reason.AlgNotAllowed, "unusable ec key"}
		}
		if pub.Curve != elliptic.P256() {
			return nil, &rejection{reason.AlgNotAllowed, fmt.Sprintf("curve %s not allowed (P-256 only)", pub.Curve.Params().Name)}
		}
		if algs == nil {
			algs = ecAlgs
		} else if algs[0] != es256 {
			return nil, &rejection{reason.AlgNotAllowed, fmt.Sprintf("alg %s does not fit a P-256 key", algs[0])}
		}
		return &Key{JWK: jk, Public: pub, Algs: algs}, nil
	case jwa.OctetSeq().String():
		return nil, &rejection{reason.AlgNotAllowed, "symmetric keys are not accepted"}
	default:
		return nil, &rejection{reason.AlgNotAllowed, fmt.Sprintf("key type %q not allowed", kty)}
	}
}

// export returns the raw key of jk, or nil.
func export(jk jwk.Key) any {
	var raw any
	if err := jwk.Export(jk, &raw); err != nil {
		return nil
	}
	return raw
}

// classifyUnparsed explains a set entry jwx could not parse. jwx refuses
// RSA moduli under 2048 bits at parse time; such an entry is reported as
// too weak, every other one as not allowed.
func classifyUnparsed(uk jwk.UnsupportedKey) *rejection {
	raw, err := json.Marshal(uk)
	var probe struct {
		Kty string `json:"kty"`
		N   string `json:"n"`
	}
	if err != nil || json.Unmarshal(raw, &probe) != nil {
		return &rejection{reason.AlgNotAllowed, "unparseable key"}
	}
	if probe.Kty == jwa.RSA().String() {
		n, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(probe.N, "="))
		if err == nil && len(n) > 0 {
			if bits := new(big.Int).SetBytes(n).BitLen(); bits < MinRSABits {
				return &rejection{reason.KeyTooWeak, fmt.Sprintf("rsa key of %d bits (minimum %d)", bits, MinRSABits)}
			}
		}
		return &rejection{reason.AlgNotAllowed, "unusable rsa key"}
	}
	return &rejection{reason.AlgNotAllowed, fmt.Sprintf("key type %q not supported", probe.Kty)}
}
