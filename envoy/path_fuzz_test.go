package envoy

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

// upstreamPath is how one family of upstream servers turns a request
// target into the segments of the resource it serves; ok is false when
// that upstream would refuse the target.
type upstreamPath func(target string) (segs []string, ok bool)

// upstreams are reference readings of a path, written independently of
// cleanPath, one per behaviour found in servers behind proxies.
var upstreams = map[string]upstreamPath{
	// nginx (merge_slashes), WSGI and most routers: decode the whole path
	// once, then split and resolve dot segments.
	"decode-then-resolve": func(target string) ([]string, bool) {
		dec, err := url.PathUnescape(pathOnly(target))
		if err != nil {
			return nil, false
		}
		return resolveDots(strings.Split(dec, "/")), true
	},
	// Tomcat, Spring, Jetty: cut each segment's ";" path parameter, then
	// decode and resolve.
	"servlet": func(target string) ([]string, bool) {
		raw := strings.Split(pathOnly(target), "/")
		for i, s := range raw {
			raw[i], _, _ = strings.Cut(s, ";")
		}
		dec, err := url.PathUnescape(strings.Join(raw, "/"))
		if err != nil {
			return nil, false
		}
		return resolveDots(strings.Split(dec, "/")), true
	},
	// IIS and frameworks on Windows: "\" is a separator too.
	"backslash-separator": func(target string) ([]string, bool) {
		dec, err := url.PathUnescape(pathOnly(target))
		if err != nil {
			return nil, false
		}
		return resolveDots(strings.Split(strings.ReplaceAll(dec, `\`, "/"), "/")), true
	},
	// Servers and CGI layers in C: decode the whole path, then the string
	// ends at the first NUL ("/admin%00/../public" is "/admin").
	"c-string": func(target string) ([]string, bool) {
		dec, err := url.PathUnescape(pathOnly(target))
		if err != nil {
			return nil, false
		}
		dec, _, _ = strings.Cut(dec, "\x00")
		return resolveDots(strings.Split(dec, "/")), true
	},
	// RFC 3986 section 6.2.2: decode unreserved characters only, resolve
	// dot segments on the encoded path, then decode each segment.
	"rfc3986": func(target string) ([]string, bool) {
		p := pathOnly(target)
		p = strings.NewReplacer("%2e", ".", "%2E", ".").Replace(p)
		segs := resolveDots(strings.Split(p, "/"))
		for i, s := range segs {
			d, err := url.PathUnescape(s)
			if err != nil {
				return nil, false
			}
			segs[i] = d
		}
		return segs, true
	},
}

func pathOnly(target string) string {
	if i := strings.IndexAny(target, "?#"); i >= 0 {
		return target[:i]
	}
	return target
}

// resolveDots drops empty and "." segments and lets ".." remove the one
// before it, never climbing above the root.
func resolveDots(in []string) []string {
	out := []string{}
	for _, s := range in {
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	return out
}

// FuzzCleanPathDifferential checks that every path the mapping accepts
// names the same resource for every upstream family: a path two upstreams
// read differently must be refused, or a route prefix could authorize one
// resource while another is served.
func FuzzCleanPathDifferential(f *testing.F) {
	for _, s := range []string{
		"/api/orders/1", "/public/../admin", "/public/..;/admin/users", "/a/%2e%2e/b",
		"/public%2F..%2Fadmin", "/public/..%5Cadmin", `/public/..\admin`, "/x;a=b/y",
		"//a//b/./c/", "/a/%252F", "/%3B", "/a/.%2e/b?x=/../c#f", "/caf%C3%A9", "/%",
		"/admin%00/../public", "/a%0a/b", "/a\tb",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, target string) {
		segs, _, err := cleanPath(target)
		if err != nil {
			return
		}
		for name, read := range upstreams {
			want, ok := read(target)
			if !ok {
				t.Fatalf("cleanPath accepted %q, which %s refuses", target, name)
			}
			if !slices.Equal(segs, want) {
				t.Fatalf("cleanPath reads %q as %q, %s as %q", target, segs, name, want)
			}
		}
	})
}

// TestCleanPathAttacks lists the path tricks that made a route prefix
// authorize one resource while the upstream served another.
func TestCleanPathAttacks(t *testing.T) {
	for _, target := range []string{
		"/public/..;/admin/users",    // Tomcat, Spring, Jetty serve /admin/users
		"/public;x=1/../admin",       // likewise
		"/public/%2e%2e%3B/admin",    // an encoded ";" decoded before the cut
		"/public%2F..%2Fadmin/users", // nginx, WSGI: /admin/users
		"/public/..%5Cadmin/users",   // IIS: /admin/users
		`/public/..\admin/users`,
		"/admin%00/../public/x",               // C upstreams: the string ends at the NUL, /admin
		"/public/x%0d%0aX-Svc-Roles:%20admin", // control characters in a decoded segment
		"/public/\x7f",
	} {
		t.Run(target, func(t *testing.T) {
			segs, _, err := cleanPath(target)
			if err == nil {
				t.Fatalf("accepted as %q", segs)
			}
		})
	}
}
