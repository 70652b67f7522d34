package envoy

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/internal/refusalpage"
)

func TestLowerKeys(t *testing.T) {
	for k, hk := range lowerKeys {
		if k != http.CanonicalHeaderKey(k) {
			t.Errorf("key %q is not canonical (%q)", k, http.CanonicalHeaderKey(k))
		}
		if hk.lower != strings.ToLower(k) {
			t.Errorf("lowerKeys[%q].lower = %q, want %q", k, hk.lower, strings.ToLower(k))
		}
		if hk.control != checkControlHeaders[strings.ToLower(k)] {
			t.Errorf("lowerKeys[%q].control = %v, want %v", k, hk.control, !hk.control)
		}
	}
	for lk := range checkControlHeaders {
		if _, ok := lowerKeys[http.CanonicalHeaderKey(lk)]; !ok {
			t.Errorf("control header %q is not in lowerKeys", lk)
		}
	}
}

// lowerHeadersByToLower is lowerHeaders as it reads: every key through
// strings.ToLower.
func lowerHeadersByToLower(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, vs := range h {
		lk := strings.ToLower(k)
		if checkControlHeaders[lk] {
			continue
		}
		out[lk] = strings.Join(vs, ",")
	}
	return out
}

// headerFromText builds a header from "Key: value" lines, keys as given
// (canonical or not), repeated keys adding values.
func headerFromText(s string) http.Header {
	h := http.Header{}
	for line := range strings.SplitSeq(s, "\n") {
		k, v, _ := strings.Cut(line, ":")
		h[k] = append(h[k], strings.TrimSpace(v))
	}
	return h
}

// FuzzLowerHeaders checks lowerHeaders, which takes the lower-case form of
// common keys from a table, against strings.ToLower on every key.
func FuzzLowerHeaders(f *testing.F) {
	for _, s := range []string{
		"Authorization: Bearer x\nX-Original-Uri: /a\nX_Svc_Method: GET\nX-Original-Method: GET",
		"X-Forwarded-Uri: /a\nX-Forwarded-Method: POST\nX-Forwarded-Host: shop\nAccept: */*\nAccept: text/html",
		"Cookie: a=b\nUser-Agent: curl\nX-Real-Ip: 10.0.0.1\nX-Svc-User-Id: spoofed\nx-custom: 1\nX-CUSTOM: 2",
		"TRACEPARENT: 00-1\ntraceparent: 00-2\nX-Request-Id: r\nÄccept: x\nSec-Fetch-Site: none",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := headerFromText(s)
		// Keys that differ only in case collapse into one, the last one
		// iterated winning; compare on headers where no two do.
		seen := map[string]bool{}
		for k := range h {
			if seen[strings.ToLower(k)] {
				return
			}
			seen[strings.ToLower(k)] = true
		}
		if diff := cmp.Diff(lowerHeadersByToLower(h), lowerHeaders(h)); diff != "" {
			t.Errorf("lowerHeaders(%q) (-strings.ToLower +table):\n%s", s, diff)
		}
	})
}

// writeAllowedBySet is writeAllowed as h.Set calls.
func writeAllowedBySet(h http.Header, v verdict, conv convention, spoofed []string) {
	h.Set("Cache-Control", "no-store")
	h.Set(HeaderUserID, v.subject)
	h.Set(HeaderTenantID, v.tenantID)
	h.Set(HeaderRoles, v.roles)
	h.Set(HeaderDecisionID, v.decisionID)
	h.Set(HeaderFailOpen, "false")
	h.Set(HeaderIdentity, v.identity)
	if conv == conventionEnvoy {
		remove := []string{HeaderFailOpen}
		if v.identity == "" {
			remove = append(remove, HeaderIdentity)
		}
		h.Set(headerAuthRemove, strings.Join(slices.Concat(remove, spoofed), ","))
	}
}

func TestWriteAllowedAsSet(t *testing.T) {
	verdicts := []verdict{
		{allow: true, status: 200, subject: "u-1", tenantID: "t-1", roles: "admin,viewer", decisionID: "d-1"},
		{allow: true, status: 200},
		{allow: true, status: 200, subject: "ü ñ", roles: "x%2Cadmin"},
		{allow: true, status: 200, subject: "u-1", identity: "eyJ.eyJ.sig"},
	}
	spoofs := [][]string{nil, {"x-svc-admin"}, {"x-svc-a", "x-svc-b"}}
	for _, v := range verdicts {
		for _, conv := range []convention{conventionEnvoy, conventionNginx, conventionForwarded} {
			for _, sp := range spoofs {
				// The handler may have set headers before: both overwrite.
				want := http.Header{"X-Svc-Roles": {"old"}, "Vary": {"Accept"}}
				got := want.Clone()
				writeAllowedBySet(want, v, conv, sp)
				writeAllowed(got, v, conv, sp, nil)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("verdict %+v, convention %d, spoofed %q (-Set +writeAllowed):\n%s", v, conv, sp, diff)
				}
				// Adding to one header leaves the others alone.
				snapshot := got.Clone()
				for k := range maps.Keys(snapshot) {
					got.Add(k, "added")
					for k2, vs := range snapshot {
						if k2 != k && !slices.Equal(got[k2], vs) {
							t.Fatalf("Add(%q) changed %q to %q", k, k2, got[k2])
						}
					}
					got[k] = snapshot[k]
				}
			}
		}
	}
}

// TestCheckAnyMethod: /check answers a check request of any method alike
// (nginx and Caddy check with GET; it is registered for GET and for every
// method).
func TestCheckAnyMethod(t *testing.T) {
	idp := newTestIdP(t)
	servers := httpCheckServers(t, idp)
	admin := "Bearer " + idp.token(t, map[string]any{"sub": "u-admin", "tenant_id": testTenant, "roles": []string{"admin"}})
	var first string
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete, "PROPFIND"} {
		req := httptest.NewRequest(method, servers["main"].URL+CheckPath, nil)
		req.RequestURI = ""
		req.Header.Set("Authorization", admin)
		req.Header.Set("X-Original-URI", "/api/orders/1")
		req.Header.Set(HeaderNginxMethod, http.MethodDelete)
		resp, err := servers["main"].Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		resp.Header.Del("Date")
		resp.Header.Del("X-Svc-Decision-Id")
		resp.Header.Del("Content-Length") // net/http's, absent from a HEAD answer
		got := resp.Status + " " + strings.Join(slices.Sorted(maps.Keys(resp.Header)), ",") + " " + resp.Header.Get("X-Svc-User-Id")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s = %s", method, CheckPath, resp.Status)
		}
		if first == "" {
			first = got
		} else if got != first {
			t.Errorf("%s %s = %q, want %q as for GET", method, CheckPath, got, first)
		}
	}
}

// writeDeniedBySet is writeDenied as h.Set calls.
func writeDeniedBySet(h http.Header, v verdict, conv convention, ct string, body []byte) int {
	h.Set("Cache-Control", "no-store")
	if v.html {
		refusalpage.SetHeaders(h)
	}
	h.Set("Content-Type", ct)
	status := v.status
	switch {
	case v.redirect && conv == conventionNginx:
		h.Set(HeaderLogin, v.login)
	case v.redirect:
		status = http.StatusFound
		h.Set("Location", v.login)
	}
	if v.wwwAuthenticate != "" && status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", v.wwwAuthenticate)
	}
	if v.retryAfter != "" {
		h.Set("Retry-After", v.retryAfter)
	}
	if conv == conventionNginx || (conv == conventionEnvoy && status >= http.StatusInternalServerError) {
		h.Set(HeaderStatus, strconv.Itoa(v.status))
		h.Set(HeaderBody, asciiJSON(body))
		if conv == conventionNginx && v.html {
			h.Set(headerContentType, ct)
		}
		if status != http.StatusUnauthorized && status != http.StatusForbidden {
			status = http.StatusForbidden
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return status
}

func TestWriteDeniedAsSet(t *testing.T) {
	var verdicts []verdict
	for _, status := range []int{400, 401, 403, 429, 500, 503} {
		v := denied(status, 0, "some-reason", []string{"why é"}, "d-1")
		verdicts = append(verdicts, v)
		v.wwwAuthenticate = `Bearer error="invalid_token"`
		verdicts = append(verdicts, v)
		v.retryAfter = "2"
		verdicts = append(verdicts, v)
		v.html, v.login = true, "/saml/login?return_to=%2Fa"
		verdicts = append(verdicts, v)
		v.redirect = true
		verdicts = append(verdicts, v)
	}
	for _, v := range verdicts {
		for _, conv := range []convention{conventionEnvoy, conventionNginx, conventionForwarded} {
			ct, body := v.answer()
			want := http.Header{"Vary": {"Accept"}, "Content-Type": {"text/plain"}}
			got := want.Clone()
			wantStatus := writeDeniedBySet(want, v, conv, ct, body)
			gotStatus := writeDenied(got, v, conv, ct, body)
			if diff := cmp.Diff(want, got); diff != "" || gotStatus != wantStatus {
				t.Fatalf("verdict %+v, convention %d: status %d, want %d (-Set +writeDenied):\n%s", v, conv, gotStatus, wantStatus, diff)
			}
		}
	}
}

func TestStatusString(t *testing.T) {
	for code := 100; code < 600; code++ {
		if got := statusString(code); got != strconv.Itoa(code) {
			t.Errorf("statusString(%d) = %q", code, got)
		}
	}
}
