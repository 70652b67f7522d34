//go:build linux

package samlgw

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/beevik/etree"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// cpuOf runs fn on one locked OS thread and returns the CPU time that
// thread spent (startWork, as the ACS budget measures it): on a shared
// machine wall-clock time says little.
func cpuOf(tb testing.TB, fn func()) time.Duration {
	tb.Helper()
	if _, ok := threadCPU(); !ok {
		tb.Fatal("getrusage(RUSAGE_THREAD) is not available")
	}
	work := startWork()
	fn()
	return work()
}

// maxACSXML is the largest decoded SAMLResponse a form body of
// MaxBodyBytes can carry (base64: 3 bytes in 4).
const maxACSXML = MaxBodyBytes / 4 * 3

const respOpen = `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="r1" Version="2.0">`

// fill repeats unit after the Response start tag until the document is
// about size bytes, then closes what is open.
func fill(size int, open, closeTag string) []byte {
	var b strings.Builder
	b.WriteString(respOpen)
	n := (size - len(respOpen) - len("</samlp:Response>")) / (len(open) + len(closeTag))
	for range n {
		b.WriteString(open)
	}
	for range n {
		b.WriteString(closeTag)
	}
	b.WriteString("</samlp:Response>")
	return []byte(b.String())
}

// hostileShapes are documents of the largest size the ACS reads, each
// over one of the bounds.
func hostileShapes() map[string][]byte {
	shapes := map[string][]byte{
		"nested":            fill(maxACSXML, "<a>", "</a>"),
		"nested, prefixed":  fill(maxACSXML, `<p:a xmlns:p="urn:x">`, "</p:a>"),
		"nested, signature": fill(maxACSXML, `<ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#">`, "</ds:Signature>"),
		"wide":              fill(maxACSXML, "<a/>", ""),
		"comments":          fill(maxACSXML, "<!---->", ""),
		"text and tags":     fill(maxACSXML, "<a>x</a>", ""),
	}
	var attrs strings.Builder
	attrs.WriteString(respOpen + "<a")
	for i := 0; attrs.Len() < maxACSXML-100; i++ {
		fmt.Fprintf(&attrs, ` a%d=""`, i)
	}
	attrs.WriteString("/></samlp:Response>")
	shapes["attributes"] = []byte(attrs.String())

	var prefixed strings.Builder
	prefixed.WriteString(respOpen + "<a")
	for i := 0; prefixed.Len() < maxACSXML-100; i++ {
		fmt.Fprintf(&prefixed, ` xmlns:p%d="urn:x" p%d:a=""`, i, i)
	}
	prefixed.WriteString("/></samlp:Response>")
	shapes["prefixed attributes"] = []byte(prefixed.String())

	// Under the depth and attribute bounds, but with many namespace
	// declarations in scope at once: what the signature library copies
	// for each element.
	var scope strings.Builder
	scope.WriteString(respOpen)
	for d := range 40 {
		scope.WriteString("<a")
		for i := range 10 {
			fmt.Fprintf(&scope, ` xmlns:n%d_%d="urn:x"`, d, i)
		}
		scope.WriteString(">")
	}
	for scope.Len() < maxACSXML-1000 {
		scope.WriteString("<b/>")
	}
	scope.WriteString(strings.Repeat("</a>", 40) + "</samlp:Response>")
	shapes["namespace scope"] = []byte(scope.String())

	// Deep, under the depth bound, repeated: the element bound.
	var forest strings.Builder
	forest.WriteString(respOpen)
	for forest.Len() < maxACSXML-2000 {
		forest.WriteString(strings.Repeat("<a>", 60) + strings.Repeat("</a>", 60))
	}
	forest.WriteString("</samlp:Response>")
	shapes["deep forest"] = []byte(forest.String())
	return shapes
}

// cpuBudget is what refusing one hostile document may cost in thread
// CPU; the race detector makes every memory access several times dearer.
var cpuBudget = cpuScale() * 100 * time.Millisecond

func cpuScale() time.Duration {
	if testkit.RaceEnabled {
		return 10
	}
	return 1
}

// TestACSRefusesComplexDocumentsCheaply posts each hostile shape to the
// whole ACS validation: refused saml-too-complex within cpuBudget of CPU
// on the validating thread. Before the bounds, 560 KB of nested elements
// cost 35 s: the namespace of each element was looked up through all its
// ancestors.
func TestACSRefusesComplexDocumentsCheaply(t *testing.T) {
	v, trusted, _ := benchSetup(t)
	for name, doc := range hostileShapes() {
		t.Run(name, func(t *testing.T) {
			if len(doc) > maxACSXML {
				t.Fatalf("%d bytes, over the %d a form body carries", len(doc), maxACSXML)
			}
			var err error
			cpu := cpuOf(t, func() { _, err = v.validate(context.Background(), doc, trusted) })
			if CodeOf(err) != reason.SAMLTooComplex {
				t.Errorf("%d bytes: %v, want %s", len(doc), err, reason.SAMLTooComplex)
			}
			if cpu > cpuBudget {
				t.Errorf("%d bytes refused after %s of CPU, over %s", len(doc), cpu, cpuBudget)
			}
			t.Logf("%d bytes: %s of CPU", len(doc), cpu)
		})
	}
}

// boundsFiller returns chains of elements as deep as the bounds allow,
// each head declaring as many prefixes as the scope holds beside the
// Response's two, up to about size bytes and at most elements elements.
func boundsFiller(size, elements int) (string, int) {
	depth := acsLimits.Depth - 2
	var head strings.Builder
	head.WriteString(`<x:a xmlns:x="urn:x"`)
	for i := range acsLimits.NSScope - 4 {
		fmt.Fprintf(&head, ` xmlns:n%d="urn:n%d"`, i, i)
	}
	head.WriteString(">")
	chain := head.String() + strings.Repeat(`<x:a b="1" c="2">`, depth-1) + strings.Repeat("</x:a>", depth)
	var b strings.Builder
	n := 0
	for n+depth <= elements && b.Len()+len(chain) < size {
		b.WriteString(chain)
		n += depth
	}
	return b.String(), n
}

// A document at the bounds (depth, elements, namespace declarations in
// scope) passes the scan and is refused for what it is. What it costs
// (about what a real response of its size costs: every step after the
// scan is linear in the bounded size, the canonicalization of a forged
// signature over the whole Response included) is logged here and held
// to its bar by BenchmarkACSValidateAtTheBounds (docs/benchmarks.md),
// not timed in a test on a shared machine.
func TestACSDocumentAtTheBoundsIsRefusedForWhatItIs(t *testing.T) {
	v, trusted, idp := benchSetup(t)
	signedTmpl := forgedSignedResponse(idp)
	end := strings.Index(signedTmpl, "<samlp:Status>")
	room := maxACSXML - len(signedTmpl) - 100
	tokens := strings.Count(signedTmpl, "<") * 2
	filler, n := boundsFiller(room, acsLimits.Elements-tokens/2)
	tests := []struct {
		name string
		doc  string
		want Code
	}{
		{"no assertion", respOpen + filler + "</samlp:Response>", reason.SAMLMalformed},
		{"forged Response signature", signedTmpl[:end] + filler + signedTmpl[end:], reason.SAMLSignatureInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			cpu := cpuOf(t, func() { _, err = v.validate(context.Background(), []byte(tt.doc), trusted) })
			if CodeOf(err) != tt.want {
				t.Errorf("%d filler elements, %d bytes: %v, want %s", n, len(tt.doc), err, tt.want)
			}
			t.Logf("%d filler elements, %d bytes: %s of CPU", n, len(tt.doc), cpu)
		})
	}
}

// The bounds: one over each is refused, one at each is not refused for
// it.
func TestScanTokensLimits(t *testing.T) {
	lim := limits{Depth: 3, Elements: 5, Attrs: 2, NSScope: 2, Tokens: 12, RoundTrip: true}
	tests := []struct {
		name, doc string
		want      Code
	}{
		{"at every bound", `<r xmlns="u"><a x:y="1" xmlns:x="v"><b/></a><c/><d/></r>`, ""},
		{"too deep", `<r><a><b><c/></b></a></r>`, reason.SAMLTooComplex},
		{"too many elements", `<r><a/><a/><a/><a/><a/></r>`, reason.SAMLTooComplex},
		{"too many attributes", `<r><a x="1" y="2" z="3"/></r>`, reason.SAMLTooComplex},
		{"too many declarations in scope", `<r xmlns="u"><a xmlns:x="v"><b xmlns:y="w"/></a></r>`, reason.SAMLTooComplex},
		{"declarations out of scope again", `<r><a xmlns:x="v" xmlns:y="w"/><b xmlns:x="v" xmlns:y="w"/></r>`, ""},
		{"too many tokens", `<r>` + strings.Repeat("<!---->", 12) + `</r>`, reason.SAMLTooComplex},
		{"stray end tag", `<r/></r>`, reason.SAMLMalformed},
		{"end tag of another element", `<r><a></b></r>`, reason.SAMLMalformed},
		{"end tag of another prefix", `<x:r xmlns:x="u" xmlns:y="u"></y:r>`, reason.SAMLMalformed},
		{"unclosed", `<r><a/>`, reason.SAMLMalformed},
		{"two roots", `<r/><r/>`, reason.SAMLMalformed},
		{"comment with --", `<r><!-- a -- b --></r>`, reason.SAMLMalformed},
		{"doctype", `<!DOCTYPE r><r/>`, reason.SAMLDTDForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := scanTokens(context.Background(), []byte(tt.doc), lim)
			if got := Code(""); err != nil {
				got = CodeOf(err)
				if got != tt.want {
					t.Fatalf("scanTokens = %v, want %q", err, tt.want)
				}
			} else if tt.want != "" {
				t.Fatalf("scanTokens = nil, want %q", tt.want)
			}
		})
	}
}

// The scan stops when its context ends: a client that left costs no
// more work, and the refusal says why.
func TestScanTokensStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	doc := fill(maxACSXML, "<a/>", "")
	err := scanTokens(ctx, doc, limits{})
	if CodeOf(err) != reason.SAMLBusy || !errors.Is(err, context.Canceled) {
		t.Fatalf("scanTokens with an ended context = %v, want %s wrapping context.Canceled", err, reason.SAMLBusy)
	}
}

// The whole validation stops at its deadline, and a response refused so
// burns nothing in the replay store.
func TestValidateStopsAtItsDeadline(t *testing.T) {
	v, trusted, idp := benchSetup(t)
	st := &countingStore{}
	v.store = st
	doc, err := idp.Sign(benchResponse())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := v.validate(ctx, doc, trusted); CodeOf(err) != reason.SAMLBusy || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("validate past its deadline = %v, want %s", err, reason.SAMLBusy)
	}
	if st.adds != 0 {
		t.Errorf("%d replay store writes for a response refused at its deadline", st.adds)
	}
	if _, err := v.validate(context.Background(), doc, trusted); err != nil {
		t.Fatalf("validate without a deadline = %v", err)
	}
}

type countingStore struct{ adds int }

func (s *countingStore) Add(context.Context, string, time.Duration) (bool, error) {
	s.adds++
	return true, nil
}

// BenchmarkACSValidateAtTheBounds measures the whole validation of the
// costliest document the bounds let through: 9,900 elements 62 deep, 28
// namespace declarations in scope, under a forged Response signature.
func BenchmarkACSValidateAtTheBounds(b *testing.B) {
	v, trusted, idp := benchSetup(b)
	tmpl := forgedSignedResponse(idp)
	filler, _ := boundsFiller(maxACSXML-len(tmpl)-100, acsLimits.Elements-100)
	at := strings.Index(tmpl, "<samlp:Status>")
	doc := []byte(tmpl[:at] + filler + tmpl[at:])
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := v.validate(context.Background(), doc, trusted); CodeOf(err) != reason.SAMLSignatureInvalid {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseResponseHostile measures the refusal of hostile shapes.
func BenchmarkParseResponseHostile(b *testing.B) {
	shapes := hostileShapes()
	for _, name := range []string{"nested", "wide", "namespace scope"} {
		doc := shapes[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, err := ParseResponse(context.Background(), doc); CodeOf(err) != reason.SAMLTooComplex {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzScanTokens holds the scan to the parsers that read after it: a
// document it accepts within the ACS bounds is well-formed to
// encoding/xml's checking decoder and to etree, and the one-pass namespace
// walk gives every element the namespace etree finds up its parents.
func FuzzScanTokens(f *testing.F) {
	f.Add([]byte(respOpen + `<saml:Assertion ID="a"><x:y xmlns:x="urn:x" xmlns="urn:d"><z/></x:y></saml:Assertion></samlp:Response>`))
	f.Add([]byte(`<a xmlns="u"><b xmlns=""><c xmlns:p="v"><p:d/></c></b></a>`))
	f.Add([]byte(`<a><b></a></b>`))
	f.Add([]byte(`<a><!-- x --><?xml version="1.0"?></a>`))
	f.Add([]byte(`<p:a xmlns:p="u" p:x="1" xmlns:q="u" q:x="2"/>`))
	f.Add(fill(2000, "<a>", "</a>"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := scanTokens(context.Background(), data, acsLimits); err != nil {
			if CodeOf(err) == "" {
				t.Fatalf("refusal without a code: %v", err)
			}
			return
		}
		dec := xml.NewDecoder(bytes.NewReader(data))
		for {
			_, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("the scan accepted what encoding/xml refuses: %v", err)
			}
		}
		doc := etree.NewDocument()
		doc.ReadSettings.Permissive = false
		if err := doc.ReadFromBytes(data); err != nil || doc.Root() == nil {
			t.Fatalf("the scan accepted what etree refuses: %v", err)
		}
		walkNS(doc.Root(), nil, func(el *etree.Element, ns string) bool {
			if want := el.NamespaceURI(); ns != want && !(el.Space == "xml" && ns == xmlNamespace) {
				t.Fatalf("<%s>: walk found namespace %q, etree %q", el.FullTag(), ns, want)
			}
			return true
		})
	})
}

// forgedSignedResponse is benchResponse with a Response signature of the
// right sizes that was never made: a SHA-256 digest and an RSA-2048
// signature value of "A"s, which no key verifies.
func forgedSignedResponse(idp *testidp.IdP) string {
	r := benchResponse()
	r.SignResponse = true
	doc := string(idp.XML(r, true))
	doc = strings.Replace(doc, "<ds:DigestValue></ds:DigestValue>", "<ds:DigestValue>"+strings.Repeat("A", 43)+"=</ds:DigestValue>", 1)
	return strings.Replace(doc, "<ds:SignatureValue></ds:SignatureValue>", "<ds:SignatureValue>"+strings.Repeat("A", 342)+"==</ds:SignatureValue>", 1)
}
