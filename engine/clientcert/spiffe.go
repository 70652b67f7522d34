package clientcert

import (
	"strings"

	"github.com/svc-dev/svc/reason"
)

// Scheme starts every SPIFFE ID.
const Scheme = "spiffe://"

// Bounds of the SPIFFE specification.
const (
	maxTrustDomain = 255
	maxID          = 2048
)

// ID is a workload's SPIFFE ID: spiffe://<TrustDomain><Path>.
type ID struct {
	// TrustDomain is lower-case letters, digits, ".", "-" and "_".
	TrustDomain string
	// Path is "/" followed by segments of letters, digits, ".", "-" and
	// "_", none empty, "." or "..".
	Path string
}

// String is the ID as written: "spiffe://acme.example/ns/x/sa/y".
func (id ID) String() string { return Scheme + id.TrustDomain + id.Path }

// ParseID parses a workload's SPIFFE ID as the SPIFFE specification
// writes it: the scheme "spiffe" in lower case, a trust domain of
// lower-case letters, digits, ".", "-" and "_" (no port, no userinfo),
// and a non-empty path of segments of letters, digits, ".", "-" and "_"
// (no empty, "." or ".." segment, no trailing "/"); no query, no
// fragment, no percent-encoding, at most 2048 bytes. A trust domain's own
// ID (no path) names no workload and is refused. Every refusal is a
// reason.ClientCertInvalid error.
func ParseID(s string) (ID, error) {
	if len(s) > maxID {
		return ID{}, reason.New(reason.ClientCertInvalid, "the SPIFFE ID is over %d bytes", maxID)
	}
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return ID{}, reason.New(reason.ClientCertInvalid, "not a SPIFFE ID: it must start with %q", Scheme)
	}
	td, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		td, path = rest[:i], rest[i:]
	}
	if err := CheckTrustDomain(td); err != nil {
		return ID{}, err
	}
	if path == "" {
		return ID{}, reason.New(reason.ClientCertInvalid, "the SPIFFE ID names a trust domain, not a workload: it has no path")
	}
	for seg := range strings.SplitSeq(path[1:], "/") {
		switch seg {
		case "":
			return ID{}, reason.New(reason.ClientCertInvalid, "the SPIFFE ID's path has an empty segment")
		case ".", "..":
			return ID{}, reason.New(reason.ClientCertInvalid, "the SPIFFE ID's path has a relative segment")
		}
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; !tdChar(c) && (c < 'A' || c > 'Z') {
				return ID{}, reason.New(reason.ClientCertInvalid, "the SPIFFE ID's path holds a character outside letters, digits, '.', '-' and '_'")
			}
		}
	}
	return ID{TrustDomain: td, Path: path}, nil
}

// CheckTrustDomain reports, as a reason.ClientCertInvalid error, why td
// is not a trust domain name: empty, over 255 bytes, or holding anything
// but lower-case letters, digits, ".", "-" and "_" (a port's ":" or
// userinfo's "@" among them).
func CheckTrustDomain(td string) error {
	if td == "" {
		return reason.New(reason.ClientCertInvalid, "the SPIFFE ID has no trust domain")
	}
	if len(td) > maxTrustDomain {
		return reason.New(reason.ClientCertInvalid, "the SPIFFE ID's trust domain is over %d bytes", maxTrustDomain)
	}
	for i := 0; i < len(td); i++ {
		if !tdChar(td[i]) {
			return reason.New(reason.ClientCertInvalid, "the SPIFFE ID's trust domain holds a character outside lower-case letters, digits, '.', '-' and '_'")
		}
	}
	return nil
}

func tdChar(c byte) bool {
	return ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') || c == '.' || c == '-' || c == '_'
}
