package samlgw_test

import (
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/beevik/etree"
	"github.com/crewjam/saml/xmlenc"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/samlgw"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// encryptedResponse signs an assertion with the IdP key, then encrypts it
// for the SP certificate (RSA-OAEP, AES-256-CBC), as an IdP does.
func encryptedResponse(t *testing.T, sp *testidp.IdP) []byte {
	t.Helper()
	doc, err := testIdP.Sign(valid())
	if err != nil {
		t.Fatal(err)
	}
	d := readDoc(t, doc)
	root := d.Root()
	assertion := root.SelectElement("Assertion")
	plain := etree.NewDocument()
	plain.SetRoot(assertion.Copy())
	plainBytes, err := plain.WriteToBytes()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := xmlenc.OAEP().Encrypt(sp.Cert, plainBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	wrapper := etree.NewElement("saml:EncryptedAssertion")
	wrapper.AddChild(enc)
	root.InsertChildAt(assertion.Index(), wrapper)
	root.RemoveChild(assertion)
	return writeDoc(t, d)
}

func TestACSEncryptedAssertion(t *testing.T) {
	sp, err := testidp.Generate(entityID, "unused")
	if err != nil {
		t.Fatal(err)
	}
	doc := encryptedResponse(t, sp)
	withKey := withSAML(func(s *config.SAML) {
		s.AllowIDPInitiated = true
		s.SPPrivateKeyPEM, s.SPCertificatePEM = string(sp.KeyPEM), string(sp.CertPEM)
	})
	f := newFixture(t, withKey)
	a := f.post(t, doc, true)
	if a.status != http.StatusOK {
		t.Fatalf("encrypted assertion with the SP key: %d %q %s", a.status, a.code, a.message)
	}
	if c := claimsOf(t, a.token); c["sub"] != "alice@example.com" || c["tenant_id"] != "AcMe" {
		t.Errorf("claims %v", c)
	}
	// Without an SP key it cannot be read.
	noKey := newFixture(t, withSAML(allowIDPInitiated))
	if a := noKey.post(t, encryptedResponse(t, sp), true); a.status != http.StatusBadRequest || a.code != string(samlgw.Malformed) {
		t.Errorf("without an SP key: %d %q, want 400 %q", a.status, a.code, samlgw.Malformed)
	}
	// Encrypted for another SP's key: refused.
	other, err := testidp.Generate(entityID, "unused")
	if err != nil {
		t.Fatal(err)
	}
	if a := f.post(t, encryptedResponse(t, other), true); a.status != http.StatusBadRequest || a.code != string(samlgw.Malformed) {
		t.Errorf("encrypted for another key: %d %q", a.status, a.code)
	}
}

// A hostile EncryptedKey (a block cipher over a ciphertext that is not
// whole blocks, its key wrapped for the public SP certificate) is a 400,
// not a panic that drops the connection.
func TestACSHostileEncryptedKey(t *testing.T) {
	sp, err := testidp.Generate(entityID, "unused")
	if err != nil {
		t.Fatal(err)
	}
	d := readDoc(t, encryptedResponse(t, sp))
	wrapper := d.Root().SelectElement("EncryptedAssertion")
	ek := wrapper.SelectElement("EncryptedData").Copy()
	ek.Tag = "EncryptedKey"
	cv := ek.FindElement("./CipherData/CipherValue")
	if cv == nil {
		t.Fatal("no CipherValue in the encrypted data")
	}
	cv.SetText(base64.StdEncoding.EncodeToString(make([]byte, 21)))
	wrapper.AddChild(ek)
	f := newFixture(t, withSAML(func(s *config.SAML) {
		s.AllowIDPInitiated = true
		s.SPPrivateKeyPEM, s.SPCertificatePEM = string(sp.KeyPEM), string(sp.CertPEM)
	}))
	if a := f.post(t, writeDoc(t, d), true); a.status != http.StatusBadRequest || a.code != string(samlgw.Malformed) {
		t.Fatalf("hostile EncryptedKey: %d %q, want 400 %q", a.status, a.code, samlgw.Malformed)
	}
}
