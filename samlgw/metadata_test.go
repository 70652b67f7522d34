package samlgw

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/samlgw/testidp"
)

// The IdP metadata URL: fetched with a size cap, and while the IdP fails
// the last good copy keeps serving and the status says so.
func TestMetadataURLKeepsLastGoodCopy(t *testing.T) {
	idp, _, err := testidp.LoadOrCreate(filepath.Join("testdata", "idp"), "https://idp.example.com/saml", "https://idp.example.com/saml/sso")
	if err != nil {
		t.Fatal(err)
	}
	var mode atomic.Int32 // 0 good, 1 error, 2 oversized
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		switch mode.Load() {
		case 1:
			http.Error(w, "down", http.StatusBadGateway)
		case 2:
			_, _ = w.Write([]byte(strings.Repeat(" ", MaxMetadataBytes+1)))
		default:
			_, _ = w.Write(idp.Metadata())
		}
	}))
	defer srv.Close()
	m := &metadataSource{url: srv.URL, client: srv.Client(), log: slog.New(slog.DiscardHandler), now: time.Now}
	ctx := context.Background()

	refresh, err := m.fetch(ctx)
	if err != nil {
		t.Fatalf("first fetch: %v", err)
	}
	if refresh < MetadataMinRefresh || refresh > MetadataMaxRefresh {
		t.Errorf("refresh in %s, outside the bounds", refresh)
	}
	if st := m.status(); !st.Loaded || st.Stale || st.EntityID != "https://idp.example.com/saml" || st.Certificates != 1 {
		t.Fatalf("status after a good fetch: %+v", st)
	}
	for _, bad := range []int32{1, 2} {
		mode.Store(bad)
		if _, err := m.fetch(ctx); err == nil {
			t.Fatalf("mode %d: fetch succeeded", bad)
		}
		st := m.status()
		if !st.Loaded || !st.Stale || st.LastError == "" || st.LastAttempt == nil {
			t.Errorf("mode %d: status %+v, want the last good copy, stale, with the error", bad, st)
		}
		if m.current() == nil {
			t.Errorf("mode %d: the last good copy was dropped", bad)
		}
	}
	mode.Store(0)
	if _, err := m.fetch(ctx); err != nil {
		t.Fatal(err)
	}
	if st := m.status(); st.Stale || st.LastError != "" {
		t.Errorf("status after recovery: %+v", st)
	}
}

// withRootAttrs adds attributes to the root element of a metadata document.
func withRootAttrs(t *testing.T, md []byte, attrs string) []byte {
	t.Helper()
	out := strings.Replace(string(md), "<md:EntityDescriptor ", "<md:EntityDescriptor "+attrs+" ", 1)
	if out == string(md) {
		t.Fatal("no EntityDescriptor in the metadata")
	}
	return []byte(out)
}

// The refresh interval follows cacheDuration and validUntil within the
// bounds; a document past its validUntil is refused.
func TestParseIDPMetadataRefreshAndExpiry(t *testing.T) {
	idp, _, err := testidp.LoadOrCreate(filepath.Join("testdata", "idp"), "https://idp.example.com/saml", "https://idp.example.com/saml/sso")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	set := func(inner []byte, attrs string) []byte {
		body := strings.TrimPrefix(string(inner), `<?xml version="1.0" encoding="UTF-8"?>`)
		return []byte(`<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" ` + attrs + `>` + body + `</md:EntitiesDescriptor>`)
	}
	tests := []struct {
		name    string
		doc     []byte
		refresh time.Duration
		err     string
	}{
		{"neither", idp.Metadata(), MetadataDefaultRefresh, ""},
		{"cacheDuration", withRootAttrs(t, idp.Metadata(), `cacheDuration="PT2H"`), 2 * time.Hour, ""},
		{"cacheDuration below the floor", withRootAttrs(t, idp.Metadata(), `cacheDuration="PT1M"`), MetadataMinRefresh, ""},
		{"cacheDuration above the ceiling", withRootAttrs(t, idp.Metadata(), `cacheDuration="P7D"`), MetadataMaxRefresh, ""},
		{"validUntil sooner", withRootAttrs(t, idp.Metadata(), `cacheDuration="PT2H" validUntil="`+at(30*time.Minute)+`"`), 30 * time.Minute, ""},
		{"validUntil passed", withRootAttrs(t, idp.Metadata(), `validUntil="`+at(-time.Minute)+`"`), 0, "expired"},
		{"set validUntil passed", set(idp.Metadata(), `validUntil="`+at(-time.Minute)+`"`), 0, "expired"},
		{"set validUntil sooner", set(idp.Metadata(), `validUntil="`+at(20*time.Minute)+`"`), 20 * time.Minute, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, refresh, err := ParseIDPMetadata(tt.doc, now, nil)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one with %q", err, tt.err)
				}
				return
			}
			if err != nil || got.EntityID != "https://idp.example.com/saml" {
				t.Fatalf("ParseIDPMetadata: %v", err)
			}
			if refresh != tt.refresh {
				t.Errorf("refresh %s, want %s", refresh, tt.refresh)
			}
		})
	}
}

// A fetch that hangs ends at the timeout, and a redirect to plain http
// off loopback is not followed; the last good copy keeps serving.
func TestMetadataFetchBounds(t *testing.T) {
	idp, _, err := testidp.LoadOrCreate(filepath.Join("testdata", "idp"), "https://idp.example.com/saml", "https://idp.example.com/saml/sso")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var mode atomic.Int32 // 0 good, 1 hang, 2 redirect off loopback over http
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case 1:
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case 2:
			http.Redirect(w, r, "http://idp.example.com/metadata", http.StatusFound)
		default:
			_, _ = w.Write(idp.Metadata())
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	m := &metadataSource{url: srv.URL, client: srv.Client(), timeout: 200 * time.Millisecond, log: slog.New(slog.DiscardHandler), now: time.Now}
	ctx := context.Background()
	if _, err := m.fetch(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode int32
		want string
	}{{1, "deadline exceeded"}, {2, "redirect to http://idp.example.com refused"}} {
		mode.Store(tc.mode)
		_, err := m.fetch(ctx)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mode %d: err %v, want one with %q", tc.mode, err, tc.want)
		}
		if st := m.status(); !st.Stale || m.current() == nil {
			t.Errorf("mode %d: status %+v, want the last good copy, stale", tc.mode, st)
		}
	}
}

// FuzzParseIDPMetadata feeds arbitrary documents to the metadata parser,
// with and without a trusted signer: an error or a usable IdP, never a
// panic.
func FuzzParseIDPMetadata(f *testing.F) {
	idp, _, err := testidp.LoadOrCreate(filepath.Join("testdata", "idp"), "https://idp.example.com/saml", "https://idp.example.com/saml/sso")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(idp.Metadata(), false)
	f.Add(idp.Metadata(), true)
	f.Add([]byte(`<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" validUntil="2000-01-01T00:00:00Z"/>`), false)
	now := time.Now()
	f.Fuzz(func(t *testing.T, data []byte, signed bool) {
		var trust []*x509.Certificate
		if signed {
			trust = []*x509.Certificate{idp.Cert}
		}
		got, refresh, err := ParseIDPMetadata(data, now, trust)
		if err != nil {
			return
		}
		if got.EntityID == "" || len(got.Certs) == 0 || refresh < MetadataMinRefresh || refresh > MetadataMaxRefresh {
			t.Fatalf("accepted metadata without an entity id or certificate, or refresh %s out of bounds", refresh)
		}
	})
}

// An IdP down at start: "no copy yet, retrying" rather than a last good
// copy that does not exist, then one Info line once the metadata loads.
func TestMetadataLogsNoCopyYetThenAvailable(t *testing.T) {
	idp, _, err := testidp.LoadOrCreate(filepath.Join("testdata", "idp"), "https://idp.example.com/saml", "https://idp.example.com/saml/sso")
	if err != nil {
		t.Fatal(err)
	}
	var down atomic.Bool
	down.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if down.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		_, _ = w.Write(idp.Metadata())
	}))
	defer srv.Close()
	var logs strings.Builder
	m := &metadataSource{url: srv.URL, client: srv.Client(), log: slog.New(slog.NewTextHandler(&logs, nil)), now: time.Now}
	ctx := context.Background()
	step := func() {
		if _, err := m.fetch(ctx); err != nil {
			m.noteFailure(err, time.Second)
		} else {
			m.noteSuccess()
		}
	}
	step()
	step()
	down.Store(false)
	step()
	step()
	down.Store(true)
	step()
	out := logs.String()
	if n := strings.Count(out, "no copy yet, retrying"); n != 2 {
		t.Errorf("%d no-copy-yet lines, want 2:\n%s", n, out)
	}
	if n := strings.Count(out, "level=INFO msg=\"IdP metadata available; sign-in works\""); n != 1 || !strings.Contains(out, "failed_fetches=2") {
		t.Errorf("%d available lines, want one after 2 failures:\n%s", n, out)
	}
	if n := strings.Count(out, "the last good copy keeps serving"); n != 1 {
		t.Errorf("%d last-good-copy lines, want 1 (the failure after the load):\n%s", n, out)
	}
}
