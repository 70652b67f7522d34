package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/audit"
	"github.com/svc-dev/svc/engine/bundle"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/bundletest"
	"github.com/svc-dev/svc/policies"
	"github.com/svc-dev/svc/sidecar/telemetry"
)

// viewerGrant is the line of the default policy that lets viewers read;
// restrictPolicy replaces it so that a decision tells the policies apart.
const (
	viewerGrant      = `"viewer": {"*": {"read"}},`
	viewerRestricted = `"viewer": {"reports": {"read"}},`
)

// writePolicy writes the default policy into dir, with viewers allowed to
// read orders or (restricted) only reports.
func writePolicy(t testing.TB, dir string, restricted bool) {
	t.Helper()
	src, err := fs.ReadFile(policies.Default, "authz.rego")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(viewerGrant)) {
		t.Fatalf("the default policy no longer holds %s; update the test", viewerGrant)
	}
	if restricted {
		src = bytes.Replace(src, []byte(viewerGrant), []byte(viewerRestricted), 1)
	}
	testkit.WriteFile(t, filepath.Join(dir, "authz.rego"), src)
}

// buildBundle bundles the policy directory dir, signed with signKey
// (unsigned when nil).
func buildBundle(t testing.TB, dir, revision string, signKey []byte) []byte {
	t.Helper()
	return bundletest.Build(t, dir, bundle.BuildOptions{Revision: revision, SignKeyPEM: signKey})
}

func post(t testing.TB, r *running, path string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := httpClient.Post("http://"+r.HTTPAddr().String()+path, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: read body: %v", path, err)
	}
	return resp.StatusCode, got
}

func getStatus(t testing.TB, r *running) Status {
	t.Helper()
	code, body := get(t, r, PathStatus)
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", PathStatus, code, body)
	}
	var st Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("GET %s: %v: %s", PathStatus, err, body)
	}
	return st
}

// errorCode returns the stable code of an error body, "" when there is none.
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

var dottedVersion = regexp.MustCompile(`^\d+\.\d+\.\d+`)

func TestHealthAndMetrics(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	tel, err := telemetry.Setup(context.Background(), telemetry.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	eng, err := engine.New(cfg, engine.Deps{Logger: quietLogger(), MeterProvider: tel.MeterProvider(), TracerProvider: tel.TracerProvider()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	withTel := startServer(t, Deps{Engine: eng, Telemetry: tel})
	testkit.Eventually(t, "ready", withTel.isReady)
	if !allowed(t, dial(t, withTel.GRPCAddr()), idp.token(t, "alice", testTenant, "viewer"), "/orders/1") {
		t.Fatal("a viewer may not read an order")
	}
	bare := startSidecar(t, cfg)

	tests := []struct {
		name     string
		srv      *running
		path     string
		wantCode int
		want     []string // regular expressions
	}{
		{"healthz", bare, PathHealthz, http.StatusOK, []string{`"status": "ok"`}},
		{"readyz", bare, PathReadyz, http.StatusOK, []string{`"ready": true`}},
		{"metrics with telemetry", withTel, PathMetrics, http.StatusOK, []string{
			`(?m)^svc_decisions_total\{[^}]*reason="policy-allow",result="allow"\} 1$`,
			`(?m)^svc_jwks_keys\{[^}]*\} 1$`,
		}},
		{"metrics without telemetry", bare, PathMetrics, http.StatusNotFound, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, tc.srv, tc.path)
			if code != tc.wantCode {
				t.Fatalf("GET %s = %d, want %d: %s", tc.path, code, tc.wantCode, body)
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(w).Match(body) {
					t.Errorf("GET %s does not contain %s:\n%s", tc.path, w, body)
				}
			}
		})
	}
}

func TestStatus(t *testing.T) {
	idp := newTestIdP(t)
	verified := testConfig(idp)
	var dev config.Config
	dev.SDK.SidecarAddr, dev.Sidecar.HTTPAddr, dev.SDK.TenantID = "127.0.0.1:0", "127.0.0.1:0", testTenant
	dev.Audit.Destination = config.AuditOff

	auditLog := audit.New(io.Discard, audit.Options{QueueSize: 16, Logger: quietLogger()})
	t.Cleanup(func() { _ = auditLog.Close(context.Background()) })

	tests := []struct {
		name  string
		cfg   config.Config
		audit *audit.Logger
		check func(t *testing.T, st Status)
	}{
		{"verified tokens", verified, auditLog, func(t *testing.T, st Status) {
			if st.DevMode || !st.CacheValid || st.JWKSKeySets != 1 || st.JWKSKeys != 1 || st.JWKSLastError != "" {
				t.Errorf("jwks: dev_mode=%v cache_valid=%v sets=%d keys=%d last_error=%q; want a valid cache of one key",
					st.DevMode, st.CacheValid, st.JWKSKeySets, st.JWKSKeys, st.JWKSLastError)
			}
			if st.LastSync == nil || time.Since(*st.LastSync) > time.Minute || st.CacheAge == "" {
				t.Errorf("last_sync = %v, cache_age = %q; want a recent sync", st.LastSync, st.CacheAge)
			}
			if st.Audit == nil || st.Audit.QueueCap != 16 {
				t.Errorf("audit = %+v, want the audit logger's stats", st.Audit)
			}
		}},
		{"development mode", dev, nil, func(t *testing.T, st Status) {
			if !st.DevMode || !st.CacheValid || st.JWKSKeys != 0 || st.LastSync != nil {
				t.Errorf("dev_mode=%v cache_valid=%v keys=%d last_sync=%v; want development mode without JWKS",
					st.DevMode, st.CacheValid, st.JWKSKeys, st.LastSync)
			}
			if st.Audit != nil {
				t.Errorf("audit = %+v without an audit logger", st.Audit)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := startServer(t, Deps{Engine: newTestEngine(t, tc.cfg), Audit: tc.audit})
			testkit.Eventually(t, "ready", r.isReady)
			st := getStatus(t, r)
			if st.Status != "healthy" || !st.Ready || st.Partitioned || st.PartitionedSince != nil {
				t.Errorf("status=%q ready=%v partitioned=%v since=%v; want healthy, ready, not partitioned",
					st.Status, st.Ready, st.Partitioned, st.PartitionedSince)
			}
			if st.TenantID != testTenant || st.PoliciesLoaded != 1 || !dottedVersion.MatchString(st.Version) {
				t.Errorf("tenant=%q policies=%d version=%q; want %q, 1 and a dotted version", st.TenantID, st.PoliciesLoaded, st.Version, testTenant)
			}
			if _, err := time.ParseDuration(st.Uptime); err != nil {
				t.Errorf("uptime %q: %v", st.Uptime, err)
			}
			tc.check(t, st)
		})
	}
}

// TestStatusPartitioned takes the identity provider down after the keys
// were cached: the sidecar reports degraded and partitioned, stays ready
// and keeps verifying tokens with the cached keys.
func TestStatusPartitioned(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	cfg.JWT.JWKSMinRefresh = config.Duration{Duration: 50 * time.Millisecond}
	cfg.JWT.JWKSMaxRefresh = config.Duration{Duration: 100 * time.Millisecond}
	r := startSidecar(t, cfg)
	if st := getStatus(t, r); st.Status != "healthy" || st.Partitioned {
		t.Fatalf("before the outage: status=%q partitioned=%v", st.Status, st.Partitioned)
	}
	tok := idp.token(t, "alice", testTenant, "viewer") // never seen before the outage

	down := time.Now()
	idp.Close()
	var st Status
	testkit.Eventually(t, "status reports degraded", func() bool {
		st = getStatus(t, r)
		return st.Status == "degraded"
	})
	if !st.Partitioned || st.PartitionedSince == nil || st.PartitionedSince.Before(down.Add(-time.Second)) {
		t.Errorf("partitioned=%v since=%v; want partitioned since the outage at %v", st.Partitioned, st.PartitionedSince, down)
	}
	if st.JWKSLastError == "" || !st.CacheValid || st.JWKSKeys != 1 {
		t.Errorf("last_error=%q cache_valid=%v keys=%d; want the fetch error and the cached key", st.JWKSLastError, st.CacheValid, st.JWKSKeys)
	}
	if !st.Ready {
		t.Error("not ready while partitioned with cached keys")
	}
	if code, body := get(t, r, PathReadyz); code != http.StatusOK {
		t.Errorf("GET /readyz while partitioned = %d %s, want 200", code, body)
	}
	if !allowed(t, dial(t, r.GRPCAddr()), tok, "/orders/42") {
		t.Error("a token first seen during the outage did not verify with the cached key")
	}
}

func TestConfigEndpoint(t *testing.T) {
	cfg := testConfig(newTestIdP(t))
	const secret = "admin-secret-7f3c9b"
	cfg.Sidecar.AdminTokenFile = filepath.Join(t.TempDir(), "admin-token")
	testkit.WriteFile(t, cfg.Sidecar.AdminTokenFile, []byte(secret+"\n"))
	cfg.Sidecar.Routes = []config.Route{{Path: "/api/{resource}/{id}", Methods: []string{"GET"}}}
	r := startSidecar(t, cfg)

	resp, body := testkit.Get(t, httpClient, "http://"+r.HTTPAddr().String()+PathConfig)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/toml" {
		t.Fatalf("GET %s = %d %q", PathConfig, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if strings.Contains(string(body), secret) {
		t.Error("the live configuration shows the admin token")
	}
	live, err := config.Parse(body, config.FormatTOML, "live")
	if err != nil {
		t.Fatalf("the live configuration does not parse back: %v\n%s", err, body)
	}
	want := r.deps.Engine.Config()
	if diff := cmp.Diff(want, live, cmpopts.IgnoreFields(config.Config{}, "Source", "Overrides", "Lines"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("live configuration differs from the engine's (-engine +live):\n%s", diff)
	}
	for _, key := range []string{"[sdk]", `jwks_url = '` + cfg.SDK.JWKSURL + `'`, `drain_timeout = '10s'`, `admin_token_file = `} {
		if !strings.Contains(string(body), key) {
			t.Errorf("live configuration lacks %s:\n%s", key, body)
		}
	}
}

// TestReloadDirectory edits the policy directory and reloads it with an
// empty POST: the decision follows the file, and a broken file leaves
// the active policy in place.
func TestReloadDirectory(t *testing.T) {
	idp := newTestIdP(t)
	cfg := testConfig(idp)
	cfg.Policy.Dir = t.TempDir()
	writePolicy(t, cfg.Policy.Dir, false)
	r := startSidecar(t, cfg)
	conn := dial(t, r.GRPCAddr())
	viewer := idp.token(t, "alice", testTenant, "viewer")
	if !allowed(t, conn, viewer, "/orders/42") {
		t.Fatal("before any reload: a viewer may not read an order")
	}

	steps := []struct {
		name      string
		edit      func(t *testing.T)
		wantCode  int
		wantError string
		wantAllow bool
	}{
		{"restricted policy", func(t *testing.T) { writePolicy(t, cfg.Policy.Dir, true) }, http.StatusOK, "", false},
		{"broken policy keeps the active set", func(t *testing.T) {
			testkit.WriteFile(t, filepath.Join(cfg.Policy.Dir, "authz.rego"), []byte("package svc.authz\n\nallow if {"))
		}, http.StatusUnprocessableEntity, "policy-error", false},
		{"permissive policy again", func(t *testing.T) { writePolicy(t, cfg.Policy.Dir, false) }, http.StatusOK, "", true},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.edit(t)
			code, body := post(t, r, PathReloadPolicy, nil)
			if code != step.wantCode {
				t.Fatalf("POST %s = %d %s, want %d", PathReloadPolicy, code, body, step.wantCode)
			}
			if got := errorCode(body); got != step.wantError {
				t.Errorf("error code = %q, want %q: %s", got, step.wantError, body)
			}
			if code == http.StatusOK && !strings.Contains(string(body), `"source": "directory"`) {
				t.Errorf("reload answer does not name the directory: %s", body)
			}
			if got := allowed(t, conn, viewer, "/orders/42"); got != step.wantAllow {
				t.Errorf("viewer reads an order: allowed=%v, want %v", got, step.wantAllow)
			}
		})
	}
}

// TestReloadBundle uploads bundles: only one signed by the configured key
// is activated; anything else is refused with 422 and the active policy
// keeps deciding.
func TestReloadBundle(t *testing.T) {
	idp := newTestIdP(t)
	signKey, verifyKey := testkit.ECKeyPEM(t)
	otherKey, _ := testkit.ECKeyPEM(t)
	restricted := t.TempDir()
	writePolicy(t, restricted, true)

	cfg := verifyingConfig(t, idp, verifyKey)
	r := startSidecar(t, cfg)
	conn := dial(t, r.GRPCAddr())
	viewer := idp.token(t, "alice", testTenant, "viewer")
	initial := getStatus(t, r).PolicyRevision

	steps := []struct {
		name         string
		body         []byte
		wantCode     int
		wantError    string
		wantAllow    bool
		wantRevision string // "" for the initial one
	}{
		{"unsigned", buildBundle(t, restricted, "rev-unsigned", nil), http.StatusUnprocessableEntity, "bundle-signature-invalid", true, ""},
		{"signed by another key", buildBundle(t, restricted, "rev-other", otherKey), http.StatusUnprocessableEntity, "bundle-signature-invalid", true, ""},
		{"not a bundle", []byte("not a tar.gz"), http.StatusBadRequest, "bundle-malformed", true, ""},
		{"signed by the configured key", buildBundle(t, restricted, "rev-2", signKey), http.StatusOK, "", false, "rev-2"},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			code, body := post(t, r, PathReloadPolicy, step.body)
			if code != step.wantCode {
				t.Fatalf("POST %s = %d %s, want %d", PathReloadPolicy, code, body, step.wantCode)
			}
			if got := errorCode(body); got != step.wantError {
				t.Errorf("error code = %q, want %q: %s", got, step.wantError, body)
			}
			if got := allowed(t, conn, viewer, "/orders/42"); got != step.wantAllow {
				t.Errorf("viewer reads an order: allowed=%v, want %v", got, step.wantAllow)
			}
			want := orElse(step.wantRevision, initial)
			if st := getStatus(t, r); st.PolicyRevision != want {
				t.Errorf("policy_revision = %q, want %q", st.PolicyRevision, want)
			}
		})
	}
}

// TestReloadBundleWithoutKey: without a verification key a bundle is
// refused unless the engine runs in development mode.
func TestReloadBundleWithoutKey(t *testing.T) {
	restricted := t.TempDir()
	writePolicy(t, restricted, true)
	unsigned := buildBundle(t, restricted, "rev-dev", nil)
	var dev config.Config
	dev.SDK.SidecarAddr, dev.Sidecar.HTTPAddr, dev.SDK.TenantID = "127.0.0.1:0", "127.0.0.1:0", testTenant
	dev.Audit.Destination = config.AuditOff

	tests := []struct {
		name         string
		cfg          config.Config
		wantCode     int
		wantRevision string // "" for the initial one
	}{
		{"verified tokens", testConfig(newTestIdP(t)), http.StatusBadRequest, ""},
		{"development mode", dev, http.StatusOK, "rev-dev"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := startSidecar(t, tc.cfg)
			initial := getStatus(t, r).PolicyRevision
			code, body := post(t, r, PathReloadPolicy, unsigned)
			if code != tc.wantCode {
				t.Fatalf("POST %s = %d %s, want %d", PathReloadPolicy, code, body, tc.wantCode)
			}
			want := orElse(tc.wantRevision, initial)
			if st := getStatus(t, r); st.PolicyRevision != want {
				t.Errorf("policy_revision = %q, want %q", st.PolicyRevision, want)
			}
		})
	}
}

// TestAdminGuard sends requests from chosen remote addresses straight to
// the handler: mutating endpoints serve loopback callers, and others only
// with the admin token.
func TestAdminGuard(t *testing.T) {
	cfg := testConfig(newTestIdP(t))
	const token = "admin-token-2b8e"
	tokenFile := testkit.TempFile(t, "admin-token", []byte(token+"\n"))
	withToken := cfg
	withToken.Sidecar.AdminTokenFile = tokenFile

	handler := func(cfg config.Config) http.Handler {
		s, err := New(Deps{Engine: newTestEngine(t, cfg), Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.closeListeners)
		return s.http.Handler
	}
	public := cfg
	public.Sidecar.PublicRead = true
	guarded, open, publicRead := handler(withToken), handler(cfg), handler(public)

	tests := []struct {
		name     string
		h        http.Handler
		method   string
		path     string
		remote   string
		auth     string
		wantCode int
	}{
		{"loopback v4", guarded, http.MethodPost, PathReloadPolicy, "127.0.0.1:5555", "", http.StatusOK},
		{"loopback v6", guarded, http.MethodPost, PathReloadPolicy, "[::1]:5555", "", http.StatusOK},
		{"remote without token", guarded, http.MethodPost, PathReloadPolicy, "10.1.2.3:5555", "", http.StatusForbidden},
		{"remote with admin token", guarded, http.MethodPost, PathReloadPolicy, "10.1.2.3:5555", "Bearer " + token, http.StatusOK},
		{"remote with wrong token", guarded, http.MethodPost, PathReloadPolicy, "10.1.2.3:5555", "Bearer " + token + "x", http.StatusForbidden},
		{"remote with token not as bearer", guarded, http.MethodPost, PathReloadPolicy, "10.1.2.3:5555", token, http.StatusForbidden},
		{"remote address unparseable", guarded, http.MethodPost, PathReloadPolicy, "garbage", "Bearer wrong", http.StatusForbidden},
		{"remote, no admin token configured", open, http.MethodPost, PathReloadPolicy, "10.1.2.3:5555", "Bearer " + token, http.StatusForbidden},
		{"remote reads status without token", open, http.MethodGet, PathStatus, "10.1.2.3:5555", "", http.StatusForbidden},
		{"remote reads status with token", guarded, http.MethodGet, PathStatus, "10.1.2.3:5555", "Bearer " + token, http.StatusOK},
		{"remote reads config without token", guarded, http.MethodGet, PathConfig, "10.1.2.3:5555", "", http.StatusForbidden},
		{"remote validates a token without admin token", guarded, http.MethodPost, "/v1/validate-token", "10.1.2.3:5555", "", http.StatusForbidden},
		{"remote reads status, public_read", publicRead, http.MethodGet, PathStatus, "10.1.2.3:5555", "", http.StatusOK},
		{"remote reloads, public_read", publicRead, http.MethodPost, PathReloadPolicy, "10.1.2.3:5555", "", http.StatusForbidden},
		{"remote probes readiness", open, http.MethodGet, PathReadyz, "10.1.2.3:5555", "", http.StatusServiceUnavailable}, // open, but not serving yet
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := serveFrom(tc.h, tc.method, tc.path, tc.remote, tc.auth)
			if rec.Code != tc.wantCode {
				t.Fatalf("%s %s from %s = %d %s, want %d", tc.method, tc.path, tc.remote, rec.Code, rec.Body, tc.wantCode)
			}
			if rec.Code == http.StatusForbidden && errorCode(rec.Body.Bytes()) == "" {
				t.Errorf("refusal without an error code: %s", rec.Body)
			}
			if strings.Contains(rec.Body.String(), token) {
				t.Error("the answer shows the admin token")
			}
		})
	}
}

// orElse returns s, or def when s is empty.
func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
