package samlgw

import (
	"context"
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
