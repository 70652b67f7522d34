package clientcert

import (
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

func TestParseID(t *testing.T) {
	tests := []struct {
		in   string
		want ID
		bad  bool
	}{
		{in: "spiffe://acme.example/ns/x/sa/y", want: ID{"acme.example", "/ns/x/sa/y"}},
		{in: "spiffe://a_b-c.9/Path.With-Case_1", want: ID{"a_b-c.9", "/Path.With-Case_1"}},
		{in: "spiffe://acme.example", bad: true},
		{in: "spiffe://acme.example/", bad: true},
		{in: "spiffe://acme.example/a//b", bad: true},
		{in: "spiffe://acme.example/a/", bad: true},
		{in: "spiffe://acme.example/a/../b", bad: true},
		{in: "spiffe://acme.example/./b", bad: true},
		{in: "spiffe://Acme.example/a", bad: true},
		{in: "spiffe://acme.example:8443/a", bad: true},
		{in: "spiffe://user@acme.example/a", bad: true},
		{in: "spiffe://acme.example/a?x=1", bad: true},
		{in: "spiffe://acme.example/a#f", bad: true},
		{in: "spiffe://acme.example/a%20b", bad: true},
		{in: "SPIFFE://acme.example/a", bad: true},
		{in: "https://acme.example/a", bad: true},
		{in: "spiffe:///a", bad: true},
		{in: "", bad: true},
		{in: "spiffe://" + strings.Repeat("a", 256) + "/a", bad: true},
		{in: "spiffe://acme.example/" + strings.Repeat("a", 2048), bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			id, err := ParseID(tt.in)
			if tt.bad {
				if reason.Of(err, "") != reason.ClientCertInvalid {
					t.Fatalf("ParseID = %+v, %v; want %s", id, err, reason.ClientCertInvalid)
				}
				return
			}
			if err != nil || id != tt.want || id.String() != tt.in {
				t.Fatalf("ParseID = %+v, %v; want %+v", id, err, tt.want)
			}
		})
	}
}

func TestLastElement(t *testing.T) {
	tests := []struct {
		name, in string
		want     Element
		bad      bool
	}{
		{name: "envoy", in: `By=spiffe://acme.example/envoy;Hash=abc;Subject="CN=x,O=y";URI=spiffe://acme.example/ns/x/sa/y;DNS=x.example`,
			want: Element{By: []string{"spiffe://acme.example/envoy"}, Hash: "abc", Subject: "CN=x,O=y", URIs: []string{"spiffe://acme.example/ns/x/sa/y"}, DNS: []string{"x.example"}}},
		{name: "last of several", in: `URI=spiffe://a.example/first,By=b;URI=spiffe://b.example/second`,
			want: Element{By: []string{"b"}, URIs: []string{"spiffe://b.example/second"}}},
		{name: "quoted with escapes and separators", in: `Subject="a\"b;c,d=e";cert="%2D%2D"`,
			want: Element{Subject: `a"b;c,d=e`, Cert: "%2D%2D"}},
		{name: "keys in any case and space", in: ` uri = spiffe://a.example/x ; HASH=1 , Uri=spiffe://b.example/y `,
			want: Element{URIs: []string{"spiffe://b.example/y"}}},
		{name: "unknown key ignored", in: `Foo=bar;URI=spiffe://a.example/x`, want: Element{URIs: []string{"spiffe://a.example/x"}}},
		{name: "empty", in: ``, bad: true},
		{name: "empty element", in: `URI=spiffe://a.example/x,,URI=spiffe://a.example/y`, bad: true},
		{name: "trailing comma", in: `URI=spiffe://a.example/x,`, bad: true},
		{name: "trailing semicolon", in: `URI=spiffe://a.example/x;`, bad: true},
		{name: "no equals", in: `URI`, bad: true},
		{name: "no key", in: `=x`, bad: true},
		{name: "unterminated quote", in: `Subject="abc`, bad: true},
		{name: "escape at end", in: `Subject="abc\`, bad: true},
		{name: "text after quote", in: `Subject="abc"x`, bad: true},
		{name: "quote inside bare value", in: `Subject=ab"c"`, bad: true},
		{name: "equals inside bare value", in: `Subject=a=b`, bad: true},
		{name: "cert twice", in: `Cert=a;Cert=b`, bad: true},
		{name: "malformed first element", in: `URI,URI=spiffe://a.example/x`, bad: true},
		{name: "too long", in: "URI=" + strings.Repeat("a", MaxHeader), bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			el, err := LastElement(tt.in)
			if tt.bad {
				if reason.Of(err, "") != reason.ClientCertInvalid {
					t.Fatalf("LastElement = %+v, %v; want %s", el, err, reason.ClientCertInvalid)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, el); diff != "" {
				t.Fatalf("element (-want +got):\n%s", diff)
			}
		})
	}
}

// escape URL-encodes a PEM certificate as Envoy and nginx do: every
// byte outside the unreserved characters as %XX.
func escape(pem []byte) string { return url.PathEscape(string(pem)) }

func TestIdentify(t *testing.T) {
	ca := testkit.NewCA(t, "test CA")
	const id = "spiffe://acme.example/ns/x/sa/y"
	good := escape(ca.Client(t, id).CertPEM)
	noSPIFFE := escape(ca.Client(t, "https://acme.example/x").CertPEM)
	two := escape(ca.Client(t, id, "spiffe://acme.example/ns/x/sa/z").CertPEM)
	badID := escape(ca.Client(t, "spiffe://acme.example:1/x").CertPEM)
	want := ID{"acme.example", "/ns/x/sa/y"}
	tests := []struct {
		name string
		p    Presented
		bad  bool
	}{
		{name: "envoy principal", p: Presented{Principal: id}},
		{name: "envoy certificate", p: Presented{Certificate: good}},
		{name: "envoy both agree", p: Presented{Principal: id, Certificate: good}},
		{name: "envoy both disagree", p: Presented{Principal: "spiffe://acme.example/other", Certificate: good}, bad: true},
		{name: "envoy subject principal with certificate", p: Presented{Principal: "CN=client", Certificate: good}},
		{name: "envoy subject principal alone", p: Presented{Principal: "CN=client"}, bad: true},
		{name: "envoy bad principal", p: Presented{Principal: "spiffe://ACME/x"}, bad: true},
		{name: "xfcc uri", p: Presented{XFCC: "Hash=1;URI=" + id}},
		{name: "xfcc cert", p: Presented{XFCC: `Cert="` + good + `"`}},
		{name: "xfcc cert and uri", p: Presented{XFCC: `Cert="` + good + `";URI=` + id}},
		{name: "xfcc last element", p: Presented{XFCC: `URI=spiffe://evil.example/x,Cert="` + good + `"`}},
		{name: "xfcc cert and other uri", p: Presented{XFCC: `Cert="` + good + `";URI=spiffe://acme.example/z`}, bad: true},
		{name: "xfcc two uris", p: Presented{XFCC: "URI=" + id + ";URI=spiffe://acme.example/z"}, bad: true},
		{name: "xfcc no uri", p: Presented{XFCC: "Hash=1;DNS=x"}, bad: true},
		{name: "xfcc malformed", p: Presented{XFCC: `Cert="abc`}, bad: true},
		{name: "certificate not pem", p: Presented{Certificate: "hello"}, bad: true},
		{name: "certificate not escaped", p: Presented{Certificate: "%zz"}, bad: true},
		{name: "certificate garbage der", p: Presented{Certificate: escape([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))}, bad: true},
		{name: "certificate with trailing data", p: Presented{Certificate: good + "x"}, bad: true},
		{name: "certificate without spiffe", p: Presented{Certificate: noSPIFFE}, bad: true},
		{name: "certificate with two spiffe", p: Presented{Certificate: two}, bad: true},
		{name: "certificate with bad spiffe", p: Presented{Certificate: badID}, bad: true},
		{name: "certificate too long", p: Presented{Certificate: strings.Repeat("a", MaxCertificate+1)}, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Identify(tt.p)
			if tt.bad {
				if reason.Of(err, "") != reason.ClientCertInvalid {
					t.Fatalf("Identify = %+v, %v; want %s", got, err, reason.ClientCertInvalid)
				}
				return
			}
			if err != nil || got != want {
				t.Fatalf("Identify = %+v, %v; want %+v", got, err, want)
			}
		})
	}
}
