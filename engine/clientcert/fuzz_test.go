package clientcert

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/svc-dev/svc/reason"
)

// xfccSeeds are the headers of testdata/xfcc.txt, one a line.
func xfccSeeds(f *testing.F) []string {
	data, err := os.ReadFile("testdata/xfcc.txt")
	if err != nil {
		f.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// FuzzLastElement checks that LastElement never panics, refuses only
// with reason.ClientCertInvalid, and returns values taken from the
// header.
func FuzzLastElement(f *testing.F) {
	for _, s := range xfccSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		el, err := LastElement(header)
		if err != nil {
			if reason.Of(err, "") != reason.ClientCertInvalid {
				t.Fatalf("error without reason %s: %v", reason.ClientCertInvalid, err)
			}
			return
		}
		for _, u := range el.URIs {
			if len(u) > len(header) {
				t.Fatalf("URI %q longer than the header", u)
			}
		}
		if len(el.Cert) > len(header) || len(el.Subject) > len(header) {
			t.Fatalf("value longer than the header: %+v", el)
		}
	})
}

// FuzzParseID checks that ParseID never panics, that an accepted ID is
// written back as given, and that it holds only the characters the
// SPIFFE specification allows.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"spiffe://acme.example/ns/x/sa/y", "spiffe://acme.example", "spiffe://a:1/x",
		"spiffe://a/b/../c", "spiffe://a/b%2Fc", "spiffe://A/b", "spiffe://a/b?c#d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			if reason.Of(err, "") != reason.ClientCertInvalid {
				t.Fatalf("error without reason %s: %v", reason.ClientCertInvalid, err)
			}
			return
		}
		if id.String() != s {
			t.Fatalf("ParseID(%q) = %q", s, id.String())
		}
		if strings.ContainsAny(s[len(Scheme):], ":@?#%") || CheckTrustDomain(id.TrustDomain) != nil || !strings.HasPrefix(id.Path, "/") {
			t.Fatalf("accepted %q", s)
		}
	})
}

// FuzzIdentify checks that Identify never panics and refuses only with
// reason.ClientCertInvalid.
func FuzzIdentify(f *testing.F) {
	for _, s := range xfccSeeds(f) {
		f.Add("", "", s)
	}
	f.Add("spiffe://acme.example/x", "", "")
	f.Add("CN=x", "-----BEGIN%20CERTIFICATE-----%0AMIIB%0A-----END%20CERTIFICATE-----%0A", "")
	f.Fuzz(func(t *testing.T, principal, cert, xfcc string) {
		id, err := Identify(Presented{Principal: principal, Certificate: cert, XFCC: xfcc})
		if err != nil {
			if reason.Of(err, "") != reason.ClientCertInvalid {
				t.Fatalf("error without reason %s: %v", reason.ClientCertInvalid, err)
			}
			return
		}
		if _, err := ParseID(id.String()); err != nil {
			t.Fatalf("Identify returned %q, which ParseID refuses: %v", id, err)
		}
	})
}
