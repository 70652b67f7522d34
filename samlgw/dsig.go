package samlgw

import (
	"crypto/x509"
	"time"

	"github.com/beevik/etree"
	dsig "github.com/russellhaering/goxmldsig"
	"github.com/russellhaering/goxmldsig/etreeutils"
	"github.com/svc-dev/svc/reason"
)

// Signature and digest methods accepted: SHA-256 or stronger. SHA-1 is
// refused whatever the IdP sends.
var (
	allowedSignatureMethods = map[string]bool{
		dsig.RSASHA256SignatureMethod:   true,
		dsig.RSASHA384SignatureMethod:   true,
		dsig.RSASHA512SignatureMethod:   true,
		dsig.ECDSASHA256SignatureMethod: true,
		dsig.ECDSASHA384SignatureMethod: true,
		dsig.ECDSASHA512SignatureMethod: true,
	}
	allowedDigestMethods = map[string]bool{
		"http://www.w3.org/2001/04/xmlenc#sha256":       true,
		"http://www.w3.org/2001/04/xmldsig-more#sha384": true,
		"http://www.w3.org/2001/04/xmlenc#sha512":       true,
	}
	allowedTransforms = map[string]bool{
		string(dsig.EnvelopedSignatureAltorithmId):                  true,
		string(dsig.CanonicalXML10ExclusiveAlgorithmId):             true,
		string(dsig.CanonicalXML10ExclusiveWithCommentsAlgorithmId): true,
	}
)

// checkSignedInfo holds a signature to the shape SAML uses: one Reference,
// to the element the Signature is a child of (so the signed element is the
// element whose content is read), with allowed algorithms only.
func checkSignedInfo(sig *etree.Element, owner *etree.Element) error {
	si := childNS(sig, nsDSig, "SignedInfo")
	if si == nil {
		return refuse(reason.SAMLSignatureInvalid, "signature without exactly one SignedInfo")
	}
	sm := childNS(si, nsDSig, "SignatureMethod")
	if sm == nil {
		return refuse(reason.SAMLSignatureInvalid, "signature without a SignatureMethod")
	}
	if alg := sm.SelectAttrValue("Algorithm", ""); !allowedSignatureMethods[alg] {
		return refuse(reason.SAMLAlgorithmNotAllowed, "signature method %q is not accepted (RSA or ECDSA with SHA-256 or stronger)", clip(alg))
	}
	refs := childrenNS(si, nsDSig, "Reference")
	if len(refs) != 1 {
		return refuse(reason.SAMLSignatureInvalid, "signature with %d references; exactly one is accepted", len(refs))
	}
	id := owner.SelectAttrValue("ID", "")
	if id == "" || refs[0].SelectAttrValue("URI", "") != "#"+id {
		return refuse(reason.SAMLSignatureInvalid, "the signature does not reference the element that carries it")
	}
	dm := childNS(refs[0], nsDSig, "DigestMethod")
	if dm == nil {
		return refuse(reason.SAMLSignatureInvalid, "reference without a DigestMethod")
	}
	if alg := dm.SelectAttrValue("Algorithm", ""); !allowedDigestMethods[alg] {
		return refuse(reason.SAMLAlgorithmNotAllowed, "digest method %q is not accepted (SHA-256 or stronger)", clip(alg))
	}
	if ts := childNS(refs[0], nsDSig, "Transforms"); ts != nil {
		for _, t := range ts.ChildElements() {
			if alg := t.SelectAttrValue("Algorithm", ""); !allowedTransforms[alg] {
				return refuse(reason.SAMLSignatureInvalid, "transform %q is not accepted", clip(alg))
			}
		}
	}
	return nil
}

// verifySigned checks the enveloped signature of el against each trusted
// certificate and returns the verified copy of el: the content that was
// signed, and the only content read afterwards. KeyInfo in the message is
// ignored: only the certificates of the IdP metadata are trusted.
func verifySigned(el *etree.Element, certs []*x509.Certificate, now time.Time) (*etree.Element, error) {
	sig := childNS(el, nsDSig, "Signature")
	if sig == nil {
		return nil, refuse(reason.SAMLSignatureInvalid, "not signed")
	}
	if err := checkSignedInfo(sig, el); err != nil {
		return nil, err
	}
	ctx, err := etreeutils.NSBuildParentContext(el)
	if err != nil {
		return nil, refuse(reason.SAMLMalformed, "namespace context: %s", firstLine(err.Error()))
	}
	if ctx, err = ctx.SubContext(el); err != nil {
		return nil, refuse(reason.SAMLMalformed, "namespace context: %s", firstLine(err.Error()))
	}
	detached, err := etreeutils.NSDetatch(ctx, el)
	if err != nil {
		return nil, refuse(reason.SAMLMalformed, "namespace context: %s", firstLine(err.Error()))
	}
	if s := childNS(detached, nsDSig, "Signature"); s != nil {
		for _, ki := range childrenNS(s, nsDSig, "KeyInfo") {
			s.RemoveChild(ki)
		}
	}
	if len(certs) == 0 {
		return nil, refuse(reason.SAMLSignatureInvalid, "the IdP metadata has no signing certificate")
	}
	for _, cert := range certs {
		vc := dsig.NewDefaultValidationContext(&dsig.MemoryX509CertificateStore{Roots: []*x509.Certificate{cert}})
		vc.IdAttribute = "ID"
		vc.Clock = dsig.NewFakeClockAt(now)
		out, err := safeValidate(vc, detached)
		if err == nil {
			return out, nil
		}
	}
	return nil, refuse(reason.SAMLSignatureInvalid, "the signature does not verify with the IdP's certificates")
}

// safeValidate turns a panic of the signature library on hostile input
// into a failed verification.
func safeValidate(vc *dsig.ValidationContext, el *etree.Element) (out *etree.Element, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, refuse(reason.SAMLSignatureInvalid, "signature could not be processed")
		}
	}()
	return vc.Validate(el)
}

func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
