package harness

import (
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// fetchJWKS parses the key set at url with jwx, an implementation
// independent of the signer's.
func fetchJWKS(t *testing.T, url string) jwk.Set {
	t.Helper()
	status, h, body := Get(t, url)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %s", url, Describe(status, h, body))
	}
	set, err := jwk.Parse(body)
	if err != nil {
		t.Fatalf("parse JWKS: %v", err)
	}
	return set
}

// TestSignerTokensVerify checks the in-test signer against jwx: each
// algorithm's tokens verify with the published JWKS and carry the claims.
func TestSignerTokensVerify(t *testing.T) {
	signers := []*Signer{
		NewRSASigner(t, "rsa", 2048, "RS256"),
		NewRSASigner(t, "ps", 2048, "PS256"),
		NewECSigner(t, "ec"),
	}
	srv := StartJWKS(t, signers...)
	set := fetchJWKS(t, srv.URL)
	for _, s := range signers {
		t.Run(s.Alg, func(t *testing.T) {
			tok := s.Token(t, Claims("alice", "acme", "viewer"))
			parsed, err := jwt.Parse([]byte(tok), jwt.WithKeySet(set))
			if err != nil {
				t.Fatalf("verify: %v", err)
			}
			var tenant string
			if err := parsed.Get("tenant_id", &tenant); err != nil || tenant != "acme" {
				t.Errorf("tenant_id = %q (%v)", tenant, err)
			}
		})
	}
	t.Run("stranger key under a published kid does not verify", func(t *testing.T) {
		tok := NewRSASigner(t, "rsa", 2048, "RS256").Token(t, Claims("alice", "acme"))
		if _, err := jws.Verify([]byte(tok), jws.WithKeySet(set)); err == nil {
			t.Error("a token of an unpublished key verified")
		}
	})
	if srv.Fetches() != 1 {
		t.Errorf("JWKS fetched %d times, want 1", srv.Fetches())
	}
}

// TestIDP checks the OpenID provider script: its tokens are RS256 JWTs of
// its JWKS with the custom claims, and rotation switches the kid.
func TestIDP(t *testing.T) {
	idp := StartIDP(t, "urn:svc:test", time.Minute, IDPClient{
		ID: "svc-client", Secret: "client-secret-0123456789abcdef", TenantID: "acme", Roles: []string{"viewer", "billing"},
	})
	verify := func(t *testing.T, tok string) jwt.Token {
		t.Helper()
		parsed, err := jwt.Parse([]byte(tok), jwt.WithKeySet(fetchJWKS(t, idp.JWKSURL)),
			jwt.WithIssuer(idp.Issuer), jwt.WithAudience("urn:svc:test"))
		if err != nil {
			t.Fatalf("verify provider token: %v", err)
		}
		return parsed
	}
	tok := idp.Token(t, "svc-client")
	msg, err := jws.Parse([]byte(tok))
	if err != nil {
		t.Fatal(err)
	}
	hdr := msg.Signatures()[0].ProtectedHeaders()
	if alg, _ := hdr.Algorithm(); alg.String() != "RS256" {
		t.Errorf("alg = %v, want RS256", alg)
	}
	if kid, _ := hdr.KeyID(); kid != idp.Kid {
		t.Errorf("kid = %q, want %q", kid, idp.Kid)
	}
	parsed := verify(t, tok)
	var roles []any
	if err := parsed.Get("roles", &roles); err != nil || len(roles) != 2 {
		t.Errorf("roles = %v (%v)", roles, err)
	}
	if sub, _ := parsed.Subject(); sub != "svc-client" {
		t.Errorf("sub = %q", sub)
	}

	oldKid := idp.Kid
	newKid := idp.Rotate(t, false)
	rotated := idp.Token(t, "svc-client")
	msg, err = jws.Parse([]byte(rotated))
	if err != nil {
		t.Fatal(err)
	}
	if kid, _ := msg.Signatures()[0].ProtectedHeaders().KeyID(); kid != newKid || kid == oldKid {
		t.Errorf("kid after rotation = %q, want new %q", kid, newKid)
	}
	verify(t, rotated)
	verify(t, tok) // the previous key stays published
	set := fetchJWKS(t, idp.JWKSURL)
	if set.Len() != 2 {
		t.Errorf("JWKS after rotation holds %d keys, want 2", set.Len())
	}
	idp.Rotate(t, true)
	if set := fetchJWKS(t, idp.JWKSURL); set.Len() != 1 {
		t.Errorf("JWKS after retiring rotation holds %d keys, want 1", set.Len())
	}
	if code := idp.Stop(t); code != 0 {
		t.Errorf("provider exited %d after SIGTERM", code)
	}
}

// TestOTLPReceiver exports spans with the OTel SDK's OTLP gRPC exporter
// and checks what the receiver recorded.
func TestOTLPReceiver(t *testing.T) {
	r := StartOTLPReceiver(t)
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpointURL(r.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "receiver-test"))))
	_, span := tp.Tracer("test").Start(context.Background(), "policy.evaluate")
	span.SetAttributes(attribute.String("svc.tenant", "acme"), attribute.StringSlice("svc.deny_reasons", []string{"a", "b"}))
	span.End()
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	spans := r.SpansNamed("policy.evaluate")
	if len(spans) != 1 {
		t.Fatalf("received %d spans, want 1: %+v", len(spans), r.Spans())
	}
	s := spans[0]
	if s.Attrs["svc.tenant"] != "acme" || s.Attrs["svc.deny_reasons"] != "a,b" || s.Resource["service.name"] != "receiver-test" {
		t.Errorf("span = %+v", s)
	}
	if len(s.TraceID) != 32 || len(s.SpanID) != 16 {
		t.Errorf("ids = %q %q", s.TraceID, s.SpanID)
	}
}

// TestProcessOutput checks output capture, waiting on output and exit
// codes of a child process.
func TestProcessOutput(t *testing.T) {
	p := StartProcess(t, "sh", exec.Command("sh", "-c", `trap 'exit 0' TERM; echo '{"a":1}'; echo ready >&2; while :; do sleep 0.05; done`))
	if _, err := p.WaitOutput(t, true, 10*time.Second, func(s string) bool { return strings.Contains(s, "ready") }); err != nil {
		t.Fatal(err)
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	lines := parseJSONLines(t, "stdout", p.Stdout.String())
	if len(lines) != 1 || lines[0]["a"] != float64(1) {
		t.Errorf("stdout lines = %v", lines)
	}

	failing := StartProcess(t, "false", exec.Command("sh", "-c", "exit 3"))
	if code := failing.Wait(t, 10*time.Second); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
}

// TestFreeAddr checks that handed-out ports are distinct and unused.
func TestFreeAddr(t *testing.T) {
	var seen []string
	for range 20 {
		a := FreeAddr(t)
		if slices.Contains(seen, a) {
			t.Fatalf("port %s handed out twice", a)
		}
		seen = append(seen, a)
	}
	if !strings.HasPrefix(seen[0], "127.0.0.1:") {
		t.Errorf("addr %q is not on loopback", seen[0])
	}
}
