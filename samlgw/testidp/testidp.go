// Package testidp is a local SAML identity provider for tests and for
// `core saml test-assertion`: an RSA-2048 key pair kept in a directory,
// its metadata, and SAML Responses built from explicit fields, signed
// (RSA-SHA256, exclusive c14n) over the Assertion.
//
// It signs with github.com/russellhaering/goxmldsig; the gateway's tests
// also sign the same documents with xmlsec1, an independent signer.
package testidp

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
)

// File names in an IdP directory.
const (
	KeyFile  = "idp-key.pem"
	CertFile = "idp-cert.pem"
)

// IdP is a test identity provider.
type IdP struct {
	EntityID string
	SSOURL   string
	Key      *rsa.PrivateKey
	Cert     *x509.Certificate
	KeyPEM   []byte
	CertPEM  []byte
}

// Generate makes an IdP with a new RSA-2048 key and a self-signed
// certificate valid for ten years.
func Generate(entityID, ssoURL string) (*IdP, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "svc test IdP"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &IdP{
		EntityID: entityID, SSOURL: ssoURL, Key: key, Cert: cert,
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
	}, nil
}

// LoadOrCreate reads the key pair from dir, or creates dir and a new pair
// (files mode 0600) when there is none. created reports the latter.
func LoadOrCreate(dir, entityID, ssoURL string) (idp *IdP, created bool, err error) {
	keyPEM, kerr := os.ReadFile(filepath.Join(dir, KeyFile))
	certPEM, cerr := os.ReadFile(filepath.Join(dir, CertFile))
	if errors.Is(kerr, fs.ErrNotExist) && errors.Is(cerr, fs.ErrNotExist) {
		idp, err := Generate(entityID, ssoURL)
		if err != nil {
			return nil, false, err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, false, err
		}
		if err := os.WriteFile(filepath.Join(dir, KeyFile), idp.KeyPEM, 0o600); err != nil {
			return nil, false, err
		}
		if err := os.WriteFile(filepath.Join(dir, CertFile), idp.CertPEM, 0o600); err != nil {
			return nil, false, err
		}
		return idp, true, nil
	}
	if kerr != nil {
		return nil, false, kerr
	}
	if cerr != nil {
		return nil, false, cerr
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, false, fmt.Errorf("IdP key pair in %s: %w", dir, err)
	}
	key, ok := pair.PrivateKey.(*rsa.PrivateKey)
	if !ok {
		return nil, false, fmt.Errorf("IdP key in %s is not RSA", dir)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, false, err
	}
	return &IdP{EntityID: entityID, SSOURL: ssoURL, Key: key, Cert: cert, KeyPEM: keyPEM, CertPEM: certPEM}, false, nil
}

// Metadata is the IdP's EntityDescriptor: signing certificate and an
// HTTP-Redirect SSO location.
func (i *IdP) Metadata() []byte {
	var b bytes.Buffer
	_ = metadataTmpl.Execute(&b, map[string]string{
		"EntityID": i.EntityID, "SSOURL": i.SSOURL,
		"Cert": base64.StdEncoding.EncodeToString(i.Cert.Raw),
	})
	return b.Bytes()
}

var funcs = template.FuncMap{"x": func(s string) string {
	var b strings.Builder
	_ = xmlEscape(&b, s)
	return b.String()
}}

var metadataTmpl = template.Must(template.New("md").Funcs(funcs).Parse(`<?xml version="1.0" encoding="UTF-8"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="{{x .EntityID}}">
  <md:IDPSSODescriptor WantAuthnRequestsSigned="false" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:KeyDescriptor use="signing">
      <ds:KeyInfo xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:X509Data><ds:X509Certificate>{{.Cert}}</ds:X509Certificate></ds:X509Data></ds:KeyInfo>
    </md:KeyDescriptor>
    <md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</md:NameIDFormat>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="{{x .SSOURL}}"/>
    <md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="{{x .SSOURL}}"/>
  </md:IDPSSODescriptor>
</md:EntityDescriptor>
`))

// Attribute is one SAML attribute with its values.
type Attribute struct {
	Name   string
	Values []string
}

// Response are the fields of a SAML Response with one Assertion. Zero
// fields get the defaults of Defaults.
type Response struct {
	ResponseID, AssertionID string
	InResponseTo            string
	Destination, Recipient  string
	Audience                string
	Issuer                  string
	NameID                  string
	IssueInstant            time.Time
	NotBefore, NotOnOrAfter time.Time
	Status                  string
	Attributes              []Attribute
	// SignatureMethod / DigestMethod of the signature template; default
	// RSA-SHA256 / SHA-256.
	SignatureMethod, DigestMethod string
	// SignResponse puts the signature template on the Response instead
	// of the Assertion (XML only; Sign always signs the Assertion).
	SignResponse bool
}

// Defaults fills the zero fields: fresh ids, now, a five-minute window,
// status Success, the IdP as issuer.
func (i *IdP) Defaults(r Response) Response {
	now := time.Now().UTC()
	if r.ResponseID == "" {
		r.ResponseID = NewID()
	}
	if r.AssertionID == "" {
		r.AssertionID = NewID()
	}
	if r.Issuer == "" {
		r.Issuer = i.EntityID
	}
	if r.IssueInstant.IsZero() {
		r.IssueInstant = now
	}
	if r.NotBefore.IsZero() {
		r.NotBefore = now.Add(-time.Minute)
	}
	if r.NotOnOrAfter.IsZero() {
		r.NotOnOrAfter = now.Add(5 * time.Minute)
	}
	if r.Status == "" {
		r.Status = "urn:oasis:names:tc:SAML:2.0:status:Success"
	}
	if r.SignatureMethod == "" {
		r.SignatureMethod = dsig.RSASHA256SignatureMethod
	}
	if r.DigestMethod == "" {
		r.DigestMethod = "http://www.w3.org/2001/04/xmlenc#sha256"
	}
	return r
}

// NewID returns a random SAML ID (an NCName).
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("_%x", b)
}

const timeFormat = "2006-01-02T15:04:05Z"

// XML renders r (after Defaults); with template, the Assertion carries an
// empty ds:Signature template for an external signer such as xmlsec1.
func (i *IdP) XML(r Response, withTemplate bool) []byte {
	r = i.Defaults(r)
	refID := r.AssertionID
	if r.SignResponse {
		refID = r.ResponseID
	}
	var b bytes.Buffer
	err := responseTmpl.Execute(&b, map[string]any{
		"R": r, "Template": withTemplate, "RefID": refID,
		"IssueInstant": r.IssueInstant.UTC().Format(timeFormat),
		"NotBefore":    r.NotBefore.UTC().Format(timeFormat),
		"NotOnOrAfter": r.NotOnOrAfter.UTC().Format(timeFormat),
	})
	if err != nil {
		panic(err) // the template is fixed; only a programming error gets here
	}
	return b.Bytes()
}

var responseTmpl = template.Must(template.New("r").Funcs(funcs).Parse(`<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="{{.R.ResponseID}}" Version="2.0" IssueInstant="{{.IssueInstant}}"{{if .R.Destination}} Destination="{{x .R.Destination}}"{{end}}{{if .R.InResponseTo}} InResponseTo="{{x .R.InResponseTo}}"{{end}}><saml:Issuer>{{x .R.Issuer}}</saml:Issuer>{{if and .Template .R.SignResponse}}<ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:SignedInfo><ds:CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/><ds:SignatureMethod Algorithm="{{.R.SignatureMethod}}"/><ds:Reference URI="#{{.RefID}}"><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/><ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></ds:Transforms><ds:DigestMethod Algorithm="{{.R.DigestMethod}}"/><ds:DigestValue></ds:DigestValue></ds:Reference></ds:SignedInfo><ds:SignatureValue></ds:SignatureValue><ds:KeyInfo><ds:X509Data></ds:X509Data></ds:KeyInfo></ds:Signature>{{end}}<samlp:Status><samlp:StatusCode Value="{{x .R.Status}}"/></samlp:Status><saml:Assertion xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="{{.R.AssertionID}}" Version="2.0" IssueInstant="{{.IssueInstant}}"><saml:Issuer>{{x .R.Issuer}}</saml:Issuer>{{if and .Template (not .R.SignResponse)}}<ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:SignedInfo><ds:CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/><ds:SignatureMethod Algorithm="{{.R.SignatureMethod}}"/><ds:Reference URI="#{{.RefID}}"><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/><ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></ds:Transforms><ds:DigestMethod Algorithm="{{.R.DigestMethod}}"/><ds:DigestValue></ds:DigestValue></ds:Reference></ds:SignedInfo><ds:SignatureValue></ds:SignatureValue><ds:KeyInfo><ds:X509Data></ds:X509Data></ds:KeyInfo></ds:Signature>{{end}}<saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">{{x .R.NameID}}</saml:NameID><saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData NotOnOrAfter="{{.NotOnOrAfter}}" Recipient="{{x .R.Recipient}}"{{if .R.InResponseTo}} InResponseTo="{{x .R.InResponseTo}}"{{end}}/></saml:SubjectConfirmation></saml:Subject><saml:Conditions NotBefore="{{.NotBefore}}" NotOnOrAfter="{{.NotOnOrAfter}}"><saml:AudienceRestriction><saml:Audience>{{x .R.Audience}}</saml:Audience></saml:AudienceRestriction></saml:Conditions><saml:AuthnStatement AuthnInstant="{{.IssueInstant}}"><saml:AuthnContext><saml:AuthnContextClassRef>urn:oasis:names:tc:SAML:2.0:ac:classes:PasswordProtectedTransport</saml:AuthnContextClassRef></saml:AuthnContext></saml:AuthnStatement>{{if .R.Attributes}}<saml:AttributeStatement>{{range .R.Attributes}}<saml:Attribute Name="{{x .Name}}">{{range .Values}}<saml:AttributeValue>{{x .}}</saml:AttributeValue>{{end}}</saml:Attribute>{{end}}</saml:AttributeStatement>{{end}}</saml:Assertion></samlp:Response>`))

// Sign returns r rendered and signed over the Assertion with the IdP key
// (RSA-SHA256, exclusive c14n), the signature placed after the Issuer.
func (i *IdP) Sign(r Response) ([]byte, error) {
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(i.XML(r, false)); err != nil {
		return nil, err
	}
	assertion := doc.Root().SelectElement("Assertion")
	if assertion == nil {
		return nil, errors.New("testidp: no assertion")
	}
	ctx, err := dsig.NewSigningContext(i.Key, [][]byte{i.Cert.Raw})
	if err != nil {
		return nil, err
	}
	ctx.Canonicalizer = dsig.MakeC14N10ExclusiveCanonicalizerWithPrefixList("")
	if err := ctx.SetSignatureMethod(dsig.RSASHA256SignatureMethod); err != nil {
		return nil, err
	}
	sig, err := ctx.ConstructSignature(assertion, true)
	if err != nil {
		return nil, err
	}
	assertion.InsertChildAt(1, sig)
	return doc.WriteToBytes()
}
