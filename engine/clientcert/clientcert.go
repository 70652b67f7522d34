// Package clientcert reads the client certificate a proxy verified and
// vouches for: the SPIFFE ID (RFC-like spiffe://<trust-domain>/<path>)
// of the calling workload, from Envoy's Check attributes (the source
// peer's principal and URL-encoded certificate) or from an
// X-Forwarded-Client-Cert header in Envoy's format.
//
// It parses what the caller controls only through the proxy, but a
// proxy that passes a client's own header through would hand the client
// the parser: every input is bounded and every failure is a
// reason.ClientCertInvalid error, never a panic.
package clientcert

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"strings"

	"github.com/svc-dev/svc/reason"
)

// Size bounds of what a proxy may present.
const (
	// MaxHeader bounds an X-Forwarded-Client-Cert header (Envoy's own
	// limit on a request's headers is 60 KiB).
	MaxHeader = 64 << 10
	// MaxCertificate bounds one certificate, URL-encoded PEM: a leaf
	// certificate is 1 to 3 KiB.
	MaxCertificate = 16 << 10
)

// Presented is what a proxy vouched for about the client's certificate.
// A zero Presented means none was presented. Its fields are the proxy's
// words as received; Identify judges them.
type Presented struct {
	// Principal is Envoy's attributes.source.principal: the first URI
	// SAN of the verified certificate, else its subject.
	Principal string
	// Certificate is Envoy's attributes.source.certificate: the
	// certificate, PEM, URL-encoded; empty unless Envoy's ext_authz
	// filter sets include_peer_certificate.
	Certificate string
	// XFCC is an X-Forwarded-Client-Cert header from a trusted proxy.
	XFCC string
}

// IsZero reports whether p presents nothing.
func (p Presented) IsZero() bool { return p == Presented{} }

// Identify returns the SPIFFE ID p names, or a reason.ClientCertInvalid
// error saying why there is none.
//
// With an X-Forwarded-Client-Cert header, the element the nearest proxy
// added (the last) is read. With a certificate (Envoy's, or the
// element's Cert), the ID is the certificate's one SPIFFE URI SAN, and a
// principal or URI that names another ID is refused: the two come from
// the same proxy, so a mismatch means the input was tampered with.
// Without a certificate, the principal or the element's one SPIFFE URI
// is the ID.
func Identify(p Presented) (ID, error) {
	principal, cert := p.Principal, p.Certificate
	var uris []string
	if p.XFCC != "" {
		el, err := LastElement(p.XFCC)
		if err != nil {
			return ID{}, err
		}
		cert, uris = el.Cert, el.URIs
	}
	if principal != "" {
		uris = append(uris, principal)
	}
	if cert != "" {
		id, err := certificateID(cert)
		if err != nil {
			return ID{}, err
		}
		for _, u := range uris {
			if u != id.String() && strings.HasPrefix(u, Scheme) {
				return ID{}, reason.New(reason.ClientCertInvalid, "the certificate's SPIFFE ID and the one the proxy named differ")
			}
		}
		return id, nil
	}
	var found ID
	for _, u := range uris {
		if !strings.HasPrefix(u, Scheme) {
			continue
		}
		id, err := ParseID(u)
		if err != nil {
			return ID{}, err
		}
		if found.TrustDomain != "" && found != id {
			return ID{}, reason.New(reason.ClientCertInvalid, "the proxy named more than one SPIFFE ID")
		}
		found = id
	}
	if found.TrustDomain == "" {
		return ID{}, reason.New(reason.ClientCertInvalid, "the client certificate names no SPIFFE ID")
	}
	return found, nil
}

// certificateID decodes a URL-encoded PEM certificate and returns its one
// SPIFFE URI SAN (an X.509-SVID has exactly one URI SAN).
func certificateID(escaped string) (ID, error) {
	if len(escaped) > MaxCertificate {
		return ID{}, reason.New(reason.ClientCertInvalid, "the client certificate is over %d bytes", MaxCertificate)
	}
	// Path unescaping keeps a "+" of the base64 a "+", not a space.
	raw, err := url.PathUnescape(escaped)
	if err != nil {
		return ID{}, reason.New(reason.ClientCertInvalid, "the client certificate is not URL-encoded")
	}
	block, rest := pem.Decode([]byte(raw))
	if block == nil || block.Type != "CERTIFICATE" {
		return ID{}, reason.New(reason.ClientCertInvalid, "the client certificate is not a PEM certificate")
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return ID{}, reason.New(reason.ClientCertInvalid, "the client certificate is followed by more data")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return ID{}, reason.New(reason.ClientCertInvalid, "the client certificate does not parse")
	}
	var found ID
	n := 0
	for _, u := range c.URIs {
		if u.Scheme != "spiffe" {
			continue
		}
		id, err := ParseID(u.String())
		if err != nil {
			return ID{}, err
		}
		found = id
		n++
	}
	switch n {
	case 0:
		return ID{}, reason.New(reason.ClientCertInvalid, "the client certificate has no SPIFFE ID among its URI SANs")
	case 1:
		return found, nil
	}
	return ID{}, reason.New(reason.ClientCertInvalid, "the client certificate has more than one SPIFFE ID")
}
