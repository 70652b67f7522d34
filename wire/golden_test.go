package wire_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/wire"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenValues are the shapes the CLI and the SDKs read, each with every
// field set, so that its golden file names every key. The Python and
// TypeScript SDK tests read the same files.
func goldenValues() map[string]any {
	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	t1 := t0.Add(5 * time.Minute)
	return map[string]any{
		"status": wire.Status{
			Status: wire.StatusDegraded, Reason: "jwks-unavailable", Ready: true,
			Partitioned: true, PartitionedSince: &t0, LastSync: &t0, CacheValid: true, CacheAge: "5m0s",
			PoliciesLoaded: 3, PolicyRevision: "sha256:4f2a", PolicySource: "bundle_url", PolicyCreatedAt: &t0,
			PolicyHandoverRefused: &wire.HandoverRefusal{Code: "bundle-signature-invalid", Message: "signature does not verify"},
			JWKSKeySets:           1, JWKSKeys: 2, JWKSLastError: "connection refused",
			JWKSIssuers: []wire.JWKSIssuer{{
				Issuer: "https://login.example.com", URL: "https://login.example.com/keys", KeySets: 1, Keys: 2,
				LastError: "connection refused", Partitioned: true, PartitionedSince: &t0, LastSync: &t0,
			}},
			DevMode: false, PolicyMode: "enforce", TenantID: "acme", Uptime: "1h2m3s",
			StartedAt: t0, PID: 4242, Version: "v1.4.0",
			Audit: &wire.AuditStats{Written: 10, Dropped: 1, Failed: 2, QueueLen: 3, QueueCap: 1024},
			APIKeys: &wire.APIKeysStatus{Path: "/etc/svc/api-keys.toml", Keys: 3, Loaded: t0, Refusals: 1,
				LastError: "api key file /etc/svc/api-keys.toml: line 7: holds a plaintext API key"},
			DecisionLog: &wire.DecisionLogStatus{Sink: "nats", SpoolBytes: 48213, Unsent: 52, OldestUnsentAge: "2.4s",
				Shipped: 91822, Retries: 3, Refused: 4, LastError: "decision log nats: not connected"},
			ClientCerts: &wire.ClientCertsStatus{TrustDomains: 2, Roles: 5, Accepted: 120, Invalid: 3, Untrusted: 1},
			IdentityToken: &wire.IdentityTokenStatus{KeyFile: "/etc/svc/identity-token-key.pem", KeyID: "kid-1", Published: 2, TTL: "5m0s",
				Loaded: t0, Minted: 10, Reused: 90, Failures: 0, Refusals: 1, LastError: "identity token key file refused"},
			Introspection: &wire.IntrospectionStatus{URL: "https://login.example.com/oauth2/introspect", Shared: true,
				CacheEntries: 42, Calls: 100, Failures: 2, LastError: "introspection-unavailable: introspection endpoint answered 503",
				LastErrorAt: &t1},
			SAML: &wire.SAMLStatus{
				EntityID: "https://shop.example/auth/saml/metadata", ACSURL: "https://shop.example/auth/saml/acs",
				SignatureCheckDisabled: false, AllowIDPInitiated: true,
				IDPMetadata: wire.SAMLMetadataStatus{
					Source: "https://idp.example.com/metadata", EntityID: "https://idp.example.com/saml", Loaded: true,
					Certificates: 1, FetchedAt: &t0, LastAttempt: &t1, LastError: "timeout", Stale: true, NextRefresh: &t1,
				},
				TokenKeyID: "k-1", TokenKeyGenerated: true, TokenKeyEphemeral: true,
			},
			OIDC: &wire.OIDCStatus{
				PathPrefix: "/auth/oidc", SharedState: true, LogoutScope: "replicas", TokenKeyID: "k-1",
				Providers: []wire.OIDCProviderStatus{{Name: "default", Tenant: "acme", IssuerURL: "https://login.example.com",
					Discovered: &t0, LastError: "timeout", EndSession: true}},
			},
			Bundle: &wire.BundleStatus{
				URL: "https://bundles.example/svc.tar.gz", ETag: `"e-1"`, LastSync: &t0, LastAttempt: &t1,
				Partitioned: true, PartitionedSince: &t1, LastError: "503 Service Unavailable", LastErrorCode: "bundle-malformed",
			},
			PolicyState: &wire.PolicyState{File: "/var/lib/svc/policy-bundle-4f2a9c1b0d3e5f67.json", Revision: "sha256:4f2a", CreatedAt: &t0,
				LastError: "no space left on device"},
			RateLimit: &wire.RateLimitStatus{Mode: "local", Active: true, Since: &t1, Replicas: 3, Fallbacks: 12},
			Redis: &wire.RedisStatus{Addr: "redis.svc.internal:6379", MaxMemoryPolicy: "volatile-lru", MaxMemory: 268435456, Evicts: true, CheckedAt: &t1,
				LastError: "dial tcp 10.0.0.7:6379: i/o timeout"},
		},
		"log-record": wire.LogRecord{
			Time: t0, Level: "WARN", Message: "decision",
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
			Attributes: map[string]string{"policy.result": "denied", "tenant": "acme"},
		},
		"span-record": wire.SpanRecord{
			TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", ParentID: "53995c3f42cd8ad8",
			Name: "policy.evaluate", Service: "svc-sidecar", Kind: "internal", Start: t0, Duration: 1500 * time.Microsecond,
			Status: "error", StatusMessage: "policy-error", Attributes: map[string]string{"svc.action": "orders:read"},
		},
		"dropped": wire.DroppedNotice{Dropped: 7, Type: wire.DroppedType},
		"dry-run-report": wire.DryRunReport{
			ID: "dr-1", Revision: "sha256:9c1e", State: wire.DryRunFinished, Started: t0, Ends: t1, Ended: &t1,
			Decisions: 100, Evaluated: 98, Allow: 90, SimulatedDeny: 6, Errors: 2, Timeouts: 1, Skipped: 2,
			TopDenyReason: []wire.ReasonCount{{Reason: "role-forbidden", Count: 6}},
			Changed:       []wire.Change{{Change: "newly-denied", Action: "orders:delete", Tenant: "acme", Count: 6}},
		},
		"error": wire.ErrorBody{Error: wire.ErrorDetail{Code: "input-invalid", Message: "request body is not a valid JSON object"}},
		"deny-body": wire.DenyBody{
			DenyReasons: []string{"role-forbidden: viewer cannot orders:delete"}, Reason: "policy-deny",
			DecisionID: "0b7f4d2c-8a3e-4c1b-9f6d-2e5a7c9b1d3f",
		},
	}
}

// TestGolden marshals each shape and compares it with testdata/<name>.json
// (-update rewrites them); each golden decodes back, without unknown
// fields, to the same value; and each names every field of its type.
func TestGolden(t *testing.T) {
	for name, v := range goldenValues() {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", name+".json")
			testkit.Golden(t, *update, path, got)
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			back := reflect.New(reflect.TypeOf(v))
			dec := json.NewDecoder(bytes.NewReader(want))
			dec.DisallowUnknownFields()
			if err := dec.Decode(back.Interface()); err != nil {
				t.Fatalf("%s does not decode into %T: %v", path, v, err)
			}
			if !reflect.DeepEqual(back.Elem().Interface(), v) {
				t.Errorf("%s decodes to %+v, want %+v", path, back.Elem().Interface(), v)
			}
			var doc any
			if err := json.Unmarshal(want, &doc); err != nil {
				t.Fatal(err)
			}
			for _, k := range missingKeys(reflect.TypeOf(v), doc, "") {
				t.Errorf("%s has no key %s: give the field a value in goldenValues", path, k)
			}
		})
	}
}

// missingKeys lists the JSON keys of t's fields (nested structs too) that
// doc lacks.
func missingKeys(t reflect.Type, doc any, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
		if arr, ok := doc.([]any); ok && len(arr) > 0 {
			doc = arr[0]
		}
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeOf(time.Time{}) {
		return nil
	}
	obj, _ := doc.(map[string]any)
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key == "-" || !f.IsExported() {
			continue
		}
		sub, ok := obj[key]
		if !ok {
			out = append(out, prefix+key)
			continue
		}
		out = append(out, missingKeys(f.Type, sub, prefix+key+".")...)
	}
	return out
}
