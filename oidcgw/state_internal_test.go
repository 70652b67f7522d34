package oidcgw

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/sharedkey"
)

func testSealer(key byte) *pendingSealer {
	return &pendingSealer{keys: sharedkey.Static(strings.Repeat(string(rune('a'+key%26)), sharedkey.MinLen))}
}

// A sealed sign-in opens, whole, for its own state and under its own
// key only.
func TestSealPending(t *testing.T) {
	ctx := t.Context()
	s := testSealer(0)
	state := randomToken()
	want := newPending("globex", "/orders?page=2", time.Unix(1_800_000_000, 0))
	sealed, err := s.seal(ctx, state, want)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.seal(ctx, state, want); again == sealed {
		t.Fatal("two seals of one sign-in are the same")
	}
	got, ok, err := s.open(ctx, state, sealed)
	if err != nil || !ok || got != want {
		t.Fatalf("open: %+v %v %v, want %+v", got, ok, err, want)
	}
	for _, tt := range []struct {
		name          string
		s             *pendingSealer
		state, sealed string
	}{
		{"another state", s, randomToken(), sealed},
		{"another key", testSealer(1), state, sealed},
		{"truncated", s, state, sealed[:len(sealed)-1]},
		{"empty", s, state, ""},
		{"not base64url", s, state, sealed[:20] + "*" + sealed[21:]},
		{"too long", s, state, strings.Repeat("A", maxStateCookieLen+4)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if p, ok, err := tt.s.open(ctx, tt.state, tt.sealed); ok || err != nil {
				t.Fatalf("opened: %+v %v", p, err)
			}
		})
	}
}

// The state cookie stays within what browsers keep: four sign-ins of
// return_to up to maxReturnToFitsFour all fit; longer ones push out the
// oldest, never the newest.
func TestStateCookieFits(t *testing.T) {
	g := &Gateway{sealer: testSealer(0)}
	g.session.CookieName = strings.Repeat("c", 64)
	g.cfg.PathPrefix = "/auth/oidc"
	provider := strings.Repeat("p", 64)
	for _, tt := range []struct {
		returnTo string
		want     int
	}{
		{"/", maxBoundStates},
		{"/" + strings.Repeat("x", maxReturnToFitsFour-1), maxBoundStates},
		{"/" + strings.Repeat("x", 2047), 1},
	} {
		var cookie *http.Cookie
		var newest string
		for range maxBoundStates + 1 {
			r := httptest.NewRequest(http.MethodGet, "/auth/oidc/login", nil)
			if cookie != nil {
				r.AddCookie(cookie)
			}
			newest = randomToken()
			sealed, err := g.sealer.seal(t.Context(), newest, newPending(provider, tt.returnTo, time.Now()))
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			g.bindState(w, r, newest, sealed)
			cookie = w.Result().Cookies()[0]
		}
		if n := len(cookie.Name) + len(cookie.Value); n > maxStateCookieLen {
			t.Errorf("return_to of %d bytes: the cookie is %d bytes", len(tt.returnTo), n)
		}
		states := parseStateCookie(cookie.Value)
		if len(states) != tt.want || states[0].state != newest {
			t.Errorf("return_to of %d bytes: the cookie keeps %d sign-ins (newest first: %v), want %d", len(tt.returnTo), len(states), states[0].state == newest, tt.want)
		}
	}
}

// The state cookie comes from the browser: whatever it holds, at most
// four entries come out, each with a state of the minted shape.
func FuzzParseStateCookie(f *testing.F) {
	a, b := strings.Repeat("A", 43), strings.Repeat("b", 43)
	for _, s := range []string{"", a, a + "." + b, a + ":x." + b + ":y", "..", "x.y", a + ".%00", a + "::", a + ":" + a} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		states := parseStateCookie(v)
		if len(states) > maxBoundStates {
			t.Fatalf("%d states", len(states))
		}
		for _, s := range states {
			if len(s.state) != 43 || strings.ContainsAny(s.state, ".:=+/") {
				t.Fatalf("state %q is not of the minted shape", s.state)
			}
		}
	})
}

// A sealed sign-in comes back from the browser: whatever it is, opening
// it never panics, and only what the gateway sealed for that state opens,
// unchanged.
func FuzzOpenPending(f *testing.F) {
	s := testSealer(0)
	state := strings.Repeat("S", 43)
	// Fixed, as the seeds are sealed by the process that runs the fuzzer
	// and opened in its workers.
	want := pending{Provider: "default", ReturnTo: "/orders?page=2", Expires: time.Unix(1_800_000_000, 0)}
	want.Verifier[0], want.Nonce[0] = 1, 2
	sealed, err := s.seal(f.Context(), state, want)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(state, sealed)
	f.Add(strings.Repeat("T", 43), sealed)
	f.Add(state, sealed[:len(sealed)/2])
	f.Add(state, "")
	f.Add(state, strings.Repeat("A", 200))
	f.Fuzz(func(t *testing.T, st, v string) {
		p, ok, err := s.open(t.Context(), st, v)
		if err != nil {
			t.Fatal(err)
		}
		if ok && (st != state || p != want) {
			t.Fatalf("opened %+v for state %q", p, st)
		}
	})
}

// Plaintexts come only from the gateway, but the reader must still hold
// to its bounds whatever it is given.
func FuzzUnmarshalPending(f *testing.F) {
	p := newPending("default", "/x", time.Unix(1_800_000_000, 0))
	b, _ := p.marshal()
	f.Add(b)
	f.Add(b[:pendingFixedLen])
	f.Add([]byte{pendingVersion})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := unmarshalPending(b)
		if !ok {
			return
		}
		again, err := p.marshal()
		if err != nil || string(again) != string(b) {
			t.Fatalf("%x read as %+v, written back as %x", b, p, again)
		}
	})
}

// Every login seals a sign-in and every callback opens one.
func BenchmarkSealOpenPending(b *testing.B) {
	s := testSealer(0)
	state := randomToken()
	p := newPending("default", "/orders?page=2", time.Now().Add(StateTTL))
	b.ReportAllocs()
	for b.Loop() {
		sealed, err := s.seal(b.Context(), state, p)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok, _ := s.open(b.Context(), state, sealed); !ok {
			b.Fatal("does not open")
		}
	}
}
