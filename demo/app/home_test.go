package app

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHomePage(t *testing.T) {
	s, err := New(Config{Name: "orders", Addr: "127.0.0.1:0", TrustProxyHeaders: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer s.ln.Close()
	h := s.Handler()
	get := func(method string, headers map[string]string) (int, string, string, string) {
		req := httptest.NewRequest(method, HomePath, nil)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body, _ := io.ReadAll(rec.Body)
		return rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Cache-Control"), string(body)
	}

	t.Run("signed in", func(t *testing.T) {
		code, ctype, cache, body := get("GET", map[string]string{
			"X-Svc-User-Id": "dana@demo.example", "X-Svc-Tenant-Id": "demo",
			"X-Svc-Roles": "viewer,billing", "X-Svc-Decision-Id": "d-42",
		})
		if code != 200 || ctype != "text/html; charset=utf-8" || cache != "no-store" {
			t.Fatalf("%d %q %q: %s", code, ctype, cache, body)
		}
		for _, want := range []string{
			`<dd id="subject">dana@demo.example</dd>`, `<dd id="tenant">demo</dd>`,
			`<dd id="roles"><code>viewer</code>, <code>billing</code></dd>`, `<dd id="decision">d-42</dd>`,
			`href="/orders"`, `href="/invoices"`, `<a id="logout" href="/auth/saml/logout">Sign out</a>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("page lacks %s:\n%s", want, body)
			}
		}
		if strings.Contains(body, "<script") || strings.Contains(body, "src=") {
			t.Errorf("page is not self-contained:\n%s", body)
		}
	})

	t.Run("values are escaped", func(t *testing.T) {
		_, _, _, body := get("GET", map[string]string{
			"X-Svc-User-Id": `<script>alert(1)</script>`, "X-Svc-Tenant-Id": `"><img src=x>`,
			"X-Svc-Roles": `<b>admin</b>`,
		})
		for _, bad := range []string{"<script>alert", `"><img`, "<b>admin"} {
			if strings.Contains(body, bad) {
				t.Errorf("page carries %s unescaped:\n%s", bad, body)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("subject not shown escaped:\n%s", body)
		}
	})

	t.Run("no tenant, no roles", func(t *testing.T) {
		code, _, _, body := get("GET", map[string]string{"X-Svc-User-Id": "nora@example.com"})
		if code != 200 || !strings.Contains(body, `<dd id="tenant">(none)</dd>`) || !strings.Contains(body, `<dd id="roles">(none)</dd>`) {
			t.Fatalf("%d:\n%s", code, body)
		}
	})

	t.Run("did not pass the sidecar", func(t *testing.T) {
		code, _, _, body := get("GET", nil)
		if code != 401 || !strings.Contains(body, "identity-missing") {
			t.Fatalf("%d %s, want 401 identity-missing", code, body)
		}
	})

	t.Run("head", func(t *testing.T) {
		code, ctype, _, body := get("HEAD", map[string]string{"X-Svc-User-Id": "dana@demo.example"})
		if code != 200 || ctype != "text/html; charset=utf-8" || body != "" {
			t.Fatalf("%d %q %q", code, ctype, body)
		}
	})

	t.Run("read only", func(t *testing.T) {
		if code, _, _, _ := get("POST", map[string]string{"X-Svc-User-Id": "dana@demo.example"}); code != 405 {
			t.Fatalf("POST %s: %d, want 405", HomePath, code)
		}
	})
}
