package app

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"testing"
)

func TestProxyMode(t *testing.T) {
	s, err := New(Config{Name: "billing", Resource: "invoices", Addr: "127.0.0.1:0", TrustProxyHeaders: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.ln.Close()
	h := s.Handler()
	viewer := map[string]string{"X-Svc-User-Id": "demo-viewer", "X-Svc-Tenant-Id": "demo", "X-Svc-Decision-Id": "d-1"}
	other := map[string]string{"X-Svc-User-Id": "other-admin", "X-Svc-Tenant-Id": "other"}
	tests := []struct {
		name     string
		method   string
		path     string
		headers  map[string]string
		want     int
		wantCode string
		wantItem string
		wantTen  string
	}{
		{"health needs no identity", "GET", "/healthz", nil, 200, "", "", ""},
		{"no identity headers", "GET", "/invoices/1", nil, 401, "identity-missing", "", ""},
		{"no tenant", "GET", "/invoices/1", map[string]string{"X-Svc-User-Id": "x"}, 403, "tenant-missing", "", ""},
		{"seeded item", "GET", "/invoices/7", viewer, 200, "", "7", "demo"},
		{"other tenant sees its own items", "GET", "/invoices/7", other, 200, "", "7", "other"},
		{"missing item", "GET", "/invoices/100000", viewer, 404, "not-found", "", ""},
		{"create", "POST", "/invoices", viewer, 201, "", "101", "demo"},
		{"delete", "DELETE", "/invoices/3", viewer, 204, "", "", ""},
		{"deleted", "GET", "/invoices/3", viewer, 404, "not-found", "", ""},
		{"unsupported method", "PUT", "/invoices", viewer, 405, "method-not-allowed", "", ""},
		{"another collection", "GET", "/orders/1", viewer, 404, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, body)
			}
			if tt.wantCode != "" {
				var e struct {
					Error struct{ Code string } `json:"error"`
				}
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != tt.wantCode {
					t.Fatalf("error body %s, want code %s", body, tt.wantCode)
				}
			}
			if tt.wantItem != "" {
				var a answer
				if err := json.Unmarshal(body, &a); err != nil || a.Item == nil {
					t.Fatalf("answer %s", body)
				}
				if a.Item.ID != tt.wantItem || a.Item.Tenant != tt.wantTen || a.Tenant != tt.wantTen || a.Service != "billing" {
					t.Fatalf("answer %+v item %+v", a, *a.Item)
				}
				if tt.headers["X-Svc-Decision-Id"] != a.DecisionID {
					t.Errorf("decision id %q", a.DecisionID)
				}
			}
		})
	}
}

func TestConfigNeedsOneMode(t *testing.T) {
	for _, cfg := range []Config{
		{Name: "orders", Addr: "127.0.0.1:0"},
		{Name: "orders", Addr: "127.0.0.1:0", Sidecar: "127.0.0.1:1", TrustProxyHeaders: true},
		{Addr: "127.0.0.1:0", TrustProxyHeaders: true},
	} {
		if s, err := New(cfg, slog.New(slog.DiscardHandler)); err == nil {
			s.ln.Close()
			t.Errorf("%+v accepted", cfg)
		}
	}
}
