package introspect_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/svc-dev/svc/engine/introspect"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/redistest"
	"github.com/svc-dev/svc/reason"
)

const (
	clientID     = "svc:gateway"
	clientSecret = "s3cr&t =ü"
)

// endpoint is an RFC 7662 endpoint over loopback: answers maps a token to
// the body answered for it (unknown tokens are inactive).
type endpoint struct {
	srv     *httptest.Server
	calls   atomic.Int64
	mu      sync.Mutex
	answers map[string]string
	status  int
	// gate, when set, holds every call until it is closed.
	gate chan struct{}
}

func newEndpoint(t testing.TB, answers map[string]string) *endpoint {
	ep := &endpoint{answers: answers, status: http.StatusOK}
	ep.srv = httptest.NewServer(http.HandlerFunc(ep.serve))
	t.Cleanup(ep.srv.Close)
	return ep
}

func (ep *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	ep.calls.Add(1)
	ep.mu.Lock()
	gate, status := ep.gate, ep.status
	ep.mu.Unlock()
	if gate != nil {
		<-gate
	}
	id, secret, ok := r.BasicAuth()
	if !ok || id != url.QueryEscape(clientID) || secret != url.QueryEscape(clientSecret) {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if err := r.ParseForm(); err != nil || r.PostForm.Get("token_type_hint") != "access_token" {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	if status != http.StatusOK {
		w.WriteHeader(status)
		return
	}
	ep.mu.Lock()
	body, ok := ep.answers[r.PostForm.Get("token")]
	ep.mu.Unlock()
	if !ok {
		body = `{"active":false}`
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(body))
}

func (ep *endpoint) setStatus(s int) {
	ep.mu.Lock()
	ep.status = s
	ep.mu.Unlock()
}

// clock is the tests' settable clock.
type clock = testkit.Clock

var start = time.Unix(1_800_000_000, 0)

func newClient(t *testing.T, ep *endpoint, clk *clock, mod func(*introspect.Options)) *introspect.Client {
	t.Helper()
	opts := introspect.Options{URL: ep.srv.URL, ClientID: clientID, ClientSecret: clientSecret, Now: clk.Now}
	if mod != nil {
		mod(&opts)
	}
	c, err := introspect.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func code(err error) reason.Code { return reason.Of(err, "") }

func TestIntrospectActive(t *testing.T) {
	cases := []struct {
		name, body  string
		tenantClaim string
		sub, tenant string
		roles       []string
		aud         []string
	}{
		{"roles array", `{"active":true,"sub":"alice","tenant_id":"acme","roles":["admin","viewer"],"exp":1800000600,"aud":["orders","billing"]}`, "", "alice", "acme", []string{"admin", "viewer"}, []string{"orders", "billing"}},
		{"roles string", `{"active":true,"sub":"bob","tenant_id":"acme","roles":"viewer","aud":"orders"}`, "", "bob", "acme", []string{"viewer"}, []string{"orders"}},
		{"scope", `{"active":true,"sub":"svc-ci","tenant_id":"acme","scope":"orders:read  orders:write"}`, "", "svc-ci", "acme", []string{"orders:read", "orders:write"}, nil},
		{"custom tenant claim", `{"active":true,"sub":"carol","org":"globex"}`, "org", "carol", "globex", []string{}, nil},
		{"bearer token_type", `{"active":true,"sub":"dave","tenant_id":"acme","token_type":"Bearer","cnf":null}`, "", "dave", "acme", []string{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := newEndpoint(t, map[string]string{"tok": tc.body})
			c := newClient(t, ep, testkit.NewClock(start), func(o *introspect.Options) { o.TenantClaim = tc.tenantClaim })
			a, err := c.Introspect(context.Background(), "tok")
			if err != nil {
				t.Fatal(err)
			}
			if a.Subject != tc.sub || a.Tenant != tc.tenant || strings.Join(a.Roles, ",") != strings.Join(tc.roles, ",") || !slices.Equal(a.Audiences, tc.aud) {
				t.Fatalf("answer = %+v, want sub %q tenant %q roles %v aud %v", a, tc.sub, tc.tenant, tc.roles, tc.aud)
			}
			if a.Claims["active"] != true {
				t.Fatalf("claims = %v", a.Claims)
			}
		})
	}
}

func TestIntrospectBadAnswers(t *testing.T) {
	cases := []struct {
		name, body string
		want       reason.Code
	}{
		{"not json", `<html>oops</html>`, reason.IntrospectionInvalid},
		{"array", `[{"active":true}]`, reason.IntrospectionInvalid},
		{"no active", `{"sub":"alice"}`, reason.IntrospectionInvalid},
		{"active string", `{"active":"true"}`, reason.IntrospectionInvalid},
		{"trailing", `{"active":true}{}`, reason.IntrospectionInvalid},
		{"sub number", `{"active":true,"sub":7}`, reason.IntrospectionInvalid},
		{"roles numbers", `{"active":true,"sub":"a","roles":[1]}`, reason.IntrospectionInvalid},
		{"exp string", `{"active":true,"sub":"a","exp":"soon"}`, reason.IntrospectionInvalid},
		{"aud number", `{"active":true,"sub":"a","aud":7}`, reason.IntrospectionInvalid},
		{"aud numbers", `{"active":true,"sub":"a","aud":["orders",7]}`, reason.IntrospectionInvalid},
		{"too large", `{"active":true,"pad":"` + strings.Repeat("x", introspect.MaxAnswerSize) + `"}`, reason.IntrospectionInvalid},
		{"inactive", `{"active":false}`, reason.TokenInactive},
		{"expired", `{"active":true,"sub":"a","exp":1700000000}`, reason.TokenInactive},
		// A token bound to its client's key (RFC 8705, RFC 9449) needs a
		// proof of possession a bearer request cannot give; a refresh
		// token is for the authorization server only.
		{"bound to a DPoP key", `{"active":true,"sub":"a","tenant_id":"acme","token_type":"DPoP","cnf":{"jkt":"0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}}`, reason.TokenInactive},
		{"bound to a certificate", `{"active":true,"sub":"a","tenant_id":"acme","token_type":"Bearer","cnf":{"x5t#S256":"bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2"}}`, reason.TokenInactive},
		{"DPoP without cnf", `{"active":true,"sub":"a","tenant_id":"acme","token_type":"dpop"}`, reason.TokenInactive},
		{"refresh token", `{"active":true,"sub":"a","tenant_id":"acme","token_type":"refresh_token"}`, reason.TokenInactive},
		{"token_type number", `{"active":true,"sub":"a","token_type":7}`, reason.IntrospectionInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const tok = "Zq9Opaque"
			ep := newEndpoint(t, map[string]string{tok: tc.body})
			c := newClient(t, ep, testkit.NewClock(start), nil)
			_, err := c.Introspect(context.Background(), tok)
			if code(err) != tc.want {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
			if strings.Contains(err.Error(), tok) {
				t.Fatalf("error %q repeats the token", err)
			}
		})
	}
}

func TestIntrospectCacheTiers(t *testing.T) {
	ep := newEndpoint(t, map[string]string{
		"short": `{"active":true,"sub":"alice","tenant_id":"acme","exp":1800000060}`,
		"long":  `{"active":true,"sub":"bob","tenant_id":"acme","exp":1800003600}`,
	})
	clk := testkit.NewClock(start)
	c := newClient(t, ep, clk, func(o *introspect.Options) {
		o.CacheTTL = 5 * time.Minute
		o.NegativeTTL = 10 * time.Second
	})
	ctx := context.Background()
	ask := func(tok string, want reason.Code, calls int64) {
		t.Helper()
		_, err := c.Introspect(ctx, tok)
		if code(err) != want && !(want == reason.OK && err == nil) {
			t.Fatalf("%s: err = %v, want %s", tok, err, want)
		}
		if got := ep.calls.Load(); got != calls {
			t.Fatalf("%s: %d calls to the endpoint, want %d", tok, got, calls)
		}
	}
	ask("short", reason.OK, 1)
	ask("short", reason.OK, 1)
	ask("long", reason.OK, 2)
	ask("gone", reason.TokenInactive, 3)
	ask("gone", reason.TokenInactive, 3)
	clk.Advance(11 * time.Second)
	ask("gone", reason.TokenInactive, 4) // negative_cache_ttl passed
	clk.Advance(50 * time.Second)
	// short's exp has passed: its answer is not served past it, though
	// cache_ttl has not, and an active answer past exp counts for none.
	ask("short", reason.TokenInactive, 5)
	ask("long", reason.OK, 5)
	clk.Advance(5 * time.Minute)
	ask("long", reason.OK, 6) // cache_ttl passed
	if s := c.Stats(); s.MemoryHits != 3 || s.Active != 3 || s.Inactive != 3 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestIntrospectEndpointDown(t *testing.T) {
	ep := newEndpoint(t, map[string]string{
		"tok":   `{"active":true,"sub":"alice","tenant_id":"acme","exp":1800000600}`,
		"noexp": `{"active":true,"sub":"bob","tenant_id":"acme"}`,
	})
	clk := testkit.NewClock(start)
	c := newClient(t, ep, clk, func(o *introspect.Options) { o.CacheTTL = time.Minute })
	ctx := context.Background()
	for _, tok := range []string{"tok", "noexp"} {
		if _, err := c.Introspect(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(2 * time.Minute)
	ep.setStatus(http.StatusServiceUnavailable)
	// The endpoint failing, an answer whose token has not expired is
	// served; one without exp is not known to be valid any longer.
	if a, err := c.Introspect(ctx, "tok"); err != nil || a.Subject != "alice" {
		t.Fatalf("still-valid cached answer not served: %v", err)
	}
	if _, err := c.Introspect(ctx, "noexp"); code(err) != reason.IntrospectionUnavailable {
		t.Fatalf("err = %v, want introspection-unavailable", err)
	}
	if _, err := c.Introspect(ctx, "other"); code(err) != reason.IntrospectionUnavailable {
		t.Fatalf("err = %v, want introspection-unavailable", err)
	}
	clk.Advance(10 * time.Minute)
	if _, err := c.Introspect(ctx, "tok"); code(err) != reason.IntrospectionUnavailable {
		t.Fatalf("expired token served from the cache: %v", err)
	}
	if msg, at := c.LastError(); !strings.Contains(msg, "503") || at.IsZero() {
		t.Fatalf("last error = %q at %v", msg, at)
	}
	ep.srv.Close()
	if _, err := c.Introspect(ctx, "tok"); code(err) != reason.IntrospectionUnavailable {
		t.Fatalf("err = %v, want introspection-unavailable", err)
	}
	if msg, _ := c.LastError(); strings.Contains(msg, "token=") {
		t.Fatalf("last error %q holds the form", msg)
	}
}

func TestIntrospectWrongCredentials(t *testing.T) {
	ep := newEndpoint(t, map[string]string{"tok": `{"active":true,"sub":"a"}`})
	c := newClient(t, ep, testkit.NewClock(start), func(o *introspect.Options) { o.ClientSecret = "wrong" })
	_, err := c.Introspect(context.Background(), "tok")
	if code(err) != reason.IntrospectionUnavailable {
		t.Fatalf("err = %v, want introspection-unavailable", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Fatalf("error %q holds the secret", err)
	}
}

func TestIntrospectDoesNotFollowRedirects(t *testing.T) {
	// The host a redirect names would receive the client's credentials
	// and the token, and its answer would be trusted.
	var stolen atomic.Int64
	thief := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		_, _ = w.Write([]byte(`{"active":true,"sub":"mallory","tenant_id":"acme"}`))
	}))
	t.Cleanup(thief.Close)
	const token = "opaque-token-value"
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		for name, target := range map[string]string{"other host": thief.URL + "/steal", "same origin": "/same-origin"} {
			t.Run(fmt.Sprintf("%d to %s", status, name), func(t *testing.T) {
				var sameOrigin atomic.Int64
				srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/same-origin" {
						sameOrigin.Add(1)
						_, _ = w.Write([]byte(`{"active":true,"sub":"mallory","tenant_id":"acme"}`))
						return
					}
					http.Redirect(w, r, target, status)
				}))
				t.Cleanup(srv.Close)
				stolen.Store(0)
				c, err := introspect.New(introspect.Options{URL: srv.URL + "/introspect", ClientID: clientID,
					ClientSecret: clientSecret, HTTPClient: srv.Client(), Now: testkit.NewClock(start).Now})
				if err != nil {
					t.Fatal(err)
				}
				a, err := c.Introspect(context.Background(), token)
				if code(err) != reason.IntrospectionUnavailable {
					t.Fatalf("answer %+v, err = %v, want introspection-unavailable", a, err)
				}
				if n := stolen.Load() + sameOrigin.Load(); n != 0 {
					t.Fatalf("the redirect was followed (%d calls)", n)
				}
				last, _ := c.LastError()
				for _, msg := range []string{err.Error(), last} {
					if !strings.Contains(msg, strconv.Itoa(status)) {
						t.Errorf("error %q does not name the status", msg)
					}
					for _, secret := range []string{clientSecret, url.QueryEscape(clientSecret), token, "steal"} {
						if strings.Contains(msg, secret) {
							t.Errorf("error %q holds %q", msg, secret)
						}
					}
				}
			})
		}
	}
}

func TestIntrospectCollapsesConcurrentLookups(t *testing.T) {
	ep := newEndpoint(t, map[string]string{"tok": `{"active":true,"sub":"alice","tenant_id":"acme"}`})
	ep.gate = make(chan struct{})
	c := newClient(t, ep, testkit.NewClock(start), nil)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Introspect(context.Background(), "tok")
			errs <- err
		}()
	}
	testkit.Eventually(t, "the first call to reach the endpoint", func() bool { return ep.calls.Load() == 1 })
	close(ep.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := ep.calls.Load(); got != 1 {
		t.Fatalf("%d calls for %d concurrent lookups, want 1", got, n)
	}
}

func TestIntrospectSharedThroughRedis(t *testing.T) {
	addr := redistest.Start(t)
	ep := newEndpoint(t, map[string]string{"tok": `{"active":true,"sub":"alice","tenant_id":"acme","exp":1800000600}`})
	clk := testkit.NewClock(start)
	var replicas []*introspect.Client
	for range 2 {
		rc := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { rc.Close() })
		replicas = append(replicas, newClient(t, ep, clk, func(o *introspect.Options) {
			o.Remote = introspect.Redis{Client: rc, Timeout: 5 * time.Second}
		}))
	}
	ctx := context.Background()
	for _, tok := range []string{"tok", "gone"} {
		for i, c := range replicas {
			_, err := c.Introspect(ctx, tok)
			if tok == "tok" && err != nil || tok == "gone" && code(err) != reason.TokenInactive {
				t.Fatalf("replica %d, %s: %v", i, tok, err)
			}
		}
	}
	if got := ep.calls.Load(); got != 2 {
		t.Fatalf("%d calls for two tokens asked by two replicas, want 2", got)
	}
	if s := replicas[1].Stats(); s.RemoteHits != 2 {
		t.Fatalf("second replica's stats = %+v, want 2 remote hits", s)
	}
	// The store holds digests of tokens, never a token.
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, introspect.RemoteKeyPrefix) || len(k) != len(introspect.RemoteKeyPrefix)+64 {
			t.Fatalf("key %q in the shared store", k)
		}
	}
	if len(keys) != 2 {
		t.Fatalf("keys = %v, want 2", keys)
	}
}

func TestIntrospectRefusesOversizedToken(t *testing.T) {
	ep := newEndpoint(t, nil)
	c := newClient(t, ep, testkit.NewClock(start), nil)
	for _, tok := range []string{"", strings.Repeat("a", introspect.MaxTokenSize+1)} {
		if _, err := c.Introspect(context.Background(), tok); code(err) != reason.TokenMalformed {
			t.Fatalf("err = %v, want token-malformed", err)
		}
	}
	if ep.calls.Load() != 0 {
		t.Fatal("the endpoint was called")
	}
}

func TestNewRefusesBadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "::"} {
		if _, err := introspect.New(introspect.Options{URL: u}); err == nil {
			t.Errorf("New(%q) accepted", u)
		}
	}
}

func TestLooksLikeJWS(t *testing.T) {
	for tok, want := range map[string]bool{
		"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln": true,
		"eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.":     true,
		"a.b.c.d":                                   false,
		"opaque-token_123":                          false,
		"a.b":                                       false,
		".b.c":                                      false,
		"a b.c.d":                                   false,
		"eyJ+.eyJ.c":                                false,
		"svck_abc.def.ghi==":                        false,
		"abcDEF012_-.xyz.123":                       true,
	} {
		if got := introspect.LooksLikeJWS(tok); got != want {
			t.Errorf("LooksLikeJWS(%q) = %v, want %v", tok, got, want)
		}
	}
}

// remoteKeyOf is the shared tier's key of token.
func remoteKeyOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return introspect.RemoteKeyPrefix + hex.EncodeToString(sum[:])
}

// One who can write to the shared store but does not know the client
// secret cannot make an answer: a value written in the plain format, a
// genuine value moved under another token's key, or one whose answer was
// edited, is ignored as a miss and counted, and the endpoint decides.
func TestIntrospectSharedTierRefusesForgedValues(t *testing.T) {
	addr := redistest.Start(t)
	ep := newEndpoint(t, map[string]string{"victim": `{"active":true,"sub":"alice","tenant_id":"acme","roles":["admin"]}`})
	clk := testkit.NewClock(start)
	rc := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rc.Close() })
	remote := introspect.Redis{Client: rc, Timeout: 5 * time.Second}
	writer := newClient(t, ep, clk, func(o *introspect.Options) { o.Remote = remote })
	ctx := context.Background()
	if _, err := writer.Introspect(ctx, "victim"); err != nil {
		t.Fatal(err)
	}
	genuine, err := rc.Get(ctx, remoteKeyOf("victim")).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	fresh := strconv.FormatInt(start.Add(time.Minute).UnixNano(), 10)
	forged := `{"active":true,"sub":"mallory","tenant_id":"acme","roles":["admin"]}`
	for _, tt := range []struct {
		name, token string
		value       []byte
	}{
		{"plain value", "forged-1", []byte(fresh + "\n" + forged)},
		{"genuine value of another token", "forged-2", genuine},
		{"edited answer", "forged-3", bytes.Replace(genuine, []byte(`"alice"`), []byte(`"mallo"`), 1)},
		{"MAC of another key", "forged-4", append([]byte(strings.Repeat("0", 64)+"\n"+fresh+"\n"), forged...)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := rc.Set(ctx, remoteKeyOf(tt.token), tt.value, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			reader := newClient(t, ep, clk, func(o *introspect.Options) { o.Remote = remote })
			calls := ep.calls.Load()
			a, err := reader.Introspect(ctx, tt.token)
			if code(err) != reason.TokenInactive {
				t.Fatalf("answer %+v, err %v: want the endpoint's token-inactive", a, err)
			}
			if s := reader.Stats(); s.RemoteRejected != 1 || s.RemoteHits != 0 || ep.calls.Load() != calls+1 {
				t.Fatalf("stats %+v, %d calls: want one rejected value and a call", s, ep.calls.Load()-calls)
			}
		})
	}
	reader := newClient(t, ep, clk, func(o *introspect.Options) { o.Remote = remote })
	if a, err := reader.Introspect(ctx, "victim"); err != nil || a.Subject != "alice" {
		t.Fatalf("genuine shared answer: %+v %v", a, err)
	}
	if s := reader.Stats(); s.RemoteHits != 1 || s.RemoteRejected != 0 {
		t.Fatalf("stats %+v, want the genuine value served from the shared tier", s)
	}
	other := newClient(t, ep, clk, func(o *introspect.Options) { o.Remote = remote; o.ClientSecret = "another secret" })
	if _, err := other.Introspect(ctx, "victim"); code(err) != reason.IntrospectionUnavailable {
		t.Fatalf("replica with another secret: %v, want its own call (refused by the endpoint)", err)
	}
	if s := other.Stats(); s.RemoteRejected != 1 {
		t.Fatalf("replica with another secret: stats %+v, want the value rejected", s)
	}
}

// An answer whose nbf is still ahead names a token that may not be used
// yet: it counts as inactive until then, as a JWT's nbf refuses it, with
// the clock skew tolerated.
func TestIntrospectNotBefore(t *testing.T) {
	ep := newEndpoint(t, map[string]string{
		"later": `{"active":true,"sub":"alice","tenant_id":"acme","nbf":1800000600,"exp":1800003600}`,
		"skew":  `{"active":true,"sub":"bob","tenant_id":"acme","nbf":1800000010,"exp":1800003600}`,
		"past":  `{"active":true,"sub":"carol","tenant_id":"acme","nbf":1799999000}`,
		"bad":   `{"active":true,"sub":"dave","tenant_id":"acme","nbf":"soon"}`,
	})
	clk := testkit.NewClock(start)
	c := newClient(t, ep, clk, func(o *introspect.Options) {
		o.NegativeTTL = time.Hour // the nbf, not the negative TTL, ends the refusal
		o.Skew = 30 * time.Second
	})
	ctx := context.Background()
	if _, err := c.Introspect(ctx, "later"); code(err) != reason.TokenInactive {
		t.Fatalf("a token whose nbf is ten minutes ahead: err = %v, want token-inactive", err)
	}
	for _, tok := range []string{"skew", "past"} {
		if _, err := c.Introspect(ctx, tok); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
	}
	if _, err := c.Introspect(ctx, "bad"); code(err) != reason.IntrospectionInvalid {
		t.Fatalf("nbf not a number: err = %v, want introspection-invalid", err)
	}
	clk.Advance(9 * time.Minute)
	if _, err := c.Introspect(ctx, "later"); code(err) != reason.TokenInactive {
		t.Fatalf("still before nbf: err = %v, want token-inactive", err)
	}
	clk.Advance(time.Minute)
	if a, err := c.Introspect(ctx, "later"); err != nil || a.Subject != "alice" {
		t.Fatalf("nbf reached: answer %+v, err %v", a, err)
	}
}

// A slow endpoint holds a request no longer than the request lasts: a
// caller whose context ends (Envoy's ext_authz timeout, a client gone)
// gets introspection-unavailable at once, while the call goes on for the
// other requests with the token, which get its answer.
func TestIntrospectStopsWaitingWhenTheRequestEnds(t *testing.T) {
	ep := newEndpoint(t, map[string]string{"tok": `{"active":true,"sub":"alice","tenant_id":"acme"}`})
	ep.gate = make(chan struct{})
	c := newClient(t, ep, testkit.NewClock(start), func(o *introspect.Options) { o.Timeout = time.Minute })
	patient := make(chan error, 1)
	go func() {
		_, err := c.Introspect(context.Background(), "tok")
		patient <- err
	}()
	testkit.Eventually(t, "the first call to reach the endpoint", func() bool { return ep.calls.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	hurried := make(chan error, 1)
	go func() {
		_, err := c.Introspect(ctx, "tok")
		hurried <- err
	}()
	select {
	case err := <-hurried:
		if code(err) != reason.IntrospectionUnavailable {
			t.Errorf("err = %v, want introspection-unavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("a request whose deadline passed still waits for the endpoint after 5s")
	}
	close(ep.gate)
	if err := <-patient; err != nil {
		t.Fatalf("the request without a deadline: %v", err)
	}
	if _, err := c.Introspect(context.Background(), "tok"); err != nil || ep.calls.Load() != 1 {
		t.Fatalf("after the call: err %v, %d calls, want the cached answer", err, ep.calls.Load())
	}
}

// NumericDates past 2262 do not fit Unix nanoseconds: an exp that far
// (a token meant never to expire) is not taken for a past one, nor an
// nbf that far for a past one.
func TestIntrospectFarDates(t *testing.T) {
	ep := newEndpoint(t, map[string]string{
		"far-exp": `{"active":true,"sub":"alice","tenant_id":"acme","exp":9999999999}`,
		"max-exp": `{"active":true,"sub":"bob","tenant_id":"acme","exp":253402300799}`,
		"far-nbf": `{"active":true,"sub":"carol","tenant_id":"acme","nbf":9999999999}`,
		"max-nbf": `{"active":true,"sub":"dave","tenant_id":"acme","nbf":253402300799}`,
	})
	clk := testkit.NewClock(start)
	c := newClient(t, ep, clk, nil)
	ctx := context.Background()
	for _, tok := range []string{"far-exp", "max-exp"} {
		if _, err := c.Introspect(ctx, tok); err != nil {
			t.Errorf("%s: %v, want the active answer", tok, err)
		}
	}
	for _, tok := range []string{"far-nbf", "max-nbf"} {
		if _, err := c.Introspect(ctx, tok); code(err) != reason.TokenInactive {
			t.Errorf("%s: err = %v, want token-inactive", tok, err)
		}
	}
	// The endpoint failing, the far exp still bounds the stale answer.
	clk.Advance(time.Hour)
	ep.setStatus(http.StatusServiceUnavailable)
	if _, err := c.Introspect(ctx, "far-exp"); err != nil {
		t.Errorf("far-exp, endpoint down: %v, want the cached answer", err)
	}
}
