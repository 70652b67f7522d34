package jwks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/svc-dev/svc/engine/jwks"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

func codeOf(err error) reason.Code { return reason.Of(err, "") }

func TestKeyValidation(t *testing.T) {
	k := keys()
	priv, err := jwk.Import(k.rsa2)
	if err != nil {
		t.Fatal(err)
	}
	if err := priv.Set(jwk.KeyIDKey, "private"); err != nil {
		t.Fatal(err)
	}
	privJSON, err := json.Marshal(priv)
	if err != nil {
		t.Fatal(err)
	}
	var privMap map[string]any
	if err := json.Unmarshal(privJSON, &privMap); err != nil {
		t.Fatal(err)
	}
	body := jwksJSON(t,
		rsaJWK("rsa", &k.rsa.PublicKey),
		rsaJWK("rsa-rs256", &k.rsa.PublicKey, "alg", "RS256", "use", "sig"),
		rsaJWK("rsa-ps256", &k.rsa.PublicKey, "alg", "PS256"),
		ecJWK("ec", &k.ec.PublicKey),
		ecJWK("ec-es256", &k.ec.PublicKey, "alg", "ES256"),
		rsaJWK("weak", &k.weak.PublicKey),
		rsaJWK("weak-rs256", &k.weak.PublicKey, "alg", "RS256"),
		rsaJWK("rsa-hs256", &k.rsa.PublicKey, "alg", "HS256"),
		rsaJWK("rsa-rs512", &k.rsa.PublicKey, "alg", "RS512"),
		rsaJWK("rsa-enc", &k.rsa.PublicKey, "use", "enc"),
		rsaJWK("rsa-es256", &k.rsa.PublicKey, "alg", "ES256"),
		ecJWK("ec-rs256", &k.ec.PublicKey, "alg", "RS256"),
		ecJWK("p384", &k.p384.PublicKey),
		map[string]any{"kty": "oct", "kid": "hmac", "alg": "HS256", "k": b64([]byte("0123456789abcdef0123456789abcdef"))},
		map[string]any{"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": b64(k.ed)},
		map[string]any{"kty": "PQ-FUTURE", "kid": "future", "pub": "AAAA"},
		map[string]any{"kty": "RSA", "kid": "ops", "n": b64(k.rsa.N.Bytes()), "e": "AQAB", "key_ops": []string{"encrypt"}},
		privMap,
	)
	p := newIDP(t, body)
	c := newCache(t, p, nil)

	rsaBoth := []jwa.SignatureAlgorithm{jwa.RS256(), jwa.PS256()}
	tests := []struct {
		kid  string
		code reason.Code // "" means usable
		algs []jwa.SignatureAlgorithm
	}{
		{"rsa", "", rsaBoth},
		{"rsa-rs256", "", []jwa.SignatureAlgorithm{jwa.RS256()}},
		{"rsa-ps256", "", []jwa.SignatureAlgorithm{jwa.PS256()}},
		{"ec", "", []jwa.SignatureAlgorithm{jwa.ES256()}},
		{"ec-es256", "", []jwa.SignatureAlgorithm{jwa.ES256()}},
		{"weak", reason.KeyTooWeak, nil},
		{"weak-rs256", reason.KeyTooWeak, nil},
		{"rsa-hs256", reason.AlgNotAllowed, nil},
		{"rsa-rs512", reason.AlgNotAllowed, nil},
		{"rsa-enc", reason.AlgNotAllowed, nil},
		{"rsa-es256", reason.AlgNotAllowed, nil},
		{"ec-rs256", reason.AlgNotAllowed, nil},
		{"p384", reason.AlgNotAllowed, nil},
		{"hmac", reason.AlgNotAllowed, nil},
		{"ed", reason.AlgNotAllowed, nil},
		{"future", reason.AlgNotAllowed, nil},
		{"ops", reason.AlgNotAllowed, nil},
		{"private", reason.AlgNotAllowed, nil},
		{"absent", reason.UnknownKID, nil},
	}
	for _, tt := range tests {
		t.Run(tt.kid, func(t *testing.T) {
			key, err := c.Key(context.Background(), tt.kid)
			if got := codeOf(err); got != tt.code {
				t.Fatalf("Key(%q) code = %q (%v), want %q", tt.kid, got, err, tt.code)
			}
			if tt.code != "" {
				return
			}
			if key.ID != tt.kid || key.Public == nil || key.JWK == nil {
				t.Fatalf("Key(%q) = %+v, want id, public and jwk set", tt.kid, key)
			}
			if fmt.Sprint(key.Algs) != fmt.Sprint(tt.algs) {
				t.Fatalf("Key(%q).Algs = %v, want %v", tt.kid, key.Algs, tt.algs)
			}
			for _, a := range tt.algs {
				if !key.Allows(a) {
					t.Fatalf("Key(%q) does not allow %s", tt.kid, a)
				}
			}
			if key.Allows(jwa.HS256()) || key.Allows(jwa.NoSignature()) {
				t.Fatalf("Key(%q) allows a forbidden algorithm", tt.kid)
			}
		})
	}
	st := c.Status()
	if st.KeySets != 1 || st.Keys != 5 || st.Rejected != 13 {
		t.Errorf("status = %+v, want 1 set, 5 keys, 13 rejected", st)
	}
	// Lookups of known and rejected kids are answered from memory; the one
	// unknown kid cost one refetch.
	if got := p.Requests(); got != 2 {
		t.Errorf("idp requests = %d, want 2", got)
	}
}

func TestKeyEmptyKID(t *testing.T) {
	k := keys()
	tests := []struct {
		name string
		set  []map[string]any
		code reason.Code
	}{
		{"single key", []map[string]any{rsaJWK("only", &k.rsa.PublicKey)}, ""},
		{"single usable key beside a rejected one", []map[string]any{rsaJWK("only", &k.rsa.PublicKey), rsaJWK("weak", &k.weak.PublicKey)}, ""},
		{"two keys", []map[string]any{rsaJWK("a", &k.rsa.PublicKey), ecJWK("b", &k.ec.PublicKey)}, reason.UnknownKID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCache(t, newIDP(t, jwksJSON(t, tt.set...)), nil)
			key, err := c.Key(context.Background(), "")
			if got := codeOf(err); got != tt.code {
				t.Fatalf("code = %q (%v), want %q", got, err, tt.code)
			}
			if tt.code == "" && key.ID != "only" {
				t.Fatalf("key = %q, want only", key.ID)
			}
		})
	}
}

func TestKeyRotation(t *testing.T) {
	k := keys()
	p := newIDP(t, jwksJSON(t, rsaJWK("k1", &k.rsa.PublicKey)))
	c, _ := clockedCache(t, p)
	ctx := context.Background()

	if _, err := c.Key(ctx, "k1"); err != nil {
		t.Fatalf("k1 before rotation: %v", err)
	}
	if _, err := c.Key(ctx, "k2"); codeOf(err) != reason.UnknownKID {
		t.Fatalf("k2 before rotation: %v, want unknown-kid", err)
	}
	p.Serve(jwksJSON(t, rsaJWK("k2", &k.rsa2.PublicKey), rsaJWK("k1", &k.rsa.PublicKey)), http.StatusOK, "")
	key, err := c.Key(ctx, "k2")
	if err != nil || key.ID != "k2" {
		t.Fatalf("k2 after rotation: %+v, %v", key, err)
	}
	// Old key retired at the IdP: it keeps serving until a refresh shows
	// the new set.
	p.Serve(jwksJSON(t, rsaJWK("k2", &k.rsa2.PublicKey)), http.StatusOK, "")
	if _, err := c.Key(ctx, "k1"); err != nil {
		t.Fatalf("k1 from the cached set: %v", err)
	}
	if got := p.Requests(); got != 3 {
		t.Fatalf("idp requests = %d, want 3 (first load, two unknown-kid refetches)", got)
	}
}

func TestKeyRandomKIDFlood(t *testing.T) {
	k := keys()
	p := newIDP(t, jwksJSON(t, rsaJWK("good", &k.rsa.PublicKey)))
	clk := newClock() // frozen: the limiter never refills during the flood
	const burst = 3
	c := newCache(t, p, func(o *jwks.Options) { o.Now = clk.Now; o.UnknownKIDBurst = burst })

	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for g := range 50 {
		wg.Go(func() {
			for i := range 20 {
				_, err := c.Key(context.Background(), fmt.Sprintf("random-%d-%d", g, i))
				if codeOf(err) != reason.UnknownKID {
					errs <- fmt.Errorf("kid %d-%d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := p.Requests(); got > burst || got < 1 {
		t.Fatalf("idp requests = %d for 1000 random kids, want 1..%d", got, burst)
	}
	if _, err := c.Key(context.Background(), "good"); err != nil {
		t.Fatalf("known kid after the flood: %v", err)
	}
	// The bucket refills with time.
	before := p.Requests()
	clk.Advance(time.Minute)
	_, _ = c.Key(context.Background(), "random-after")
	if got := p.Requests(); got != before+1 {
		t.Fatalf("idp requests after refill = %d, want %d", got, before+1)
	}
}

func TestKeyIdPDown(t *testing.T) {
	k := keys()
	p := newIDP(t, jwksJSON(t, rsaJWK("k1", &k.rsa.PublicKey)))
	c, clk := clockedCache(t, p)
	ctx := context.Background()
	if _, err := c.Key(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	p.Serve([]byte("upstream broke"), http.StatusInternalServerError, "")
	clk.Advance(10 * time.Second)

	if _, err := c.Key(ctx, "unknown"); codeOf(err) != reason.UnknownKID {
		t.Fatalf("unknown kid while down: %v, want unknown-kid", err)
	}
	if _, err := c.Key(ctx, "k1"); err != nil {
		t.Fatalf("cached key while down: %v", err)
	}
	st := c.Status()
	if !st.Partitioned || !st.PartitionedSince.Equal(clk.Now()) || st.Keys != 1 || st.FetchFailures != 1 || st.Fetches != 2 {
		t.Fatalf("status while down = %+v", st)
	}
	if !strings.Contains(st.LastError, "status 500") || strings.Contains(st.LastError, "upstream broke") {
		t.Fatalf("LastError = %q", st.LastError)
	}
	if st.KeyAge != 10*time.Second {
		t.Fatalf("KeyAge = %s, want 10s", st.KeyAge)
	}

	p.Serve(jwksJSON(t, rsaJWK("k1", &k.rsa.PublicKey), rsaJWK("k2", &k.rsa2.PublicKey)), http.StatusOK, "")
	clk.Advance(time.Minute)
	if _, err := c.Key(ctx, "k2"); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if st := c.Status(); st.Partitioned || st.LastError != "" || !st.LastSuccess.Equal(clk.Now()) || st.KeyAge != 0 {
		t.Fatalf("status after recovery = %+v", st)
	}
}

func TestKeyNothingCached(t *testing.T) {
	tests := []struct {
		name   string
		body   []byte
		status int
		want   string // in LastError
	}{
		{"server error", []byte(`{"keys":[]}`), http.StatusInternalServerError, "status 500"},
		{"not found", nil, http.StatusNotFound, "status 404"},
		{"not json", []byte("<html>login</html>"), http.StatusOK, "parse"},
		{"empty set", []byte(`{"keys":[]}`), http.StatusOK, "no keys"},
		{"only weak keys", nil, http.StatusOK, "no usable key (1 rejected)"},
		{"oversized body", append(append([]byte(`{"keys":[]`), make([]byte, jwks.MaxBodySize)...), '}'), http.StatusOK, "exceeds 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if body == nil && tt.status == http.StatusOK {
				body = jwksJSON(t, rsaJWK("weak", &keys().weak.PublicKey))
			}
			p := newIDP(t, body)
			p.Serve(body, tt.status, "")
			c := newCache(t, p, nil)
			_, err := c.Key(context.Background(), "k1")
			if codeOf(err) != reason.JWKSUnavailable {
				t.Fatalf("err = %v, want jwks-unavailable", err)
			}
			st := c.Status()
			if st.KeySets != 0 || st.Partitioned || !strings.Contains(st.LastError, tt.want) {
				t.Fatalf("status = %+v, want no set and LastError containing %q", st, tt.want)
			}
		})
	}
}

func TestBadResponseKeepsGoodSet(t *testing.T) {
	k := keys()
	bad := []struct {
		name   string
		body   []byte
		status int
	}{
		{"server error", nil, http.StatusBadGateway},
		{"not json", []byte("{"), http.StatusOK},
		{"empty set", []byte(`{"keys":[]}`), http.StatusOK},
		{"only weak keys", jwksJSON(t, rsaJWK("weak", &k.weak.PublicKey)), http.StatusOK},
		{"oversized body", []byte(`{"keys":[` + strings.Repeat(" ", jwks.MaxBodySize) + `]}`), http.StatusOK},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p := newIDP(t, jwksJSON(t, rsaJWK("k1", &k.rsa.PublicKey)))
			c := newCache(t, p, nil)
			if _, err := c.Key(context.Background(), "k1"); err != nil {
				t.Fatal(err)
			}
			p.Serve(tt.body, tt.status, "")
			if _, err := c.Key(context.Background(), "k2"); codeOf(err) != reason.UnknownKID {
				t.Fatalf("k2: %v, want unknown-kid", err)
			}
			if _, err := c.Key(context.Background(), "k1"); err != nil {
				t.Fatalf("k1 after a bad response: %v", err)
			}
			if st := c.Status(); !st.Partitioned || st.Keys != 1 || st.FetchFailures != 1 {
				t.Fatalf("status = %+v", st)
			}
		})
	}
}

func TestKeyUnreachable(t *testing.T) {
	p := newIDP(t, nil)
	url := p.Srv.URL + "/jwks.json?token=s3cr3t"
	client := p.Srv.Client()
	p.Srv.Close()
	c, err := jwks.New(jwks.Options{URL: url, Client: client, FetchTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Key(context.Background(), "k1")
	if codeOf(err) != reason.JWKSUnavailable {
		t.Fatalf("err = %v, want jwks-unavailable", err)
	}
	st := c.Status()
	if st.LastError == "" || strings.Contains(st.LastError, "s3cr3t") || strings.Contains(err.Error(), "s3cr3t") || strings.Contains(st.URL, "s3cr3t") {
		t.Fatalf("secret leaked or no error: status %+v, err %v", st, err)
	}
}

func TestKeyContextCancelled(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
		http.Error(w, "late", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	p := &idp{Srv: srv}
	c := newCache(t, p, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Key(ctx, "k1")
	if codeOf(err) != reason.JWKSUnavailable || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want jwks-unavailable wrapping the deadline", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Key waited %s after its context ended", d)
	}
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name string
		opts jwks.Options
		ok   bool
	}{
		{"https", jwks.Options{URL: "https://idp.example.com/.well-known/jwks.json"}, true},
		{"http loopback v4", jwks.Options{URL: "http://127.0.0.1:8080/jwks"}, true},
		{"http loopback v6", jwks.Options{URL: "http://[::1]:8080/jwks"}, true},
		{"http localhost", jwks.Options{URL: "http://localhost/jwks"}, true},
		{"http remote", jwks.Options{URL: "http://idp.example.com/jwks"}, false},
		{"file", jwks.Options{URL: "file:///etc/jwks.json"}, false},
		{"empty", jwks.Options{}, false},
		{"relative", jwks.Options{URL: "/jwks.json"}, false},
		{"min above max", jwks.Options{URL: "https://idp.example.com/jwks", MinRefresh: time.Hour, MaxRefresh: time.Minute}, false},
		{"negative timeout", jwks.Options{URL: "https://idp.example.com/jwks", FetchTimeout: -time.Second}, false},
		{"negative burst", jwks.Options{URL: "https://idp.example.com/jwks", UnknownKIDBurst: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := jwks.New(tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("New() err = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestLogging(t *testing.T) {
	k := keys()
	var buf testkit.SyncBuffer
	p := newIDP(t, jwksJSON(t, rsaJWK("good", &k.rsa.PublicKey), rsaJWK("weak", &k.weak.PublicKey)))
	c, err := jwks.New(jwks.Options{
		URL:             p.Srv.URL + "/jwks.json?client_secret=s3cr3t",
		Client:          p.Srv.Client(),
		UnknownKIDBurst: 10,
		Logger:          slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, kid := range []string{"good", "other-1", "other-2"} {
		_, _ = c.Key(ctx, kid)
	}
	p.Serve(nil, http.StatusBadGateway, "")
	_, _ = c.Key(ctx, "other-3")

	out := buf.String()
	if n := strings.Count(out, `"msg":"jwks key rejected"`); n != 1 {
		t.Errorf("rejected key logged %d times over 3 identical fetches, want once:\n%s", n, out)
	}
	if !strings.Contains(out, `"kid":"weak"`) || !strings.Contains(out, `"reason":"key-too-weak"`) {
		t.Errorf("rejection log lacks kid or reason:\n%s", out)
	}
	if !strings.Contains(out, `"msg":"jwks fetch failed, serving cached keys"`) {
		t.Errorf("partition not logged:\n%s", out)
	}
	for _, secret := range []string{"s3cr3t", b64(k.rsa.N.Bytes())[:16], b64(k.weak.N.Bytes())[:16]} {
		if strings.Contains(out, secret) {
			t.Errorf("log holds %q:\n%s", secret, out)
		}
	}
}

// A provider down at start: "no copy yet, retrying", then one Info line
// when the keys become available.
func TestLoggingNoCopyYetThenAvailable(t *testing.T) {
	k := keys()
	var buf testkit.SyncBuffer
	p := newIDP(t, jwksJSON(t, rsaJWK("good", &k.rsa.PublicKey)))
	p.Serve(nil, http.StatusBadGateway, "")
	c, err := jwks.New(jwks.Options{
		URL: p.Srv.URL + "/jwks.json", Client: p.Srv.Client(), UnknownKIDBurst: 10,
		Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = c.Key(ctx, "good")
	_, _ = c.Key(ctx, "good")
	p.Serve(jwksJSON(t, rsaJWK("good", &k.rsa.PublicKey)), http.StatusOK, "")
	if _, err := c.Key(ctx, "good"); err != nil {
		t.Fatalf("Key after recovery: %v", err)
	}
	_, _ = c.Key(ctx, "other")
	out := buf.String()
	if n := strings.Count(out, `"msg":"jwks fetch failed; no copy yet, retrying`); n != 2 {
		t.Errorf("%d no-copy-yet lines, want 2:\n%s", n, out)
	}
	if strings.Contains(out, "serving cached keys") {
		t.Errorf("claims cached keys before any were loaded:\n%s", out)
	}
	if n := strings.Count(out, `"msg":"jwks available; tokens can be verified"`); n != 1 || !strings.Contains(out, `"level":"INFO"`) {
		t.Errorf("%d available lines, want one Info:\n%s", n, out)
	}
}
