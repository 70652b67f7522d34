package samlgw_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/samlgw"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// federationSigner is a federation's metadata signing key pair, made on
// first use (not at init, which every fuzz worker pays).
var federationSigner = sync.OnceValue(func() *testidp.IdP {
	i, err := testidp.Generate("https://federation.example.org", "https://federation.example.org/unused")
	if err != nil {
		panic(err)
	}
	return i
})

// signedMetadata is the test IdP's metadata with an enveloped signature on
// its root made by xmlsec1 with signer's key, SHA-256 unless sha1.
func signedMetadata(t *testing.T, signer *testidp.IdP, sha1 bool) []byte {
	t.Helper()
	sm, dm := "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256", "http://www.w3.org/2001/04/xmlenc#sha256"
	if sha1 {
		sm, dm = "http://www.w3.org/2000/09/xmldsig#rsa-sha1", "http://www.w3.org/2000/09/xmldsig#sha1"
	}
	tmpl := `<ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:SignedInfo>` +
		`<ds:CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/><ds:SignatureMethod Algorithm="` + sm + `"/>` +
		`<ds:Reference URI="#md-1"><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/>` +
		`<ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></ds:Transforms><ds:DigestMethod Algorithm="` + dm + `"/>` +
		`<ds:DigestValue></ds:DigestValue></ds:Reference></ds:SignedInfo><ds:SignatureValue></ds:SignatureValue></ds:Signature>`
	md := string(testIdP.Metadata())
	md = strings.Replace(md, `entityID=`, `ID="md-1" entityID=`, 1)
	md = strings.Replace(md, "\n  <md:IDPSSODescriptor", tmpl+"\n  <md:IDPSSODescriptor", 1)
	return xmlsecSignID(t, signer, []byte(md), "urn:oasis:names:tc:SAML:2.0:metadata:EntityDescriptor")
}

// withMetadata serves md as the IdP metadata file, and trusts the PEM
// certificates certPEM (when not nil) as its signers.
func withMetadata(t *testing.T, md, certPEM []byte) option {
	dir := t.TempDir()
	return func(c *config.Config, _ *samlgw.Deps) {
		c.SDK.SAML.IDPMetadataFile = filepath.Join(dir, "idp.xml")
		testkit.WriteFile(t, c.SDK.SAML.IDPMetadataFile, md)
		if certPEM != nil {
			c.SDK.SAML.IDPMetadataSigningCertificateFile = filepath.Join(dir, "signer.pem")
			testkit.WriteFile(t, c.SDK.SAML.IDPMetadataSigningCertificateFile, certPEM)
		}
	}
}

// With idp_metadata_signing_certificate_file the metadata must be signed
// by one of those certificates; the IdP it names is then trusted.
func TestSignedMetadata(t *testing.T) {
	metadataSigner := federationSigner()
	good := signedMetadata(t, metadataSigner, false)
	other, err := testidp.Generate("https://other.example.org", "https://other.example.org/unused")
	if err != nil {
		t.Fatal(err)
	}
	// Both certificates in the file: either may have signed.
	trust := append(append([]byte{}, other.CertPEM...), metadataSigner.CertPEM...)

	f := newFixture(t, withSAML(allowIDPInitiated), withMetadata(t, good, trust))
	if a := f.post(t, signed(t, valid()), true); a.status != http.StatusOK {
		t.Fatalf("sign-on with signed metadata: %d %q %s", a.status, a.code, a.message)
	}
	// Without a trust certificate the signature is not needed.
	newFixture(t, withMetadata(t, testIdP.Metadata(), nil))

	tests := []struct {
		name, want string
		md         []byte
	}{
		{"unsigned", "not signed", testIdP.Metadata()},
		{"signed by another key", "does not verify", signedMetadata(t, other, false)},
		{"SHA-1", "not accepted", signedMetadata(t, metadataSigner, true)},
		{"SSO URL changed after signing", "does not verify", bytes.Replace(good, []byte(ssoURL), []byte("https://evil.example.com/sso"), 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Config{SDK: config.SDK{SAML: &config.SAML{EntityID: entityID, ACSURL: acsURL}}}
			cfg.SetDefaults()
			withMetadata(t, tt.md, metadataSigner.CertPEM)(&cfg, nil)
			_, err := samlgw.New(cfg, samlgw.Deps{Issuer: f.issuer})
			if err == nil || !strings.Contains(err.Error(), "metadata signature") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want a metadata signature error with %q", err, tt.want)
			}
		})
	}
}

// Fetched from the URL, metadata that is not signed by the trusted signer
// is refused and /v1/status says why.
func TestSignedMetadataFromURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write(testIdP.Metadata())
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	certFile := filepath.Join(dir, "signer.pem")
	testkit.WriteFile(t, certFile, federationSigner().CertPEM)
	f := newFixture(t)
	cfg := config.Config{SDK: config.SDK{SAML: &config.SAML{
		EntityID: entityID, ACSURL: acsURL, IDPMetadataURL: srv.URL, IDPMetadataSigningCertificateFile: certFile,
	}}}
	cfg.SetDefaults()
	g, err := samlgw.New(cfg, samlgw.Deps{Issuer: f.issuer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	var st samlgw.MetadataStatus
	testkit.Poll(t, 30*time.Second, "a fetch error", func() (bool, string) {
		st = g.Status().IDPMetadata
		return st.LastError != "", fmt.Sprintf("%+v", st)
	})
	if st.Loaded || !strings.Contains(st.LastError, "metadata signature") {
		t.Fatalf("status %+v, want not loaded with a metadata signature error", st)
	}
}
