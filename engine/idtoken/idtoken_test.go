package idtoken_test

import (
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/svc-dev/svc/engine/idtoken"
	"github.com/svc-dev/svc/internal/testkit"
)

// clock is a settable time source.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func newMinter(t *testing.T, keyFile string, c *clock) *idtoken.Minter {
	t.Helper()
	m, err := idtoken.New(idtoken.Options{KeyFile: keyFile, TTL: time.Minute, Issuer: "svc-sidecar", Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// verify checks tok against the minter's JWKS as an upstream would.
func verify(t *testing.T, m *idtoken.Minter, tok string, now time.Time) (map[string]any, error) {
	t.Helper()
	doc, err := m.JWKS()
	if err != nil {
		t.Fatal(err)
	}
	return testkit.VerifyJWT(doc, tok, jwt.WithClock(jwt.ClockFunc(func() time.Time { return now })))
}

func TestTokenClaims(t *testing.T) {
	c := newClock()
	m := newMinter(t, testkit.TokenKeyFile(t), c)
	tok, err := m.Token("bearer-1", idtoken.Claims{Subject: "alice", TenantID: "acme", Roles: []string{"viewer", "editor"},
		Kind: "api_key", Audience: "orders", DecisionID: "d-1"})
	if err != nil {
		t.Fatal(err)
	}
	claims, err := verify(t, m, tok, c.now())
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	got := map[string]any{}
	for _, k := range []string{"sub", "tenant_id", "roles", "kind", "aud", "decision_id", "iss"} {
		got[k] = claims[k]
	}
	want := map[string]any{"sub": "alice", "tenant_id": "acme", "roles": []any{"viewer", "editor"}, "kind": "api_key",
		"aud": []string{"orders"}, "decision_id": "d-1", "iss": "svc-sidecar"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claims (-want +got):\n%s", diff)
	}
	exp, _ := claims["exp"].(time.Time)
	if d := exp.Sub(c.now().Truncate(time.Second)); d != time.Minute {
		t.Errorf("lifetime = %s, want 1m", d)
	}
	if _, err := verify(t, m, tok, c.now().Add(2*time.Minute)); err == nil {
		t.Error("an expired token verified")
	}

	// Without a kind and an audience, neither claim is present.
	tok, err = m.Token("bearer-2", idtoken.Claims{Subject: "bob", TenantID: "acme", DecisionID: "d-2"})
	if err != nil {
		t.Fatal(err)
	}
	claims, err = verify(t, m, tok, c.now())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := claims["kind"]; ok {
		t.Errorf("kind present in %v", claims)
	}
	if _, ok := claims["aud"]; ok {
		t.Errorf("aud present in %v", claims)
	}
}

func TestTokenReuse(t *testing.T) {
	c := newClock()
	m := newMinter(t, testkit.TokenKeyFile(t), c)
	cl := idtoken.Claims{Subject: "alice", TenantID: "acme", Roles: []string{"viewer"}, Audience: "orders", DecisionID: "d-1"}
	first, _ := m.Token("cred", cl)

	cases := []struct {
		name    string
		cred    string
		change  func(*idtoken.Claims)
		advance time.Duration
		reused  bool
	}{
		{name: "same credential and audience, another decision", cred: "cred", change: func(c *idtoken.Claims) { c.DecisionID = "d-2" }, reused: true},
		{name: "another audience", cred: "cred", change: func(c *idtoken.Claims) { c.Audience = "billing" }},
		{name: "another credential", cred: "cred-2"},
		{name: "other roles", cred: "cred", change: func(c *idtoken.Claims) { c.Roles = []string{"admin"} }},
		{name: "less than half the lifetime left", cred: "cred", advance: 31 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.advance(tc.advance)
			defer c.advance(-tc.advance)
			cl2 := cl
			if tc.change != nil {
				tc.change(&cl2)
			}
			tok, err := m.Token(tc.cred, cl2)
			if err != nil {
				t.Fatal(err)
			}
			if (tok == first) != tc.reused {
				t.Errorf("reused = %v, want %v", tok == first, tc.reused)
			}
		})
	}
	st := m.Status()
	if st.Reused != 1 || st.Minted != 5 {
		t.Errorf("minted, reused = %d, %d; want 5, 1", st.Minted, st.Reused)
	}
}

// Rotation: a new key file signs from the reload on; the replaced key
// stays published until the last token it signed has expired.
func TestRotation(t *testing.T) {
	c := newClock()
	path := testkit.TokenKeyFile(t)
	m := newMinter(t, path, c)
	cl := idtoken.Claims{Subject: "alice", TenantID: "acme", DecisionID: "d-1"}
	old, _ := m.Token("cred", cl)
	oldKID := m.Status().KeyID

	next, err := os.ReadFile(testkit.TokenKeyFile(t))
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, path, next)
	if changed, err := m.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	st := m.Status()
	if st.KeyID == oldKID || st.Published != 2 {
		t.Fatalf("after rotation: kid %s (old %s), %d keys published; want a new kid and 2 keys", st.KeyID, oldKID, st.Published)
	}
	fresh, _ := m.Token("cred", cl)
	if fresh == old {
		t.Error("the token of the replaced key was reused")
	}
	for _, tok := range []string{old, fresh} {
		if _, err := verify(t, m, tok, c.now()); err != nil {
			t.Errorf("verify after rotation: %v", err)
		}
	}
	c.advance(time.Minute + 2*time.Second)
	if n := m.Status().Published; n != 1 {
		t.Errorf("%d keys published once the old key's tokens expired, want 1", n)
	}
	doc, _ := m.JWKS()
	if strings.Contains(string(doc), oldKID) {
		t.Error("the expired key is still published")
	}

	// A file that does not parse is refused; the keys stay.
	testkit.WriteFile(t, path, []byte("not a key"))
	if _, err := m.Reload(); err == nil {
		t.Fatal("a bad key file was accepted")
	}
	st = m.Status()
	if st.Refusals != 1 || st.LastError == "" || strings.Contains(st.LastError, "not a key") {
		t.Errorf("status after a refusal: %+v", st)
	}
	if _, err := m.Token("cred-3", cl); err != nil {
		t.Errorf("Token after a refused reload: %v", err)
	}
}

func TestNewRefusesBadFile(t *testing.T) {
	p := t.TempDir() + "/k.pem"
	testkit.WriteFile(t, p, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
	for _, f := range []string{p, p + ".missing"} {
		if _, err := idtoken.New(idtoken.Options{KeyFile: f, TTL: time.Minute}); err == nil {
			t.Errorf("New(%s) accepted", f)
		}
	}
}

func BenchmarkTokenReused(b *testing.B) {
	m, err := idtoken.New(idtoken.Options{KeyFile: testkit.TokenKeyFile(b), TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	cl := idtoken.Claims{Subject: "alice", TenantID: "acme", Roles: []string{"viewer"}, Audience: "orders", DecisionID: "d"}
	cred := strings.Repeat("x", 800)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Token(cred, cl); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTokenMinted(b *testing.B) {
	m, err := idtoken.New(idtoken.Options{KeyFile: testkit.TokenKeyFile(b), TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	cl := idtoken.Claims{Subject: "alice", TenantID: "acme", Roles: []string{"viewer"}, Audience: "orders", DecisionID: "d"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		cl.Audience = "orders-" + string(rune('a'+i%26)) + strings.Repeat("x", i%7)
		if _, err := m.Token("cred", cl); err != nil {
			b.Fatal(err)
		}
	}
}
