package samlgw_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/beevik/etree"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// encryptedResponse signs an assertion with the IdP key, then encrypts it
// for the SP certificate as e says (by default RSA-OAEP and AES-256-GCM),
// as an IdP does.
func encryptedResponse(t *testing.T, sp *testidp.IdP, e testidp.Encryption) []byte {
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
	enc, err := testidp.Encrypt(sp.Cert, plainBytes, e)
	if err != nil {
		t.Fatal(err)
	}
	wrapper := readDoc(t, []byte(enc)).Root()
	root.InsertChildAt(assertion.Index(), wrapper)
	root.RemoveChild(assertion)
	return writeDoc(t, d)
}

// spKeyPair is the SP key pair the encrypted assertions are for.
var spKeyPair = func() *testidp.IdP {
	sp, err := testidp.Generate(entityID, "unused")
	if err != nil {
		panic(err)
	}
	return sp
}()

func withSPKey(s *config.SAML) {
	s.AllowIDPInitiated = true
	s.SPPrivateKeyPEM, s.SPCertificatePEM = string(spKeyPair.KeyPEM), string(spKeyPair.CertPEM)
}

func TestACSEncryptedAssertion(t *testing.T) {
	f := newFixture(t, withSAML(withSPKey))
	for _, tc := range []struct {
		name string
		enc  testidp.Encryption
	}{
		{"rsa-oaep-mgf1p SHA-1, AES-256-GCM", testidp.Encryption{}},
		{"rsa-oaep-mgf1p SHA-256, AES-128-GCM", testidp.Encryption{SHA256: true, DataAlgorithm: testidp.DataAES128GCM}},
		{"xmlenc11 rsa-oaep SHA-256/MGF1-SHA-256, AES-256-GCM", testidp.Encryption{KeyAlgorithm: testidp.KeyRSAOAEP, SHA256: true}},
		{"xmlenc11 rsa-oaep SHA-1, AES-128-GCM", testidp.Encryption{KeyAlgorithm: testidp.KeyRSAOAEP, DataAlgorithm: testidp.DataAES128GCM}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.post(t, encryptedResponse(t, spKeyPair, tc.enc), true)
			if a.status != http.StatusOK {
				t.Fatalf("encrypted assertion with the SP key: %d %q %s", a.status, a.code, a.message)
			}
			if c := claimsOf(t, a.token); c["sub"] != "alice@example.com" || c["tenant_id"] != "AcMe" {
				t.Errorf("claims %v", c)
			}
		})
	}
	// Without an SP key it cannot be read.
	noKey := newFixture(t, withSAML(allowIDPInitiated))
	if a := noKey.post(t, encryptedResponse(t, spKeyPair, testidp.Encryption{}), true); a.status != http.StatusBadRequest || a.code != string(reason.SAMLMalformed) {
		t.Errorf("without an SP key: %d %q, want 400 %q", a.status, a.code, reason.SAMLMalformed)
	}
	// Encrypted for another SP's key: refused.
	other, err := testidp.Generate(entityID, "unused")
	if err != nil {
		t.Fatal(err)
	}
	if a := f.post(t, encryptedResponse(t, other, testidp.Encryption{}), true); a.status != http.StatusBadRequest || a.code != string(reason.SAMLDecryptionFailed) {
		t.Errorf("encrypted for another key: %d %q", a.status, a.code)
	}
}

// RSA PKCS#1 v1.5 key transport and CBC data encryption are refused from
// their EncryptionMethod, before the SP key is used: decrypting them for
// anyone makes the ACS a padding oracle. The refusal names the algorithm.
func TestACSEncryptionAlgorithmsRefusedBeforeDecryption(t *testing.T) {
	f := newFixture(t, withSAML(withSPKey))
	for _, tc := range []struct {
		name, alg string
		enc       testidp.Encryption
	}{
		{"RSA PKCS#1 v1.5", testidp.KeyRSA15, testidp.Encryption{KeyAlgorithm: testidp.KeyRSA15}},
		{"AES-256-CBC", testidp.DataAES256CBC, testidp.Encryption{DataAlgorithm: testidp.DataAES256CBC}},
		{"AES-128-CBC", testidp.DataAES128CBC, testidp.Encryption{DataAlgorithm: testidp.DataAES128CBC}},
		{"RSA PKCS#1 v1.5 and CBC", testidp.DataAES256CBC, testidp.Encryption{KeyAlgorithm: testidp.KeyRSA15, DataAlgorithm: testidp.DataAES256CBC}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rawPost(t, f, encryptedResponse(t, spKeyPair, tc.enc))
			if status != http.StatusUnauthorized || !bytes.Contains(body, []byte(reason.SAMLAlgorithmNotAllowed)) || !bytes.Contains(body, []byte(tc.alg)) {
				t.Fatalf("%d %s, want 401 %q naming %s", status, body, reason.SAMLAlgorithmNotAllowed, tc.alg)
			}
			// The SP key was not used: a ciphertext no key opens gets
			// the same answer, byte for byte.
			tc.enc.KeyCipher = make([]byte, 256)
			_, _ = rand.Read(tc.enc.KeyCipher)
			if _, junk := rawPost(t, f, encryptedResponse(t, spKeyPair, tc.enc)); !bytes.Equal(junk, body) {
				t.Errorf("a random key ciphertext answers %s, a conformant one %s", junk, body)
			}
		})
	}
	// Nor is an OAEP digest outside SHA-1/SHA-256.
	d := readDoc(t, encryptedResponse(t, spKeyPair, testidp.Encryption{}))
	dm := d.FindElement("//EncryptedKey/EncryptionMethod/DigestMethod")
	dm.CreateAttr("Algorithm", "http://www.w3.org/2001/04/xmldsig-more#md5")
	if a := f.post(t, writeDoc(t, d), true); a.code != string(reason.SAMLAlgorithmNotAllowed) || !strings.Contains(a.message, "md5") {
		t.Errorf("OAEP with MD5: %d %q %q", a.status, a.code, a.message)
	}
}

// Every failure after the algorithm checks gets one answer, byte for
// byte: a random key ciphertext, a conformant one for the wrong key
// length, a conformant key with tampered data, data that decrypts to
// something not XML. An oracle needs two answers to tell apart.
func TestACSDecryptionFailuresLookAlike(t *testing.T) {
	f := newFixture(t, withSAML(withSPKey))
	random := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	spPub := spKeyPair.Cert
	// A conformant OAEP ciphertext of a 16-byte key, for AES-256.
	short, err := testidp.Encrypt(spPub, []byte("x"), testidp.Encryption{DataAlgorithm: testidp.DataAES128GCM})
	if err != nil {
		t.Fatal(err)
	}
	shortKey := readDoc(t, []byte(short)).FindElement("//EncryptedKey/CipherData/CipherValue").Text()
	shortKeyDoc := readDoc(t, encryptedResponse(t, spKeyPair, testidp.Encryption{}))
	shortKeyDoc.FindElement("//EncryptedKey/CipherData/CipherValue").SetText(shortKey)

	// Data that is not XML, encrypted correctly.
	notXML := readDoc(t, encryptedResponse(t, spKeyPair, testidp.Encryption{}))
	enc, err := testidp.Encrypt(spPub, []byte("<saml:Assertion"), testidp.Encryption{})
	if err != nil {
		t.Fatal(err)
	}
	ea := notXML.FindElement("//EncryptedAssertion")
	parent := ea.Parent()
	parent.InsertChildAt(ea.Index(), readDoc(t, []byte(enc)).Root())
	parent.RemoveChild(ea)

	cases := map[string][]byte{
		"random key ciphertext":            encryptedResponse(t, spKeyPair, testidp.Encryption{KeyCipher: random(256)}),
		"random key ciphertext, short":     encryptedResponse(t, spKeyPair, testidp.Encryption{KeyCipher: random(17)}),
		"conformant key of the wrong size": writeDoc(t, shortKeyDoc),
		"key for another SP":               encryptedResponse(t, testIdP, testidp.Encryption{}),
		"tampered data":                    encryptedResponse(t, spKeyPair, testidp.Encryption{Data: random(300)}),
		"data shorter than IV and tag":     encryptedResponse(t, spKeyPair, testidp.Encryption{Data: random(5)}),
		"decrypts to broken XML":           writeDoc(t, notXML),
	}
	var first []byte
	for name, doc := range cases {
		status, body := rawPost(t, f, doc)
		if status != http.StatusBadRequest || !bytes.Contains(body, []byte(reason.SAMLDecryptionFailed)) {
			t.Errorf("%s: %d %s, want 400 %s", name, status, body, reason.SAMLDecryptionFailed)
		}
		if first == nil {
			first = body
		} else if !bytes.Equal(body, first) {
			t.Errorf("%s answers %s, another case %s", name, body, first)
		}
	}
}

// A hostile EncryptedKey (a block cipher over a ciphertext that is not
// whole blocks, its key wrapped for the public SP certificate) is a
// refusal, not a panic that drops the connection.
func TestACSHostileEncryptedKey(t *testing.T) {
	d := readDoc(t, encryptedResponse(t, spKeyPair, testidp.Encryption{}))
	wrapper := d.Root().SelectElement("EncryptedAssertion")
	ek := wrapper.SelectElement("EncryptedData").Copy()
	ek.Tag = "EncryptedKey"
	cv := ek.FindElement("./CipherData/CipherValue")
	if cv == nil {
		t.Fatal("no CipherValue in the encrypted data")
	}
	cv.SetText("AAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	wrapper.AddChild(ek)
	f := newFixture(t, withSAML(withSPKey))
	if a := f.post(t, writeDoc(t, d), true); a.status >= 500 || a.code == "" || a.status == http.StatusOK {
		t.Fatalf("hostile EncryptedKey: %d %q", a.status, a.code)
	}
}

// rawPost posts doc as a JSON client and returns the status and the body
// as sent.
func rawPost(t *testing.T, f *fixture, doc []byte) (int, []byte) {
	t.Helper()
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(doc)}}
	resp, body := testkit.Do(t, nil, f.acsRequest(t, form.Encode(), "application/json"))
	return resp.StatusCode, body
}
