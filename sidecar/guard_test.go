package sidecar

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// devConfig is a development-mode configuration on free ports, where an
// unsigned bundle may be activated: the guards, not the signature, decide.
func devConfig() config.Config {
	var dev config.Config
	dev.SDK.SidecarAddr, dev.Sidecar.HTTPAddr, dev.SDK.TenantID = "127.0.0.1:0", "127.0.0.1:0", testTenant
	dev.Audit.Destination = config.AuditOff
	return dev
}

// TestCrossSiteRefusedBeforeBody sends what a web page in a browser on
// the sidecar's host can send: each refusal is a 403 with its code that
// arrives while the body is still unsent, so the body was never read;
// the policy stays.
func TestCrossSiteRefusedBeforeBody(t *testing.T) {
	restricted := t.TempDir()
	writePolicy(t, restricted, true)
	unsigned := buildBundle(t, restricted, "rev-from-a-page", nil)
	r := startSidecar(t, devConfig())
	initial := getStatus(t, r).PolicyRevision
	base := "http://" + r.HTTPAddr().String()

	tests := []struct {
		name     string
		path     string
		header   map[string]string
		host     string
		wantCode string
	}{
		{"foreign Origin", PathReloadPolicy, map[string]string{"Origin": "https://evil.example"}, "", string(reason.CrossSiteRequest)},
		{"null Origin", PathReloadPolicy, map[string]string{"Origin": "null"}, "", string(reason.CrossSiteRequest)},
		{"Origin of another local port", PathReloadPolicy, map[string]string{"Origin": "http://localhost:3000"}, "", string(reason.CrossSiteRequest)},
		{"Sec-Fetch-Site cross-site", PathReloadPolicy, map[string]string{"Sec-Fetch-Site": "cross-site"}, "", string(reason.CrossSiteRequest)},
		{"DNS rebinding Host", PathReloadPolicy, nil, "rebind.evil.example:" + portOf(r), string(reason.HostNotAllowed)},
		{"DNS rebinding Host reading the config", PathConfig, nil, "rebind.evil.example", string(reason.HostNotAllowed)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			defer pw.Close()
			method := http.MethodPost
			var body io.Reader = pr
			if tc.path == PathConfig {
				method, body = http.MethodGet, nil
			}
			req, err := http.NewRequest(method, base+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			if body != nil {
				req.ContentLength = int64(len(unsigned))
			}
			type answer struct {
				resp *http.Response
				err  error
			}
			got := make(chan answer, 1)
			go func() {
				resp, err := httpClient.Do(req)
				got <- answer{resp, err}
			}()
			var a answer
			select {
			case a = <-got:
			case <-time.After(waitTimeout):
				t.Fatal("no answer while the body was held back: the server waits for the body")
			}
			if a.err != nil {
				t.Fatal(a.err)
			}
			defer a.resp.Body.Close()
			b, _ := io.ReadAll(a.resp.Body)
			if a.resp.StatusCode != http.StatusForbidden || errorCode(b) != tc.wantCode {
				t.Errorf("%s = %d %s, want 403 %s", tc.path, a.resp.StatusCode, b, tc.wantCode)
			}
			if rev := getStatus(t, r).PolicyRevision; rev != initial {
				t.Errorf("policy_revision = %q, want %q kept", rev, initial)
			}
		})
	}

	// The same upload from a command-line client, and from a browser on
	// the sidecar's own origin, goes through.
	for _, origin := range []string{"", base} {
		req, _ := http.NewRequest(http.MethodPost, base+PathReloadPolicy, bytes.NewReader(unsigned))
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("upload with Origin %q = %d %s, want 200", origin, resp.StatusCode, b)
		}
	}
}

func portOf(r *running) string {
	a := r.HTTPAddr().String()
	return a[strings.LastIndex(a, ":")+1:]
}

// TestConfigRedactsURLs: a credential carried in a URL's query does not
// leave the sidecar through GET /v1/config.
func TestConfigRedactsURLs(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	const secret = "k3y-in-query-91d2"
	cfg.SDK.JWKSURL = idp.JWKSURL() + "?api_key=" + secret
	r := startSidecar(t, cfg)
	code, body := get(t, r, PathConfig)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", PathConfig, code, body)
	}
	if strings.Contains(string(body), secret) {
		t.Errorf("the live configuration shows the query credential:\n%s", body)
	}
	if !strings.Contains(string(body), "api_key="+config.RedactedMark) {
		t.Errorf("the live configuration does not show the redacted key:\n%s", body)
	}
}

// TestDirectoryReloadRefusedWithVerifyKey: with a verification key the
// signed bundle stays active; an empty POST cannot swap in the unsigned
// directory or the embedded default.
func TestDirectoryReloadRefusedWithVerifyKey(t *testing.T) {
	idp := newTestIdP(t)
	signKey, verifyKey := testkit.ECKeyPEM(t)
	restricted := t.TempDir()
	writePolicy(t, restricted, true)
	cfg := verifyingConfig(t, idp, verifyKey)
	r := startSidecar(t, cfg)
	if code, body := post(t, r, PathReloadPolicy, buildBundle(t, restricted, "rev-signed", signKey)); code != http.StatusOK {
		t.Fatalf("signed bundle: %d %s", code, body)
	}
	code, body := post(t, r, PathReloadPolicy, nil)
	if code != http.StatusConflict || errorCode(body) != string(reason.SignedBundleRequired) {
		t.Errorf("empty reload = %d %s, want 409 %s", code, body, reason.SignedBundleRequired)
	}
	if st := getStatus(t, r); st.PolicyRevision != "rev-signed" {
		t.Errorf("policy_revision = %q, want the signed bundle's rev-signed", st.PolicyRevision)
	}
	viewer := idp.token(t, "alice", testTenant, "viewer")
	if allowed(t, dial(t, r.GRPCAddr()), viewer, "/orders/42") {
		t.Error("the restricted signed policy no longer decides")
	}
}
