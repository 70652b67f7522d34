package oidcgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// A provider's keys verify its ID tokens and the logout tokens that
// anyone may post to the back-channel logout endpoint. A token naming a
// key the set does not hold has the set fetched again (the provider may
// have rotated its keys), at most unknownKeyBurst times per
// unknownKeyInterval: otherwise each forged logout token, from anyone,
// would cost the provider a fetch of its keys.
const (
	unknownKeyInterval = time.Minute
	unknownKeyBurst    = 3
	// maxKeySetBytes bounds a key set document.
	maxKeySetBytes = 1 << 20
)

// signingAlgs are the algorithms of the keys a provider may sign with:
// asymmetric ones only (never none, never an HMAC of a secret).
var signingAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// keySet is a provider's key set, fetched from its jwks_uri when first
// needed and again, within limits, for a key it does not hold. It
// implements oidc.KeySet.
type keySet struct {
	url    string
	client *http.Client
	now    func() time.Time

	fetchMu sync.Mutex // one fetch at a time
	mu      sync.Mutex // guards what follows
	keys    []jose.JSONWebKey
	gen     int         // counts the fetches that loaded a set
	fetches []time.Time // of the last fetches, at most unknownKeyBurst
}

// VerifySignature implements oidc.KeySet: it returns the payload of raw
// when a key of the set verifies its signature.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, signingAlgs)
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("the token must carry one signature")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, gen := k.loaded()
	if p, ok := verifyWith(jws, kid, keys); ok {
		return p, nil
	}
	if err := k.refetch(ctx, gen); err != nil {
		return nil, err
	}
	keys, _ = k.loaded()
	if p, ok := verifyWith(jws, kid, keys); ok {
		return p, nil
	}
	return nil, errors.New("no key of the provider's key set verifies the token")
}

func (k *keySet) loaded() ([]jose.JSONWebKey, int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.keys, k.gen
}

// verifyWith tries the keys named kid (every key, for a token that
// names none).
func verifyWith(jws *jose.JSONWebSignature, kid string, keys []jose.JSONWebKey) ([]byte, bool) {
	for _, key := range keys {
		if kid != "" && key.KeyID != kid {
			continue
		}
		if p, err := jws.Verify(key.Key); err == nil {
			return p, true
		}
	}
	return nil, false
}

// refetch fetches the set again unless a fetch loaded one since the
// caller read generation gen, or the limit is spent.
func (k *keySet) refetch(ctx context.Context, gen int) error {
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	k.mu.Lock()
	now := k.now()
	k.fetches = slices.DeleteFunc(k.fetches, func(at time.Time) bool { return now.Sub(at) >= unknownKeyInterval })
	switch {
	case k.gen != gen:
		k.mu.Unlock()
		return nil // another caller fetched meanwhile
	case len(k.fetches) >= unknownKeyBurst:
		k.mu.Unlock()
		return errors.New("the token names a key the provider's key set does not hold, and the set was fetched again just now")
	}
	k.fetches = append(k.fetches, now)
	k.mu.Unlock()
	keys, err := k.fetch(ctx)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.keys, k.gen = keys, k.gen+1
	k.mu.Unlock()
	return nil
}

func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	res, err := k.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("key set: %s answered %d", k.url, res.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(res.Body, maxKeySetBytes)).Decode(&set); err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, key := range set.Keys {
		if key.IsPublic() && key.Valid() && (key.Use == "" || key.Use == "sig") {
			keys = append(keys, key)
		}
	}
	return keys, nil
}
