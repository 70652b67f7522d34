package samlgw

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"

	"github.com/beevik/etree"
	xrv "github.com/mattermost/xml-roundtrip-validator"
	"github.com/svc-dev/svc/reason"
)

// limits bound the shape of a document before any tree is built: what
// the parsers, the namespace resolution and the canonicalization of a
// signature cost grows with these figures (some with their product), so
// a document over any of them is refused from the single token scan. A
// zero field is no bound.
type limits struct {
	// Depth is the deepest element nesting (the root is depth 1).
	Depth int
	// Elements is the number of elements in the document.
	Elements int
	// Attrs is the number of attributes (namespace declarations
	// included) of one element.
	Attrs int
	// NSScope is the number of namespace declarations in scope at once,
	// summed over an element and its ancestors: the signature library
	// copies that many prefixes for every element it visits.
	NSScope int
	// Tokens is the number of tokens (tags, text, comments) in all.
	Tokens int
	// RoundTrip checks that every start tag survives a round trip
	// through encoding/xml unchanged (github.com/mattermost/
	// xml-roundtrip-validator): the signature library and the assertion
	// decoder must read the names and attributes the scan read.
	RoundTrip bool
}

// acsLimits bound what the ACS reads from unauthenticated clients. A real
// Response nests under 30 deep, holds under 2,000 elements (6,000
// tokens) and fewer than ten namespace declarations in scope at once; the
// bounds leave a wide margin. At the bounds, the whole validation of a
// document costs under 100 ms of CPU (BenchmarkACSValidateAtTheBounds).
var acsLimits = limits{Depth: 64, Elements: 10_000, Attrs: 64, NSScope: 32, Tokens: 30_000, RoundTrip: true}

// ctxCheckEvery is how many tokens the scanner reads between two looks
// at its context.
const ctxCheckEvery = 1024

// scanTokens reads every token once: the document must be well-formed,
// carry no DOCTYPE (so no DTD and no entity can ever be processed), stay
// within lim and, with lim.RoundTrip, round-trip. It stops when ctx ends.
func scanTokens(ctx context.Context, data []byte, lim limits) error {
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	seenRoot := false
	var elements, tokens int
	// open holds the names of the elements open, as written; scope[i] is
	// the number of namespace declarations in scope at open[i], its
	// ancestors' included.
	var open []xml.Name
	var scope []int
	for {
		tok, err := dec.RawToken()
		if errors.Is(err, io.EOF) {
			switch {
			case !seenRoot:
				return refuse(reason.SAMLMalformed, "empty document")
			case len(open) > 0:
				return refuse(reason.SAMLMalformed, "not well-formed XML: the document ends inside an element")
			}
			return nil
		}
		if err != nil {
			return refuse(reason.SAMLMalformed, "not well-formed XML: %s", firstLine(err.Error()))
		}
		tokens++
		if lim.Tokens > 0 && tokens > lim.Tokens {
			return refuse(reason.SAMLTooComplex, "the document holds over %d XML tokens", lim.Tokens)
		}
		if tokens%ctxCheckEvery == 0 {
			if err := ctxErr(ctx); err != nil {
				return err
			}
		}
		switch t := tok.(type) {
		case xml.Directive:
			return refuse(reason.SAMLDTDForbidden, "a DOCTYPE or other directive is not accepted")
		case xml.StartElement:
			if seenRoot && len(open) == 0 {
				return refuse(reason.SAMLMalformed, "not well-formed XML: more than one root element")
			}
			seenRoot = true
			elements++
			if lim.Depth > 0 && len(open) >= lim.Depth {
				return refuse(reason.SAMLTooComplex, "elements nest over %d deep", lim.Depth)
			}
			if lim.Elements > 0 && elements > lim.Elements {
				return refuse(reason.SAMLTooComplex, "the document holds over %d elements", lim.Elements)
			}
			if lim.Attrs > 0 && len(t.Attr) > lim.Attrs {
				return refuse(reason.SAMLTooComplex, "an element carries over %d attributes", lim.Attrs)
			}
			n := 0
			if len(scope) > 0 {
				n = scope[len(scope)-1]
			}
			for _, a := range t.Attr {
				if a.Name.Space == "xmlns" || a.Name.Space == "" && a.Name.Local == "xmlns" {
					n++
				}
			}
			if lim.NSScope > 0 && n > lim.NSScope {
				return refuse(reason.SAMLTooComplex, "over %d namespace declarations are in scope", lim.NSScope)
			}
			// After the bounds: the check's cost grows with the cube of
			// the prefixed attributes of an element.
			if lim.RoundTrip {
				if err := xrv.CheckToken(t); err != nil {
					return refuse(reason.SAMLMalformed, "XML does not round-trip: %s", firstLine(err.Error()))
				}
			}
			open = append(open, t.Name)
			scope = append(scope, n)
		case xml.EndElement:
			// RawToken does not match end tags with start tags, nor
			// does etree, which reads with it: the scan does, name for
			// name as written (so the end tag needs no round-trip check
			// of its own).
			if len(open) == 0 || open[len(open)-1] != t.Name {
				return refuse(reason.SAMLMalformed, "not well-formed XML: an end tag does not match its start tag")
			}
			open = open[:len(open)-1]
			scope = scope[:len(scope)-1]
		case xml.Comment:
			// XML forbids "--" in a comment and a final "-"; without
			// them a comment survives any round trip as written.
			if bytes.Contains(t, []byte("--")) || bytes.HasSuffix(t, []byte("-")) {
				return refuse(reason.SAMLMalformed, "not well-formed XML: a comment holds \"--\" or ends with \"-\"")
			}
		case xml.ProcInst:
			if t.Target != "xml" {
				return refuse(reason.SAMLMalformed, "processing instructions are not accepted")
			}
			if lim.RoundTrip {
				if err := xrv.CheckToken(t); err != nil {
					return refuse(reason.SAMLMalformed, "XML does not round-trip: %s", firstLine(err.Error()))
				}
			}
		}
		// Character data needs no round-trip check: the strict decoder
		// has refused characters outside XML's range and turned line
		// ends into \n, and encoding/xml's escaping of the rest decodes
		// back to the same bytes.
	}
}

// ctxErr is the refusal for work stopped because its request ended: the
// client left or the ACS deadline passed.
func ctxErr(ctx context.Context) error {
	switch err := ctx.Err(); {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: reason.SAMLBusy, Msg: "the response could not be validated in time; try again", Err: err}
	default:
		return &Error{Code: reason.SAMLBusy, Msg: "the request ended before its response was validated", Err: err}
	}
}

// xmlNamespace is the namespace the prefix xml is bound to by definition.
const xmlNamespace = "http://www.w3.org/XML/1998/namespace"

// walkNS visits el and every element below it, depth first, with its
// namespace URI, resolved in the same pass: the prefixes in scope travel
// down the walk, copied only where an element declares one. etree's
// NamespaceURI climbs the parent chain for each element instead, which
// costs the square of the depth over a whole tree. scope holds the
// prefixes in scope at el's parent ("" the default namespace); nil is a
// detached root's. fn returns false to stop the walk; walkNS reports
// whether it ran to the end.
func walkNS(el *etree.Element, scope map[string]string, fn func(el *etree.Element, ns string) bool) bool {
	if scope == nil {
		scope = map[string]string{"xml": xmlNamespace}
	}
	own := false
	for _, a := range el.Attr {
		prefix, ok := "", false
		switch {
		case a.Space == "xmlns":
			prefix, ok = a.Key, true
		case a.Space == "" && a.Key == "xmlns":
			ok = true
		}
		if !ok {
			continue
		}
		if !own {
			cp := make(map[string]string, len(scope)+1)
			for k, v := range scope {
				cp[k] = v
			}
			scope, own = cp, true
		}
		scope[prefix] = a.Value
	}
	if !fn(el, scope[el.Space]) {
		return false
	}
	for _, c := range el.ChildElements() {
		if !walkNS(c, scope, fn) {
			return false
		}
	}
	return true
}
