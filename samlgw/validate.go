package samlgw

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/xml"
	"slices"
	"strings"
	"time"

	"github.com/beevik/etree"
	"github.com/crewjam/saml"
	"github.com/russellhaering/goxmldsig/etreeutils"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/reason"
)

// IDP is what the gateway trusts of the identity provider, from its
// metadata.
type IDP struct {
	// EntityID must be the Issuer of every response and assertion.
	EntityID string
	// Certs verify signatures.
	Certs []*x509.Certificate
	// SSOURL receives AuthnRequests (HTTP-Redirect binding).
	SSOURL string
}

// Identity is a validated assertion's subject and attributes.
type Identity struct {
	// AssertionID is the assertion's ID (remembered against replay).
	AssertionID string
	// NameID is the subject, read as its whole text.
	NameID string
	// Email, Roles and Tenant come through the attribute mapping.
	Email  string
	Roles  []string
	Tenant string
	// Attributes are every other attribute by name.
	Attributes map[string][]string
	// NotOnOrAfter is when the assertion stops being valid.
	NotOnOrAfter time.Time
	// InResponseTo is the request answered, "" for IdP-initiated.
	InResponseTo string
}

// validator holds the rules of the ACS, independent of HTTP.
type validator struct {
	entityID, acsURL  string
	skew              time.Duration
	allowIDPInitiated bool
	// skipSignature is SVC_ENV=development: signatures are not checked,
	// every other rule is.
	skipSignature bool
	mapping       config.AttributeMapping
	spKey         crypto.PrivateKey // decrypts EncryptedAssertion; may be nil
	store         Store
	requests      *requestIDs
	now           func() time.Time
}

// Replay and request keys in the store.
const (
	keyReplay  = "svc:saml:assertion:"
	keyRequest = "svc:saml:answered:"
)

// validate runs every rule on a decoded SAMLResponse. On success the
// assertion id is remembered and the answered request consumed.
func (v *validator) validate(ctx context.Context, data []byte, idp *IDP) (*Identity, error) {
	now := v.now()
	// ctx ends when the client leaves or the ACS deadline passes: the
	// stages below look at it between them (the scan also within).
	d, err := ParseResponse(ctx, data)
	if err != nil {
		return nil, err
	}
	respEl, assertionEl := d.response, d.assertion
	if !v.skipSignature && d.respSig != nil {
		if err := ctxErr(ctx); err != nil {
			return nil, err
		}
		if respEl, err = verifySigned(d.response, idp.Certs, now); err != nil {
			return nil, err
		}
		assertionEl = childNS(respEl, nsAssertion, "Assertion")
	}
	if d.encrypted != nil {
		enc := d.encrypted
		if respEl != d.response {
			enc = childNS(respEl, nsAssertion, "EncryptedAssertion")
		}
		if assertionEl, err = v.decrypt(ctx, enc); err != nil {
			return nil, err
		}
	}
	if assertionEl == nil {
		return nil, refuse(reason.SAMLMalformed, "the response holds no assertion")
	}
	if !v.skipSignature {
		if childNS(assertionEl, nsDSig, "Signature") != nil {
			if err := ctxErr(ctx); err != nil {
				return nil, err
			}
			if assertionEl, err = verifySigned(assertionEl, idp.Certs, now); err != nil {
				return nil, err
			}
		} else if d.respSig == nil {
			return nil, refuse(reason.SAMLSignatureInvalid, "neither the Response nor the Assertion is signed")
		}
	}

	var a saml.Assertion
	if err := unmarshalElement(assertionEl, &a); err != nil {
		return nil, refuse(reason.SAMLMalformed, "assertion: %s", firstLine(err.Error()))
	}
	id, err := v.check(respEl, d.respSig != nil, &a, idp, now)
	if err != nil {
		return nil, err
	}
	if err := v.mapAttributes(&a, id); err != nil {
		return nil, err
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	// The answered request: one this gateway minted, not expired.
	var reqExp time.Time
	if id.InResponseTo != "" {
		exp, ok, err := v.requests.verify(ctx, id.InResponseTo, v.skew)
		if err != nil {
			if e := ctxErr(ctx); e != nil {
				return nil, e
			}
			return nil, &Error{Code: reason.SAMLStoreUnavailable, Msg: "request key unavailable", Err: err}
		}
		if !ok {
			return nil, refuse(reason.SAMLRequestUnknown, "InResponseTo names no request of this service provider, or one over %s old", RequestTTL)
		}
		reqExp = exp
	}
	// Last, so that a refused assertion burns neither its id nor the
	// request it answers; nor does one whose client has left.
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	ttl := id.NotOnOrAfter.Add(v.skew).Sub(now)
	fresh, err := v.store.Add(ctx, keyReplay+id.AssertionID, max(ttl, time.Second))
	if err != nil {
		return nil, storeErr(ctx, err)
	}
	if !fresh {
		return nil, refuse(reason.SAMLReplayed, "assertion already used")
	}
	if id.InResponseTo != "" {
		fresh, err := v.store.Add(ctx, keyRequest+id.InResponseTo, max(reqExp.Add(v.skew).Sub(now), time.Second))
		if err != nil {
			return nil, storeErr(ctx, err)
		}
		if !fresh {
			return nil, refuse(reason.SAMLRequestUnknown, "the request InResponseTo names was already answered")
		}
	}
	return id, nil
}

// storeErr is the refusal for a replay store failure: saml-busy when the
// request ended while the store answered, else the store is unavailable.
func storeErr(ctx context.Context, err error) error {
	if e := ctxErr(ctx); e != nil {
		return e
	}
	return &Error{Code: reason.SAMLStoreUnavailable, Msg: "replay cache unavailable", Err: err}
}

// check applies issuer, status, destination, audience, recipient, time
// and request rules.
func (v *validator) check(resp *etree.Element, respSigned bool, a *saml.Assertion, idp *IDP, now time.Time) (*Identity, error) {
	if c := statusCode(resp); c != statusSuccess {
		return nil, refuse(reason.SAMLStatusFailure, "the identity provider answered %s", clip(c))
	}
	if iss := childNS(resp, nsAssertion, "Issuer"); iss != nil && strings.TrimSpace(iss.Text()) != idp.EntityID {
		return nil, refuse(reason.SAMLUntrustedIssuer, "the response Issuer is not the identity provider %s", idp.EntityID)
	}
	if strings.TrimSpace(a.Issuer.Value) != idp.EntityID {
		return nil, refuse(reason.SAMLUntrustedIssuer, "the assertion Issuer is not the identity provider %s", idp.EntityID)
	}
	if dst := resp.SelectAttrValue("Destination", ""); dst != v.acsURL && (dst != "" || respSigned) {
		return nil, refuse(reason.SAMLRecipientMismatch, "Destination is not %s", v.acsURL)
	}
	if a.ID == "" {
		return nil, refuse(reason.SAMLMalformed, "assertion without an ID")
	}
	if a.Subject == nil || a.Subject.NameID == nil || strings.TrimSpace(a.Subject.NameID.Value) == "" {
		return nil, refuse(reason.SAMLMalformed, "assertion without a Subject NameID")
	}
	if !a.IssueInstant.IsZero() && a.IssueInstant.After(now.Add(v.skew)) {
		return nil, refuse(reason.SAMLNotYetValid, "assertion issued in the future")
	}
	id := &Identity{AssertionID: a.ID, NameID: strings.TrimSpace(a.Subject.NameID.Value)}

	// Conditions: required, with the audience and the validity window.
	c := a.Conditions
	if c == nil {
		return nil, refuse(reason.SAMLAudienceMismatch, "assertion without Conditions (no audience restriction)")
	}
	if !c.NotBefore.IsZero() && c.NotBefore.After(now.Add(v.skew)) {
		return nil, refuse(reason.SAMLNotYetValid, "Conditions NotBefore is in the future")
	}
	if !c.NotOnOrAfter.IsZero() && !now.Before(c.NotOnOrAfter.Add(v.skew)) {
		return nil, refuse(reason.SAMLExpired, "Conditions NotOnOrAfter has passed")
	}
	if len(c.AudienceRestrictions) == 0 {
		return nil, refuse(reason.SAMLAudienceMismatch, "no AudienceRestriction")
	}
	for _, ar := range c.AudienceRestrictions {
		// Every restriction must admit us (SAML core 2.5.1.4).
		if strings.TrimSpace(ar.Audience.Value) != v.entityID {
			return nil, refuse(reason.SAMLAudienceMismatch, "the audience is not %s", v.entityID)
		}
	}

	// A bearer confirmation for our ACS, within its window.
	var scd *saml.SubjectConfirmationData
	for i := range a.Subject.SubjectConfirmations {
		sc := &a.Subject.SubjectConfirmations[i]
		if sc.Method == "urn:oasis:names:tc:SAML:2.0:cm:bearer" && sc.SubjectConfirmationData != nil {
			scd = sc.SubjectConfirmationData
			break
		}
	}
	if scd == nil {
		return nil, refuse(reason.SAMLMalformed, "no bearer SubjectConfirmation")
	}
	if scd.Recipient != v.acsURL {
		return nil, refuse(reason.SAMLRecipientMismatch, "the bearer Recipient is not %s", v.acsURL)
	}
	if scd.NotOnOrAfter.IsZero() {
		return nil, refuse(reason.SAMLMalformed, "SubjectConfirmationData without NotOnOrAfter")
	}
	if !now.Before(scd.NotOnOrAfter.Add(v.skew)) {
		return nil, refuse(reason.SAMLExpired, "SubjectConfirmationData NotOnOrAfter has passed")
	}
	if !scd.NotBefore.IsZero() && scd.NotBefore.After(now.Add(v.skew)) {
		return nil, refuse(reason.SAMLNotYetValid, "SubjectConfirmationData NotBefore is in the future")
	}
	id.NotOnOrAfter = scd.NotOnOrAfter
	if !c.NotOnOrAfter.IsZero() && c.NotOnOrAfter.After(id.NotOnOrAfter) {
		id.NotOnOrAfter = c.NotOnOrAfter
	}

	// InResponseTo: the same on the Response and the confirmation, and a
	// request of ours (its HMAC checked in validate), or absent when
	// IdP-initiated sign-on is allowed. An unsigned Response's own
	// InResponseTo is not read: anyone could add it around a signed
	// IdP-initiated assertion to pass it off as solicited.
	respIRT := ""
	if respSigned || v.skipSignature {
		respIRT = resp.SelectAttrValue("InResponseTo", "")
	}
	irt := scd.InResponseTo
	if respIRT != "" && irt != "" && respIRT != irt {
		return nil, refuse(reason.SAMLRequestUnknown, "the Response and the assertion answer different requests")
	}
	if irt == "" {
		irt = respIRT
	}
	if irt == "" && !v.allowIDPInitiated {
		return nil, refuse(reason.SAMLUnsolicited, "unsolicited response (no InResponseTo) and allow_idp_initiated is false")
	}
	id.InResponseTo = irt
	return id, nil
}

// registeredClaims are claims an attribute can never set, in any case:
// see registeredClaim. The last four are those of the OpenID Connect
// gateway's session tokens, signed by the same issuer: the checks look
// a token that names a provider (idp) up among that provider's logouts,
// by idp_sid, session_id and auth_time, so a SAML attribute of those
// names would make a SAML session answer for another's logout.
var registeredClaims = []string{
	"iss", "sub", "aud", "exp", "nbf", "iat", "jti",
	"tenant_id", "role", "roles", "email",
	"idp", "idp_sid", "session_id", "auth_time",
}

// registeredClaim reports whether an attribute named name would shadow a
// registered claim. Names are compared with Unicode case folding, as
// encoding/json matches object keys to struct fields (and many other
// decoders ignore case): an application that reads the token that way
// would take "Tenant_ID", or "ſub" (long s), for the claim itself.
func registeredClaim(name string) bool {
	for _, c := range registeredClaims {
		if strings.EqualFold(name, c) {
			return true
		}
	}
	return false
}

func (v *validator) mapAttributes(a *saml.Assertion, id *Identity) error {
	id.Attributes = map[string][]string{}
	var tenants []string
	for _, st := range a.AttributeStatements {
		for _, at := range st.Attributes {
			var vals []string
			for _, av := range at.Values {
				if s := strings.TrimSpace(av.Value); s != "" {
					vals = append(vals, s)
				}
			}
			switch at.Name {
			case v.mapping.Tenant:
				tenants = append(tenants, vals...)
			case v.mapping.Role:
				id.Roles = append(id.Roles, vals...)
			case v.mapping.Email:
				if len(vals) > 0 && id.Email == "" {
					id.Email = vals[0]
				}
			default:
				if at.Name != "" && !registeredClaim(at.Name) && len(vals) > 0 {
					id.Attributes[at.Name] = append(id.Attributes[at.Name], vals...)
				}
			}
		}
	}
	slices.Sort(tenants)
	tenants = slices.Compact(tenants)
	if len(tenants) != 1 {
		return refuse(reason.SAMLTenantMissing, "the assertion must carry exactly one %q attribute value, got %d", v.mapping.Tenant, len(tenants))
	}
	id.Tenant = tenants[0]
	if id.Email == "" && a.Subject.NameID.Format == string(saml.EmailAddressNameIDFormat) {
		id.Email = id.NameID
	}
	return nil
}

// unmarshalElement decodes el, with the namespace declarations in scope,
// into v. encoding/xml joins all character data of an element, so a
// comment inside NameID does not cut its text short.
func unmarshalElement(el *etree.Element, v any) error {
	ctx, err := etreeutils.NSBuildParentContext(el)
	if err != nil {
		return err
	}
	if ctx, err = ctx.SubContext(el); err != nil {
		return err
	}
	detached, err := etreeutils.NSDetatch(ctx, el)
	if err != nil {
		return err
	}
	doc := etree.NewDocument()
	doc.SetRoot(detached)
	buf, err := doc.WriteToBytes()
	if err != nil {
		return err
	}
	return xml.NewDecoder(bytes.NewReader(buf)).Decode(v)
}
