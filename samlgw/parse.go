package samlgw

import (
	"bytes"
	"context"

	"github.com/beevik/etree"
	"github.com/svc-dev/svc/reason"
)

// XML namespaces of the elements the gateway reads.
const (
	nsProtocol  = "urn:oasis:names:tc:SAML:2.0:protocol"
	nsAssertion = "urn:oasis:names:tc:SAML:2.0:assertion"
	nsDSig      = "http://www.w3.org/2000/09/xmldsig#"
)

// document is a Response that passed the structural checks: one Response
// at the root, exactly one (plain or encrypted) assertion as its direct
// child, unique IDs, and signatures only where SAML puts them.
type document struct {
	doc       *etree.Document
	response  *etree.Element
	assertion *etree.Element // plain Assertion, or nil when encrypted
	encrypted *etree.Element // EncryptedAssertion, or nil
	respSig   *etree.Element // ds:Signature child of the Response, or nil
}

// ParseResponse applies the structural rules to a decoded SAMLResponse:
// well-formed XML without DTD, within the ACS bounds of depth, size and
// namespace declarations, that round-trips through encoding/xml, a
// samlp:Response root holding exactly one assertion, no duplicate ID and
// no XML signature anywhere but directly under the Response or the
// Assertion. It checks no signature; every failure is an *Error. It stops
// when ctx ends.
func ParseResponse(ctx context.Context, data []byte) (*document, error) {
	// The bounds come first, in the one pass that also checks the round
	// trip: everything after it (the tree, the namespace walk, the
	// signature's canonicalization) costs more per token than the scan.
	if err := scanTokens(ctx, data, acsLimits); err != nil {
		return nil, err
	}
	doc := etree.NewDocument()
	doc.ReadSettings.Permissive = false
	if err := doc.ReadFromBytes(data); err != nil {
		return nil, refuse(reason.SAMLMalformed, "not well-formed XML")
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	root := doc.Root()
	if root == nil || root.Tag != "Response" || root.NamespaceURI() != nsProtocol {
		return nil, refuse(reason.SAMLMalformed, "root element is not a SAML 2.0 protocol Response")
	}
	d := &document{doc: doc, response: root}

	var assertions, responses, signatures int
	ids := map[string]bool{}
	var walkErr error
	walkNS(root, nil, func(el *etree.Element, ns string) bool {
		switch {
		case ns == nsAssertion && (el.Tag == "Assertion" || el.Tag == "EncryptedAssertion"):
			assertions++
		case ns == nsProtocol && el.Tag == "Response":
			responses++
		case ns == nsDSig && el.Tag == "Signature":
			signatures++
		}
		if a := el.SelectAttr("ID"); a != nil && a.Space == "" {
			if ids[a.Value] {
				walkErr = refuse(reason.SAMLMalformed, "duplicate ID attribute")
				return false
			}
			ids[a.Value] = true
		}
		return true
	})
	if walkErr != nil {
		return nil, walkErr
	}
	if responses != 1 {
		return nil, refuse(reason.SAMLMalformed, "the document holds %d Response elements", responses)
	}
	if assertions > 1 {
		return nil, refuse(reason.SAMLMultipleAssertions, "the response holds %d assertions; exactly one is accepted", assertions)
	}
	if assertions == 0 {
		// A failed login carries no assertion: say why it failed.
		if c := statusCode(root); c != "" && c != statusSuccess {
			return nil, refuse(reason.SAMLStatusFailure, "the identity provider answered %s", c)
		}
		return nil, refuse(reason.SAMLMalformed, "the response holds no assertion")
	}
	var placed int
	for _, c := range root.ChildElements() {
		switch ns := c.NamespaceURI(); {
		case ns == nsAssertion && c.Tag == "Assertion":
			d.assertion = c
		case ns == nsAssertion && c.Tag == "EncryptedAssertion":
			d.encrypted = c
		case ns == nsDSig && c.Tag == "Signature":
			if d.respSig != nil {
				return nil, refuse(reason.SAMLMalformed, "the Response carries more than one Signature")
			}
			d.respSig = c
			placed++
		}
	}
	if d.assertion == nil && d.encrypted == nil {
		return nil, refuse(reason.SAMLMalformed, "the assertion is not a direct child of the Response")
	}
	if d.assertion != nil {
		n := len(childrenNS(d.assertion, nsDSig, "Signature"))
		if n > 1 {
			return nil, refuse(reason.SAMLMalformed, "the Assertion carries more than one Signature")
		}
		placed += n
	}
	if d.encrypted == nil && signatures != placed {
		return nil, refuse(reason.SAMLMalformed, "an XML signature is out of place")
	}
	return d, nil
}

// childrenNS returns the child elements of el named tag in namespace ns.
// It resolves each child's namespace up the parent chain, a cost of el's
// depth: callers use it on elements near the root (Response, Assertion,
// Signature), never to walk a whole tree (walkNS does).
func childrenNS(el *etree.Element, ns, tag string) []*etree.Element {
	var out []*etree.Element
	for _, c := range el.ChildElements() {
		if c.Tag == tag && c.NamespaceURI() == ns {
			out = append(out, c)
		}
	}
	return out
}

func childNS(el *etree.Element, ns, tag string) *etree.Element {
	if c := childrenNS(el, ns, tag); len(c) == 1 {
		return c[0]
	}
	return nil
}

const statusSuccess = "urn:oasis:names:tc:SAML:2.0:status:Success"

// statusCode returns the top-level StatusCode value of a Response element.
func statusCode(resp *etree.Element) string {
	st := childNS(resp, nsProtocol, "Status")
	if st == nil {
		return ""
	}
	c := childNS(st, nsProtocol, "StatusCode")
	if c == nil {
		return ""
	}
	return c.SelectAttrValue("Value", "")
}

func firstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
