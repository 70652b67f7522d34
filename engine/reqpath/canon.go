package reqpath

import "strings"

// DefaultFormats are the format suffixes cut by default
// (envoy.format_suffixes): the response formats that Rails, Django REST
// framework, Symfony and other routers serve from "/reports/export.json"
// as "/reports/export". A suffix not listed stays part of the segment,
// so "/users/alice@example.com" and "/releases/1.2.3" keep their last
// segment whole.
var DefaultFormats = []string{"json", "xml", "csv", "html", "txt", "yaml"}

// Canon makes request paths canonical: the spelling a policy compares,
// in which every variant an upstream serves as the same resource is
// written the same. The zero value folds case and cuts no suffix.
type Canon struct {
	// CaseSensitive keeps the letter case of the path; set it when every
	// upstream routes case-sensitively (envoy.routes_case_sensitive).
	// Otherwise the canonical path is lower-cased, as the routers of
	// Express, ASP.NET Core and others match "/API/Export" to
	// "/api/export".
	CaseSensitive bool
	// Formats are the known format suffixes, lower-case and without the
	// dot (envoy.format_suffixes).
	Formats []string
}

// CutFormat splits a known format suffix, in any ASCII letter case, off a path
// segment: "export.json" is "export" and "json". format is the entry of
// c.Formats that matched; ok is false, and base seg, when seg has no
// known suffix or nothing but dots before it (".json" and "..json" are
// names, not formats).
func (c Canon) CutFormat(seg string) (base, format string, ok bool) {
	dot := strings.LastIndexByte(seg, '.')
	if dot <= 0 || seg[:dot] == "." || seg[:dot] == ".." {
		// Cutting would leave a dot segment, which Clean resolves.
		return seg, "", false
	}
	suffix := seg[dot+1:]
	for _, f := range c.Formats {
		if asciiEqualFold(suffix, f) {
			return seg[:dot], f, true
		}
	}
	return seg, "", false
}

// asciiEqualFold is strings.EqualFold for ASCII letters only: Unicode
// folding would take "cſv" (long s) for "csv", a suffix of another length.
func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// Path returns the canonical path of a request path (or target: the
// query and fragment are ignored) and the format suffix it cut, "" when
// none: the path percent-decoded once, dot segments resolved and empty
// segments dropped (Clean), lower-cased unless c.CaseSensitive, and a
// known format suffix cut off the last segment. A path Clean refuses is
// an error carrying reason.PathInvalid.
//
// An already canonical path is returned as it is, and one that only
// loses its suffix as a prefix of itself: neither allocates.
func (c Canon) Path(path string) (canonical, format string, err error) {
	var buf [16]string
	segs, norm, err := Clean(path, buf[:0])
	if err != nil {
		return "", "", err
	}
	canonical, format = c.Segments(segs, norm)
	return canonical, format, nil
}

// Segments is Path on what Clean returned for it: the decoded segments
// and the normalized path.
func (c Canon) Segments(segs []string, normalized string) (canonical, format string) {
	if len(segs) == 0 {
		return "/", ""
	}
	_, format, cut := c.CutFormat(segs[len(segs)-1])
	s := normalized
	if strings.IndexByte(s, '%') >= 0 {
		// The normalized path escapes "%"; the canonical one is decoded
		// once, as the segments are.
		s = "/" + strings.Join(segs, "/")
	}
	if !c.CaseSensitive {
		// ToLower returns s itself when it has nothing to lower.
		s = strings.ToLower(s)
	}
	if cut {
		// The suffix is ASCII, so lowering left its length alone.
		s = s[:len(s)-len(format)-1]
	}
	return s, format
}
