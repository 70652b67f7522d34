package sidecar

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// exchange writes raw on a new connection to addr and reads answers
// until the connection ends or want answers are read, then whether the
// server closed the connection after them. Each answer is its status,
// the headers a proxy acts on and its body, the decision ID (which
// differs from one decision to the next) replaced by "ID".
func exchange(t *testing.T, addr, raw string, want int) (answers []string, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for len(answers) < want {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answers = append(answers, describeAnswer(resp, body))
	}
	// The server closes a connection it is done with at once; one kept
	// alive stays open past a short wait.
	_ = c.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	_, err = br.ReadByte()
	var ne net.Error
	closed = !(err != nil && errorsAs(err, &ne) && ne.Timeout())
	return answers, closed
}

func errorsAs(err error, ne *net.Error) bool {
	e, ok := err.(net.Error)
	if ok {
		*ne = e
	}
	return ok
}

var decisionIDs = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9A-HJKMNP-TV-Z]{26}`)

func describeAnswer(resp *http.Response, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d", resp.StatusCode)
	var keys []string
	for k := range resp.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if k == "Date" {
			continue
		}
		fmt.Fprintf(&b, "\n%s: %q", k, resp.Header[k])
	}
	fmt.Fprintf(&b, "\n\n%s", body)
	return decisionIDs.ReplaceAllString(b.String(), "ID")
}

// TestFrontAnswersAsNetHTTP sends the same raw requests to the sidecar's
// HTTP listener, whose front answers the checks itself, and to net/http
// serving the sidecar's handler alone, as the listener did before the
// front: every answer (status, headers, body) and whether the
// connection stays open must be the same.
func TestFrontAnswersAsNetHTTP(t *testing.T) {
	idp := newTestIdP(t)
	r := startSidecar(t, testConfig(idp))
	if r.front == nil {
		t.Fatal("the plain-text HTTP listener has no front")
	}
	std := httptest.NewUnstartedServer(r.http.Handler)
	std.Config.ReadHeaderTimeout = r.http.ReadHeaderTimeout
	std.Config.MaxHeaderBytes = r.http.MaxHeaderBytes
	std.Start()
	t.Cleanup(std.Close)
	viewer := idp.token(t, "u-viewer", testTenant, "viewer")
	admin := idp.token(t, "u-admin", testTenant, "admin")
	req := func(lines ...string) string { return strings.Join(lines, "\r\n") + "\r\n\r\n" }
	caddy := func(method, uri string, extra ...string) string {
		return req(append([]string{"GET /check HTTP/1.1", "Host: svc", "Authorization: Bearer " + viewer,
			"X-Forwarded-Method: " + method, "X-Forwarded-Uri: " + uri, "X-Forwarded-Host: shop.example",
			"X-Forwarded-Proto: https", "X-Forwarded-For: 203.0.113.7"}, extra...)...)
	}
	big := strings.Repeat("a", 20<<10)
	huge := strings.Repeat("a", 70<<10)
	tests := []struct {
		name string
		raw  string
		n    int  // answers expected
		std  bool // net/http answers (some of) them
	}{
		{"caddy allowed", caddy("GET", "/orders/7"), 1, false},
		{"caddy denied", caddy("DELETE", "/orders/7"), 1, false},
		{"caddy without a token", req("GET /check HTTP/1.1", "Host: svc", "X-Forwarded-Method: GET", "X-Forwarded-Uri: /orders/7"), 1, false},
		{"caddy with a bad token", req("GET /check HTTP/1.1", "Host: svc", "Authorization: Bearer x.y.z", "X-Forwarded-Method: GET", "X-Forwarded-Uri: /orders/7"), 1, false},
		{"nginx", req("GET /check HTTP/1.1", "Host: svc", "Authorization: Bearer "+admin, "X-Original-URI: /orders/7", "X_Svc_Method: DELETE"), 1, false},
		{"nginx underscore name in lower case", req("GET /check HTTP/1.1", "Host: svc", "Authorization: Bearer "+admin, "X-Original-URI: /orders/7", "x_svc_method: DELETE"), 1, false},
		{"nginx X-Original-Method not trusted", req("GET /check HTTP/1.1", "Host: svc", "Authorization: Bearer "+admin, "X-Original-URI: /orders/7", "X-Original-Method: GET"), 1, false},
		{"methods disagree", req("GET /check HTTP/1.1", "Host: svc", "Authorization: Bearer "+viewer, "X-Original-URI: /orders/7", "X_Svc_Method: DELETE", "X-Forwarded-Method: GET"), 1, false},
		{"duplicate URI headers, the first wins", caddy("GET", "/orders/7", "X-Forwarded-Uri: /admin"), 1, false},
		{"duplicate methods, the first wins", caddy("DELETE", "/orders/7", "X-Forwarded-Method: GET"), 1, false},
		{"duplicate empty first", req("GET /check HTTP/1.1", "Host: svc", "Authorization: Bearer "+viewer, "X-Forwarded-Method: GET", "X-Forwarded-Uri:", "X-Forwarded-Uri: /orders/7"), 1, false},
		{"duplicate authorization", caddy("GET", "/orders/7", "Authorization: Bearer "+admin), 1, false},
		{"names in any case", req("GET /check HTTP/1.1", "host: svc", "AUTHORIZATION: Bearer "+viewer, "x-forwarded-method: GET", "X-FORWARDED-URI: /orders/7"), 1, false},
		{"invalid UTF-8 in the URI", caddy("GET", "/orders/\xff\xfe"), 1, false},
		{"invalid UTF-8 in another header", caddy("GET", "/orders/7", "X-Note: \xc3\x28"), 1, false},
		{"control byte in a value", caddy("GET", "/orders/7", "X-Note: a\x01b"), 1, true},
		{"invalid header name", caddy("GET", "/orders/7", "X Note: a"), 1, true},
		{"folded header", caddy("GET", "/orders/7", "X-Note: a", " b"), 1, true},
		{"padded values", caddy("GET", "/orders/7", "X-Note: \t a b \t"), 1, false},
		{"large header", caddy("GET", "/orders/7", "X-Big: "+big), 1, true},
		{"too large header", caddy("GET", "/orders/7", "X-Big: "+huge), 1, true},
		{"no Host", req("GET /check HTTP/1.1", "Authorization: Bearer "+viewer, "X-Forwarded-Method: GET", "X-Forwarded-Uri: /orders/7"), 1, true},
		{"two Hosts", caddy("GET", "/orders/7", "Host: other"), 1, true},
		{"HTTP/1.0", strings.Replace(caddy("GET", "/orders/7"), "HTTP/1.1", "HTTP/1.0", 1), 1, true},
		{"HEAD", strings.Replace(caddy("GET", "/orders/7"), "GET /check", "HEAD /check", 1), 1, true},
		{"absolute form", strings.Replace(caddy("GET", "/orders/7"), "GET /check", "GET http://svc/check", 1), 1, true},
		{"Connection: close", caddy("GET", "/orders/7", "Connection: close"), 1, false},
		{"Connection: keep-alive", caddy("GET", "/orders/7", "Connection: keep-alive"), 1, false},
		{"Content-Length 0", caddy("GET", "/orders/7", "Content-Length: 0"), 1, false},
		{"a body", strings.TrimSuffix(caddy("GET", "/orders/7", "Content-Length: 5"), "") + "hello", 1, true},
		{"Pragma", caddy("GET", "/orders/7", "Pragma: no-cache"), 1, false},
		{"query on /check", strings.Replace(caddy("GET", "/orders/7"), "/check", "/check?x=1", 1), 1, false},
		{"/check/ is not a check", strings.Replace(caddy("GET", "/orders/7"), "/check", "/check/", 1), 1, true},
		{"envoy", req("GET /check/envoy/orders/7?page=2 HTTP/1.1", "Host: svc", "Authorization: Bearer "+viewer), 1, false},
		{"envoy DELETE", req("DELETE /check/envoy/orders/7 HTTP/1.1", "Host: svc", "Authorization: Bearer "+viewer), 1, false},
		{"envoy encoded path", req("GET /check/envoy/orders/%37 HTTP/1.1", "Host: svc", "Authorization: Bearer "+viewer), 1, true},
		{"envoy dot segments", req("GET /check/envoy/a/../orders/7 HTTP/1.1", "Host: svc", "Authorization: Bearer "+viewer), 1, true},
		{"envoy forwarded host", req("GET /check/envoy/orders/7 HTTP/1.1", "Host: svc", "X-Forwarded-Host: shop.example", "X-Forwarded-Host: other", "Authorization: Bearer "+viewer), 1, false},
		{"pipelined checks", caddy("GET", "/orders/7") + caddy("DELETE", "/orders/7") + caddy("GET", "/orders/8"), 3, false},
		{"a check then the API", caddy("GET", "/orders/7") + req("GET /healthz HTTP/1.1", "Host: 127.0.0.1") + caddy("GET", "/orders/8"), 3, true},
		{"the API then a check", req("GET /healthz HTTP/1.1", "Host: 127.0.0.1") + caddy("GET", "/orders/7"), 2, true},
		{"a check then a refused read", caddy("GET", "/orders/7") + req("GET /v1/status HTTP/1.1", "Host: evil.example"), 2, true},
		{"garbage", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", 1, true},
		{"request line only", "GET /check HTTP/1.1\r\n\r\n", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, wantClosed := exchange(t, std.Listener.Addr().String(), tt.raw, tt.n)
			before := r.front.handedOver.Load()
			got, gotClosed := exchange(t, r.HTTPAddr().String(), tt.raw, tt.n)
			if handed := r.front.handedOver.Load() > before; handed != tt.std {
				t.Errorf("connection handed to net/http: %v, want %v", handed, tt.std)
			}
			if len(want) != tt.n && tt.name != "garbage" {
				t.Fatalf("net/http gave %d answers, want %d: %q", len(want), tt.n, want)
			}
			for i := range max(len(want), len(got)) {
				var w, g string
				if i < len(want) {
					w = want[i]
				}
				if i < len(got) {
					g = got[i]
				}
				if w != g {
					t.Errorf("answer %d:\nfront:\n%s\nnet/http:\n%s", i+1, g, w)
				}
			}
			if gotClosed != wantClosed {
				t.Errorf("connection closed: front %v, net/http %v", gotClosed, wantClosed)
			}
		})
	}
}
