// Package samltest sets up the SAML identity provider the tests trust:
// a generated samlgw/testidp IdP and its metadata in a file, as
// sdk.saml.idp_metadata_file names it.
package samltest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/svc-dev/svc/samlgw/testidp"
)

// Entity ID and single sign-on URL of the IdP New generates.
const (
	EntityID = "https://idp.example.com/saml"
	SSOURL   = "https://idp.example.com/saml/sso"
)

// New generates an IdP of EntityID and SSOURL, failing t when it cannot.
func New(t testing.TB) *testidp.IdP {
	t.Helper()
	idp, err := testidp.Generate(EntityID, SSOURL)
	if err != nil {
		t.Fatal(err)
	}
	return idp
}

// MetadataFile writes idp's metadata to idp.xml in a temporary folder of
// t and returns its path.
func MetadataFile(t testing.TB, idp *testidp.IdP) string {
	t.Helper()
	md := filepath.Join(t.TempDir(), "idp.xml")
	if err := os.WriteFile(md, idp.Metadata(), 0o600); err != nil {
		t.Fatal(err)
	}
	return md
}

// LocalSPConfig is the svc.toml of docs/saml.md's local round trip: tenant
// acme, the service provider on http://127.0.0.1:7701 trusting the IdP
// whose metadata is in the file metadataFile, IdP-initiated sign-on
// allowed.
func LocalSPConfig(metadataFile string) string {
	return `[sdk]
tenant_id = "acme"
[sdk.saml]
entity_id = "http://127.0.0.1:7701/auth/saml/metadata"
acs_url = "http://127.0.0.1:7701/auth/saml/acs"
idp_metadata_file = "` + metadataFile + `"
allow_idp_initiated = true
`
}
