package samlgw

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/sharedkey"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// acceptAll is a store that never refuses: benchmarks and fuzzing post the
// same assertion again and again.
type acceptAll struct{}

func (acceptAll) Add(context.Context, string, time.Duration) (bool, error) { return true, nil }

const (
	benchEntity = "https://app.example.com/auth/saml/metadata"
	benchACS    = "https://app.example.com/auth/saml/acs"
)

func benchSetup(tb testing.TB) (*validator, *IDP, *testidp.IdP) {
	tb.Helper()
	// A key pair kept in testdata: fuzz workers start without generating
	// an RSA key each.
	idp, _, err := testidp.LoadOrCreate(filepath.Join("testdata", "idp"), "https://idp.example.com/saml", "https://idp.example.com/saml/sso")
	if err != nil {
		tb.Fatal(err)
	}
	trusted, _, err := ParseIDPMetadata(idp.Metadata(), time.Now(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	v := &validator{
		entityID: benchEntity, acsURL: benchACS, skew: 30 * time.Second, allowIDPInitiated: true,
		mapping: config.AttributeMapping{Email: config.DefaultSAMLEmailAttribute, Role: "role", Tenant: "tenant_id"},
		store:   acceptAll{}, now: time.Now,
		requests: &requestIDs{keys: sharedkey.Static(make([]byte, 32)), now: time.Now, ttl: RequestTTL},
	}
	return v, trusted, idp
}

func benchResponse() testidp.Response {
	return testidp.Response{
		Destination: benchACS, Recipient: benchACS, Audience: benchEntity, NameID: "alice@example.com",
		Attributes: []testidp.Attribute{
			{Name: "role", Values: []string{"admin"}}, {Name: "tenant_id", Values: []string{"acme"}},
			{Name: "department", Values: []string{"finance"}},
		},
	}
}

// BenchmarkACSValidate measures the whole ACS validation of a response
// whose assertion is signed with RSA-2048 / SHA-256: structural checks,
// signature verification, conditions and attribute mapping.
func BenchmarkACSValidate(b *testing.B) {
	v, trusted, idp := benchSetup(b)
	doc, err := idp.Sign(benchResponse())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.validate(ctx, doc, trusted); err != nil {
		b.Fatalf("validate: %v", err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := v.validate(ctx, doc, trusted); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzACS feeds arbitrary documents to the whole ACS validation path: it
// must never panic, and every refusal must carry a code.
func FuzzACS(f *testing.F) {
	v, trusted, idp := benchSetup(f)
	doc, err := idp.Sign(benchResponse())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(doc)
	f.Add(idp.XML(benchResponse(), false))
	// Shapes near the scan's bounds, small enough to mutate.
	f.Add(fill(1000, "<a>", "</a>"))
	f.Add(fill(1000, `<p:a xmlns:p="urn:x">`, "</p:a>"))
	f.Add(fill(1000, "<a/>", ""))
	for _, seed := range testkit.ReadGlob(f, filepath.Join("testdata", "*.xml")) {
		f.Add(seed.Data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := v.validate(context.Background(), data, trusted)
		if err == nil {
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Code == "" || status(e.Code) >= 500 {
			t.Fatalf("refusal without a client code: %v", err)
		}
	})
}

func TestParseResponseSeeds(t *testing.T) {
	tests := map[string]Code{"dtd.xml": reason.SAMLDTDForbidden, "two-responses.xml": reason.SAMLMalformed, "no-assertion.xml": reason.SAMLMalformed, "failed-status.xml": reason.SAMLStatusFailure}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ParseResponse(context.Background(), b); CodeOf(err) != want {
				t.Fatalf("ParseResponse = %v, want code %s", err, want)
			}
		})
	}
}
