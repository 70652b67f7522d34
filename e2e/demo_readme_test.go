package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
)

// The walkthrough of the local mesh demo (docs/demo.md), steps 1 and 2: the
// token commands and the calls through the front proxy with the answers
// the README shows.
var (
	readmeToken = regexp.MustCompile(`(\w+)=\$\(curl -s -u ([^:\s]+):(\S+) -d grant_type=client_credentials\s+-d resource=(\S+) http://127\.0\.0\.1:9400/token \| jq -r \.access_token\)`)
	readmeCall  = regexp.MustCompile(`^curl -s(i?) (?:-X (\w+) )?-H "Authorization: Bearer ([^"]+)" http://127\.0\.0\.1:8080(\S+)$`)
	jsonField   = regexp.MustCompile(`"(subject|tenant|reason|deny_reasons)":("[^"]*"|\[[^\]]*\])`)
)

// readmeWalkthrough returns the text of docs/demo.md's walkthrough from step
// 1 to step 3, with shell line continuations joined.
func readmeWalkthrough(t *testing.T) string {
	t.Helper()
	return regexp.MustCompile(`\\\n\s*`).ReplaceAllString(demoDocSteps(t, "**1. Get a token.**", "**3. Sign in in a browser"), " ")
}

// demoDocSteps returns the text of docs/demo.md from the step starting
// with from up to the one starting with to.
func demoDocSteps(t *testing.T, from, to string) string {
	t.Helper()
	raw := repoFile(t, "docs", "demo.md")
	s := string(raw)
	start := strings.Index(s, from)
	end := strings.Index(s, to)
	if start < 0 || end < start {
		t.Fatalf("docs/demo.md: no walkthrough from %q to %q", from, to)
	}
	return s[start:end]
}

// checkReadmeWalkthrough runs the README's token commands against the
// demo's OpenID provider and its calls through the front proxy, and
// requires the status, the JSON fields and the WWW-Authenticate the
// README shows for each.
func checkReadmeWalkthrough(t *testing.T, m demoMesh) {
	t.Helper()
	text := readmeWalkthrough(t)
	vars := map[string]string{}
	for _, c := range readmeToken.FindAllStringSubmatch(text, -1) {
		form := url.Values{"grant_type": {"client_credentials"}, "resource": {c[4]}}
		req, _ := http.NewRequest(http.MethodPost, m.idp.TokenURL, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(c[2], c[3])
		status, h, body := harness.Do(t, req)
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &tok) != nil || tok.AccessToken == "" {
			t.Fatalf("README token command for %s: %s", c[2], harness.Describe(status, h, body))
		}
		vars[c[1]] = tok.AccessToken
	}
	if len(vars) < 2 {
		t.Fatalf("README: %d token commands, want one for tenant demo and one for another tenant", len(vars))
	}

	lines := strings.Split(text, "\n")
	calls := 0
	for i, line := range lines {
		c := readmeCall.FindStringSubmatch(strings.TrimSpace(line))
		if c == nil {
			continue
		}
		calls++
		method := c[2]
		if method == "" {
			method = http.MethodGet
		}
		token := c[3]
		if v, ok := strings.CutPrefix(token, "$"); ok {
			if token = vars[v]; token == "" {
				t.Fatalf("README: %s uses $%s, which no token command sets", line, v)
			}
		}
		// The answer the README shows: the comment lines after the command.
		wantStatus, wantHeader, statusShown := 200, "", false
		var wantFields []string
		for _, next := range lines[i+1:] {
			shown, ok := strings.CutPrefix(strings.TrimSpace(next), "# ")
			if !ok {
				break
			}
			switch {
			case strings.HasPrefix(shown, "HTTP/1.1 "):
				if _, err := fmt.Sscanf(shown, "HTTP/1.1 %d", &wantStatus); err != nil {
					t.Fatalf("README: %q: %v", shown, err)
				}
				statusShown = true
			case strings.HasPrefix(strings.ToLower(shown), "www-authenticate: "):
				wantHeader = shown[len("www-authenticate: "):]
			case strings.HasPrefix(shown, "{"):
				wantFields = jsonField.FindAllString(shown, -1)
				// A denial shown without its status line (curl -s) is a 403.
				if strings.Contains(shown, `"allow":false`) && c[1] == "" {
					wantStatus = http.StatusForbidden
				}
			}
		}
		req, _ := http.NewRequest(method, m.front.URL+c[4], nil)
		req.Header.Set("Authorization", "Bearer "+token)
		status, h, body := harness.Do(t, req)
		if status != wantStatus {
			t.Errorf("README %q: %s, want status %d", line, harness.Describe(status, h, body), wantStatus)
		}
		if wantHeader != "" && h.Get("WWW-Authenticate") != wantHeader {
			t.Errorf("README %q: WWW-Authenticate %q, want %q", line, h.Get("WWW-Authenticate"), wantHeader)
		}
		if len(wantFields) == 0 && !statusShown {
			t.Errorf("README %q shows no answer", line)
		}
		for _, f := range wantFields {
			if !strings.Contains(string(body), f) {
				t.Errorf("README %q: body %s lacks %s", line, body, f)
			}
		}
	}
	if calls < 4 {
		t.Errorf("README: %d calls through the front proxy, want the allowed call and three denials", calls)
	}
}

// readmeSignIn is a row of the table of docs/demo.md's step 3: a sign-in
// in the browser, from the page opened to what is seen on it.
type readmeSignIn struct {
	// signIn is the provider's kind, "OpenID Connect" or "SAML".
	signIn string
	// path is the page opened on the front proxy.
	path string
	// link is the text of the sign-in page's link that is clicked.
	link string
	// user is the user clicked on the provider's page.
	user string
	// want are the texts seen on the page once signed in.
	want []string
}

var (
	readmeSignInRow = regexp.MustCompile(`^\| ([^|]+) \| <http://localhost:8080(/[^>]*)> \| ([^|]+) \| ` + "`" + `(\w+)` + "`" + ` \| ([^|]+) \|$`)
	codeSpan        = regexp.MustCompile("`([^`]+)`")
)

// readmeSignIns returns the sign-ins of docs/demo.md's step 3, one per
// provider.
func readmeSignIns(t *testing.T) []readmeSignIn {
	t.Helper()
	var out []readmeSignIn
	for _, line := range strings.Split(demoDocSteps(t, "**3. Sign in in a browser", "**4. "), "\n") {
		m := readmeSignInRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		r := readmeSignIn{signIn: m[1], path: m[2], link: strings.TrimSpace(m[3]), user: m[4]}
		for _, c := range codeSpan.FindAllStringSubmatch(m[5], -1) {
			r.want = append(r.want, c[1])
		}
		if len(r.want) == 0 {
			t.Fatalf("docs/demo.md: the sign-in %q shows nothing", line)
		}
		out = append(out, r)
	}
	kinds := map[string]bool{}
	for _, r := range out {
		kinds[r.signIn] = true
	}
	if len(out) != 2 || !kinds["OpenID Connect"] || !kinds["SAML"] {
		t.Fatalf("docs/demo.md step 3: sign-ins %+v, want one with OpenID Connect and one with SAML", out)
	}
	return out
}
