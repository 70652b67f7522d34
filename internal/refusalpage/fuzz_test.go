package refusalpage

import (
	"strings"
	"testing"
)

// FuzzAccept holds the negotiation to its rules on any Accept header: no
// panic; a browser never also wants JSON; text/html must be named for a
// browser, application/json for JSON; and "*/*" added at a lower weight
// than everything named changes nothing.
func FuzzAccept(f *testing.F) {
	for _, s := range []string{
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "*/*", "", "application/json",
		"text/html;q=0.5, application/json;q=0.9", "text/html;q=bogus", ";;;,,", "text/html;q=NaN",
		"application/*;q=0.3, text/html;q=0.2", "TEXT/HTML;Q=1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		html, json := PrefersHTML(accept), WantsJSON(accept)
		if html && json {
			t.Fatalf("%q: both a browser and a JSON client", accept)
		}
		lower := strings.ToLower(accept)
		if html && !strings.Contains(lower, "text/html") {
			t.Fatalf("%q: a browser without text/html", accept)
		}
		if json && !strings.Contains(lower, "application/json") {
			t.Fatalf("%q: JSON without application/json", accept)
		}
	})
}

// FuzzRender: any page content renders as one line of printable ASCII
// that holds no tag the data brought.
func FuzzRender(f *testing.F) {
	f.Add("Bonjour <b>été</b>\n", "a<script>", "d'1", "/auth/saml/login?return_to=%2F")
	f.Add("\x00\xff\xfe", "\u2028", "\r\n", "javascript:alert(1)")
	f.Fuzz(func(t *testing.T, msg, reason, decision, link string) {
		page := string(Render(Page{Status: 401, Message: msg, Reason: reason, DecisionID: decision, SignInURL: link}))
		for i := 0; i < len(page); i++ {
			if page[i] < 0x20 || page[i] >= 0x7f {
				t.Fatalf("byte %#x at %d", page[i], i)
			}
		}
		// The same page with plain data has as many tags.
		plain := Page{Status: 401, Message: "m", Reason: "r"}
		if decision != "" {
			plain.DecisionID = "d"
		}
		if link != "" {
			plain.SignInURL = "/x"
		}
		if got, want := strings.Count(page, "<"), strings.Count(string(Render(plain)), "<"); got != want {
			t.Fatalf("the data added markup (%d tags, want %d): %s", got, want, page)
		}
	})
}
