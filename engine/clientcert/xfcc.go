package clientcert

import (
	"strings"

	"github.com/svc-dev/svc/reason"
)

// Element is one element of an X-Forwarded-Client-Cert header: what one
// proxy says about the client certificate it verified.
type Element struct {
	// By is the URI SAN of the proxy's own certificate.
	By []string
	// Hash is the SHA-256 of the client certificate's DER, in hex.
	Hash string
	// Cert is the client certificate, PEM, URL-encoded.
	Cert string
	// Subject is the certificate's subject.
	Subject string
	// URIs are the certificate's URI SANs.
	URIs []string
	// DNS are the certificate's DNS SANs.
	DNS []string
}

// LastElement parses an X-Forwarded-Client-Cert header in Envoy's
// format and returns its last element: the one the nearest proxy added.
//
// Elements are separated by ",", their key=value pairs by ";"; keys are
// matched case-insensitively, unknown keys are ignored, and a value may
// be quoted ("..."), with "\" escaping the next character, to hold ",",
// ";" or "=". Space around elements and pairs is ignored. The whole
// header is parsed, so that one malformed element refuses it all: an
// empty element or pair, a pair without "=", an unterminated quote, a
// stray quote in an unquoted value, a Hash, Cert or Subject given twice in
// one element, or a header over MaxHeader bytes is a
// reason.ClientCertInvalid error.
func LastElement(header string) (Element, error) {
	if len(header) > MaxHeader {
		return Element{}, reason.New(reason.ClientCertInvalid, "the X-Forwarded-Client-Cert header is over %d bytes", MaxHeader)
	}
	p := xfccParser{s: header}
	var last Element
	for {
		el, err := p.element()
		if err != nil {
			return Element{}, err
		}
		last = el
		if p.i == len(p.s) {
			return last, nil
		}
		p.i++ // the ","
	}
}

type xfccParser struct {
	s string
	i int
}

func invalidXFCC(what string) error {
	return reason.New(reason.ClientCertInvalid, "the X-Forwarded-Client-Cert header is malformed: %s", what)
}

func (p *xfccParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// element parses pairs up to the next "," outside quotes or the end.
func (p *xfccParser) element() (Element, error) {
	var el Element
	for {
		p.skipSpace()
		start := p.i
		for p.i < len(p.s) && p.s[p.i] != '=' && p.s[p.i] != ';' && p.s[p.i] != ',' && p.s[p.i] != '"' {
			p.i++
		}
		key := strings.TrimRight(p.s[start:p.i], " \t")
		if p.i == len(p.s) || p.s[p.i] != '=' {
			if key == "" {
				return Element{}, invalidXFCC("an empty element or pair")
			}
			return Element{}, invalidXFCC("a pair without '='")
		}
		if key == "" {
			return Element{}, invalidXFCC("a pair without a key")
		}
		p.i++ // "="
		p.skipSpace()
		value, err := p.value()
		if err != nil {
			return Element{}, err
		}
		if err := el.set(key, value); err != nil {
			return Element{}, err
		}
		p.skipSpace()
		if p.i == len(p.s) || p.s[p.i] == ',' {
			return el, nil
		}
		p.i++ // ";"
	}
}

// value parses a quoted or bare value, leaving p at the separator after
// it or at the end.
func (p *xfccParser) value() (string, error) {
	if p.i < len(p.s) && p.s[p.i] == '"' {
		p.i++
		var b strings.Builder
		for p.i < len(p.s) {
			c := p.s[p.i]
			switch c {
			case '\\':
				if p.i+1 == len(p.s) {
					return "", invalidXFCC("an unterminated quoted value")
				}
				b.WriteByte(p.s[p.i+1])
				p.i += 2
				continue
			case '"':
				p.i++
				p.skipSpace()
				if p.i < len(p.s) && p.s[p.i] != ';' && p.s[p.i] != ',' {
					return "", invalidXFCC("text after a quoted value")
				}
				return b.String(), nil
			}
			b.WriteByte(c)
			p.i++
		}
		return "", invalidXFCC("an unterminated quoted value")
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ';' && p.s[p.i] != ',' {
		if c := p.s[p.i]; c == '"' || c == '=' {
			return "", invalidXFCC("a quote or '=' in an unquoted value")
		}
		p.i++
	}
	return strings.TrimRight(p.s[start:p.i], " \t"), nil
}

func (el *Element) set(key, value string) error {
	once := func(dst *string, name string) error {
		if *dst != "" {
			return invalidXFCC(name + " given twice in one element")
		}
		*dst = value
		return nil
	}
	switch strings.ToLower(key) {
	case "by":
		el.By = append(el.By, value)
	case "hash":
		return once(&el.Hash, "Hash")
	case "cert":
		return once(&el.Cert, "Cert")
	case "subject":
		return once(&el.Subject, "Subject")
	case "uri":
		el.URIs = append(el.URIs, value)
	case "dns":
		el.DNS = append(el.DNS, value)
	}
	return nil
}
