package refusalpage

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPrefersHTML(t *testing.T) {
	for _, tt := range []struct {
		accept     string
		html, json bool
	}{
		{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8", true, false}, // Chrome
		{"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", true, false},                       // Firefox
		{"", false, false},
		{"*/*", false, false},
		{"application/json", false, true},
		{"application/json, text/plain, */*", false, true}, // axios
		{"text/html, application/json", true, false},
		{"application/json;q=0.9, text/html;q=0.9", true, false},
		{"text/html;q=0.5, application/json;q=0.9", false, true},
		{"text/html;q=0.5, application/*;q=0.9", false, false},
		{"text/html;q=0.5, */*", false, false},
		{"text/html;q=0.5, application/json;q=0.1, */*", true, false},
		{"text/html;q=0", false, false},
		{"text/html;q=0, application/json", false, true},
		{"application/json;q=0", false, false},
		{"text/*", false, false},
		{"TEXT/HTML ; Q=0.8 , */*;q=0.9", false, false},
		{"TEXT/HTML ; Q=0.8 , application/json;q=0.7", true, false},
		{"text/html;q=bogus", false, false},
		{"text/html;q=2", false, false},
		{"text/html;level=1;q=0.7, application/json;q=0.6", true, false},
		{",,;;=,text/html", true, false},
	} {
		if got := PrefersHTML(tt.accept); got != tt.html {
			t.Errorf("PrefersHTML(%q) = %t, want %t", tt.accept, got, tt.html)
		}
		if got := WantsJSON(tt.accept); got != tt.json {
			t.Errorf("WantsJSON(%q) = %t, want %t", tt.accept, got, tt.json)
		}
	}
}

func TestRenderEscapesAndStaysOneASCIILine(t *testing.T) {
	page := string(Render(Page{
		Status: 401, Message: "Bonjour <b>été</b>\n\"x\"", Reason: "a<script>alert(1)</script>",
		DecisionID: "d'1&2", SignInURL: "/auth/saml/login?return_to=%2Fa%3Fb%3D1", SignInText: "Sign <in>",
		Why: []string{"role-forbidden: <viewer>", "plan-required"},
	}))
	for _, bad := range []string{"<script>", "<b>", "\n", "d'1&2", "Sign <in>"} {
		if strings.Contains(page, bad) {
			t.Errorf("page holds %q unescaped: %s", bad, page)
		}
	}
	for _, want := range []string{
		"<title>401 Unauthorized</title>", "&lt;script&gt;", "&lt;b&gt;&#233;t&#233;&lt;/b&gt;", "&#10;",
		`href="/auth/saml/login?return_to=%2Fa%3Fb%3D1"`, "d&#39;1&amp;2", "Sign &lt;in&gt;",
		"<dt>Why</dt><dd><code>role-forbidden: &lt;viewer&gt;</code><br><code>plan-required</code></dd>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q: %s", want, page)
		}
	}
	for i := 0; i < len(page); i++ {
		if page[i] < 0x20 || page[i] >= 0x7f {
			t.Fatalf("byte %#x at %d: the page must be one line of printable ASCII", page[i], i)
		}
	}
	if strings.Contains(page, "http") || strings.Contains(page, "src=") {
		t.Errorf("page refers to outside assets: %s", page)
	}
}

func TestRenderLinkOnlyWhenGivenAndSafe(t *testing.T) {
	if page := string(Render(Page{Status: 403, Message: "no", Reason: "policy-deny"})); strings.Contains(page, "<a ") {
		t.Errorf("page without SignInURL has a link: %s", page)
	}
	// html/template refuses a javascript: URL even if one were passed.
	page := string(Render(Page{Status: 401, Message: "m", Reason: "r", SignInURL: "javascript:alert(1)"}))
	if strings.Contains(page, "javascript:") {
		t.Errorf("javascript: URL in href: %s", page)
	}
	if page := string(Render(Page{Status: 499})); !strings.Contains(page, "<title>499 Error</title>") {
		t.Errorf("unknown status: %s", page)
	}
}

func TestWrite(t *testing.T) {
	w := httptest.NewRecorder()
	Write(w, Page{Status: http.StatusNotFound, Message: "m", Reason: "saml-not-found"})
	h := w.Header()
	if w.Code != 404 || h.Get("Content-Type") != ContentType || h.Get("Content-Security-Policy") != ContentSecurityPolicy ||
		h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Cache-Control") != "no-store" || h.Get("Content-Length") == "" {
		t.Errorf("Write: %d %v", w.Code, h)
	}
}
