package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

// methodAttacks are a viewer's DELETE dressed up as a read in every
// header that has ever named the original method of a check. The Go
// client writes a header map's keys as they are, so X_Svc_Method goes
// out with nginx's spelling.
var methodAttacks = []struct {
	name    string
	headers map[string]string
}{
	{"X-Original-Method: GET", map[string]string{"X-Original-Method": "GET"}},
	{"X_Svc_Method: GET", map[string]string{"X_Svc_Method": "GET"}},
	{"x_svc_method: GET", map[string]string{"x_svc_method": "GET"}},
	{"every method header says GET", map[string]string{
		"X-Original-Method": "GET", "X_Svc_Method": "GET", "X-Forwarded-Method": "GET",
		"X-Forwarded-Uri": "/orders/1", "X-Original-URI": "/orders/1",
	}},
}

// sendAs sends method path through the proxy at base with a bearer token
// and the headers as written, and returns the status and body.
func sendAs(t *testing.T, base, method, path, token string, headers map[string]string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers {
		req.Header[k] = []string{v}
	}
	return harness.Do(t, req)
}

// TestNginxMethodAttackShippedConfig: behind the shipped
// deploy/nginx/nginx.conf and the real nginx, a viewer's DELETE is judged
// as the DELETE nginx received, whatever method header the viewer adds:
// 403 role-forbidden, never reaching the application, and audited as
// orders:delete. The viewer's GET passes, so the refusals are the policy's.
func TestNginxMethodAttackShippedConfig(t *testing.T) {
	t.Parallel()
	k, s, up, front := startBehindShippedNginx(t)
	viewer := k.token(t, "u-viewer", "acme", "viewer")

	status, h, body := sendAs(t, front, http.MethodGet, "/orders/1", viewer, nil)
	if status != http.StatusOK {
		t.Fatalf("viewer's GET: %s, want 200", harness.Describe(status, h, body))
	}
	if e := harness.ParseEcho(t, body); e.Method != http.MethodGet || len(e.Header("X_Svc_Method")) != 0 {
		t.Errorf("the application saw %s with X_Svc_Method %q", e.Method, e.Header("X_Svc_Method"))
	}
	for _, a := range methodAttacks {
		t.Run(a.name, func(t *testing.T) {
			hits := up.Hits()
			status, h, body := sendAs(t, front, http.MethodDelete, "/orders/1", viewer, a.headers)
			if status != http.StatusForbidden {
				t.Fatalf("viewer's DELETE with %s: %s, want 403", a.name, harness.Describe(status, h, body))
			}
			if d := parseDeny(t, string(body)); d.Reason != "policy-deny" || !hasReason(d.DenyReasons, "role-forbidden") {
				t.Errorf("viewer's DELETE with %s: %s, want policy-deny role-forbidden", a.name, body)
			}
			if up.Hits() != hits {
				t.Error("the refused DELETE reached the application")
			}
		})
	}
	// Every DELETE was decided as one: the audit has the viewer's
	// orders:delete denials and no read but the GET.
	var reads, deletes int
	deadline := time.Now().Add(10 * time.Second)
	for {
		reads, deletes = 0, 0
		for _, r := range s.AuditRecords(t) {
			switch r["action"] {
			case "orders:read":
				reads++
			case "orders:delete":
				if r["allow"] != false {
					t.Errorf("audited an allowed delete: %v", r)
				}
				deletes++
			}
		}
		if deletes >= len(methodAttacks) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if reads != 1 || deletes != len(methodAttacks) {
		t.Errorf("audit holds %d reads and %d deletes, want 1 and %d", reads, deletes, len(methodAttacks))
	}
}

// TestNginxMethodAttackHandWrittenConfig: nginx's own auth_request
// example sets X-Original-URI and nothing else, so the check cannot know
// the method (the subrequest is a GET) and every header that names one is
// the client's. The sidecar refuses every such check (400
// method-untrusted, sent as 403 to nginx, which answers 403): the
// viewer's disguised DELETE never reaches the application, and neither
// does its GET, which nobody can tell from a DELETE here.
func TestNginxMethodAttackHandWrittenConfig(t *testing.T) {
	t.Parallel()
	k := newKeyring(t)
	s := startSidecar(t, k, nil)
	up := harness.StartUpstream(t)
	px := harness.StartNginxServer(t, func(addr string) string {
		return fmt.Sprintf(`
    server {
        listen %s;
        location / {
            auth_request /auth;
            proxy_pass http://%s;
        }
        location = /auth {
            internal;
            proxy_pass http://%s/check;
            proxy_pass_request_body off;
            proxy_set_header Content-Length "";
            proxy_set_header X-Original-URI $request_uri;
        }
    }`, addr, up.Addr, s.HTTPAddr)
	})
	front := px.URL
	viewer := k.token(t, "u-viewer", "acme", "viewer")

	untrusted := func() int { return strings.Count(s.Stderr.String(), `"reason":"method-untrusted"`) }
	cases := append([]struct {
		name    string
		headers map[string]string
	}{{"no method header", nil}}, methodAttacks...)
	for _, method := range []string{http.MethodDelete, http.MethodGet} {
		for _, a := range cases {
			t.Run(method+" "+a.name, func(t *testing.T) {
				hits, refused := up.Hits(), untrusted()
				status, h, body := sendAs(t, front, method, "/orders/1", viewer, a.headers)
				if status != http.StatusForbidden {
					t.Fatalf("viewer's %s with %s: %s, want nginx's 403", method, a.name, harness.Describe(status, h, body))
				}
				if up.Hits() != hits {
					t.Fatalf("viewer's %s with %s reached the application", method, a.name)
				}
				// The sidecar's own answer: refused as method-untrusted.
				if _, err := s.WaitOutput(t, true, 10*time.Second, func(string) bool { return untrusted() > refused }); err != nil {
					t.Errorf("the sidecar logged no method-untrusted refusal: %v", err)
				}
			})
		}
	}
	// The request nginx sends is the one the sidecar refuses: the same
	// check, sent as nginx sent it but with the method nginx never sets,
	// is the viewer's GET, allowed.
	req, _ := http.NewRequest(http.MethodGet, s.URL("/check"), nil)
	req.Header.Set("Authorization", "Bearer "+viewer)
	req.Header.Set("X-Original-URI", "/orders/1")
	req.Header["X_Svc_Method"] = []string{"GET"}
	if status, h, body := harness.Do(t, req); status != http.StatusOK {
		t.Errorf("the check with X_Svc_Method: GET: %s, want 200", harness.Describe(status, h, body))
	}
}

// TestDocumentedChecksSendTheMethod: every documented curl to /check in
// nginx's form (X-Original-URI) sends X_Svc_Method, without which the
// sidecar refuses it 400 method-untrusted: the README, docs/ (the CLI
// reference is generated from the commands' help) and the shipped
// deploy files.
func TestDocumentedChecksSendTheMethod(t *testing.T) {
	root := harness.ModuleRoot(t)
	files := []string{filepath.Join(root, "README.md")}
	for _, glob := range []string{"docs/*.md", "deploy/*/*.md", "examples/*/*.md", "sdk/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	seen := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "curl") || !strings.Contains(line, "/check") || !strings.Contains(line, "X-Original-URI") {
				continue
			}
			seen++
			if !strings.Contains(line, "X_Svc_Method") {
				t.Errorf("%s:%d: a check in nginx's form without X_Svc_Method (refused method-untrusted):\n%s",
					strings.TrimPrefix(f, root+"/"), i+1, line)
			}
		}
	}
	if seen < 5 {
		t.Fatalf("found only %d documented checks: has the form changed?", seen)
	}
}
