package envoy

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/svc-dev/svc/engine/config"
)

// Placeholder names a route template can capture. Any other name matches
// one segment and is not used.
const (
	placeholderResource = "resource"
	placeholderID       = "id"
	placeholderTenant   = "tenant"
)

// segKind says how one template segment matches.
type segKind uint8

const (
	segLiteral segKind = iota // "api": equal to the decoded segment
	segParam                  // "{id}": any non-empty segment
	segMixed                  // "{id}.json": a regexp over the segment
)

type tmplSeg struct {
	kind    segKind
	literal string         // segLiteral
	name    string         // segParam
	re      *regexp.Regexp // segMixed, anchored
	reFold  *regexp.Regexp // segMixed, anchored, literal parts in any case
	names   []string       // segMixed: placeholder name of each group
}

// route is a compiled config.Route.
type route struct {
	template string
	methods  []string // upper-case; empty means every method
	segs     []tmplSeg
	rest     bool // the template ends in "/*": any further segments match
	resource string
	action   string
}

// captures are what a matching route contributed to the input.
type captures struct {
	resource, id, tenant string
}

func (c *captures) set(name, value string) {
	switch name {
	case placeholderResource:
		c.resource = value
	case placeholderID:
		c.id = value
	case placeholderTenant:
		c.tenant = value
	}
}

// compileRoute compiles a route template once: "/api/{resource}/{id}",
// "/files/{id}.json", "/admin/*". Literal parts are matched against the
// decoded request segments, so they are written decoded too (a literal
// "%41" is unescaped to "A").
func compileRoute(i int, r config.Route) (route, error) {
	key := fmt.Sprintf("sidecar.routes[%d].path", i)
	if !strings.HasPrefix(r.Path, "/") {
		return route{}, fmt.Errorf("%s: must start with \"/\", got %q", key, r.Path)
	}
	rt := route{template: r.Path, resource: r.Resource, action: r.Action}
	for _, m := range r.Methods {
		rt.methods = append(rt.methods, strings.ToUpper(m))
	}
	parts := strings.Split(strings.Trim(r.Path, "/"), "/")
	if len(parts) == 1 && parts[0] == "" {
		parts = nil
	}
	for j, part := range parts {
		if part == "*" && j == len(parts)-1 {
			rt.rest = true
			break
		}
		if part == "" {
			continue
		}
		seg, err := compileSegment(part)
		if err != nil {
			return route{}, fmt.Errorf("%s: %w", key, err)
		}
		rt.segs = append(rt.segs, seg)
	}
	return rt, nil
}

func compileSegment(part string) (tmplSeg, error) {
	if !strings.ContainsAny(part, "{}") {
		lit, err := url.PathUnescape(part)
		if err != nil {
			return tmplSeg{}, fmt.Errorf("segment %q holds a malformed percent-escape", part)
		}
		return tmplSeg{kind: segLiteral, literal: lit}, nil
	}
	if strings.HasPrefix(part, "{") && strings.HasSuffix(part, "}") && strings.Count(part, "{") == 1 && strings.Count(part, "}") == 1 {
		name := part[1 : len(part)-1]
		if name == "" {
			return tmplSeg{}, fmt.Errorf("placeholder must have a name in %q", part)
		}
		return tmplSeg{kind: segParam, name: name}, nil
	}
	var (
		expr  strings.Builder
		names []string
	)
	expr.WriteString("^")
	rest := part
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			if strings.IndexByte(rest, '}') >= 0 {
				return tmplSeg{}, fmt.Errorf("unbalanced \"}\" in %q", part)
			}
			if err := writeLiteral(&expr, rest, part); err != nil {
				return tmplSeg{}, err
			}
			break
		}
		if strings.IndexByte(rest[:open], '}') >= 0 {
			return tmplSeg{}, fmt.Errorf("unbalanced \"}\" in %q", part)
		}
		if err := writeLiteral(&expr, rest[:open], part); err != nil {
			return tmplSeg{}, err
		}
		closing := strings.IndexByte(rest[open:], '}')
		if closing < 0 {
			return tmplSeg{}, fmt.Errorf("unclosed \"{\" in %q", part)
		}
		name := rest[open+1 : open+closing]
		if name == "" || strings.IndexByte(name, '{') >= 0 {
			return tmplSeg{}, fmt.Errorf("placeholder must have a plain name in %q", part)
		}
		names = append(names, name)
		expr.WriteString("(.+?)")
		rest = rest[open+closing+1:]
	}
	expr.WriteString("$")
	re, err := regexp.Compile(expr.String())
	if err != nil {
		return tmplSeg{}, fmt.Errorf("segment %q: %w", part, err)
	}
	// (?i) folds the literal parts only in effect: a capture is (.+?),
	// which any case matches, and keeps the request's own letters.
	reFold, err := regexp.Compile("(?i)" + expr.String())
	if err != nil {
		return tmplSeg{}, fmt.Errorf("segment %q: %w", part, err)
	}
	return tmplSeg{kind: segMixed, re: re, reFold: reFold, names: names}, nil
}

func writeLiteral(b *strings.Builder, lit, part string) error {
	dec, err := url.PathUnescape(lit)
	if err != nil {
		return fmt.Errorf("segment %q holds a malformed percent-escape", part)
	}
	b.WriteString(regexp.QuoteMeta(dec))
	return nil
}

// pathView is a request path as the route table tries it.
type pathView struct {
	// segs are the decoded segments.
	segs []string
	// stripped is segs with a format suffix cut off the last segment
	// (see withoutSuffix), or nil: Rails serves "/reports/1/export.json"
	// as the "/reports/1/export" route.
	stripped []string
	// known is set when that suffix is a known format
	// (envoy.format_suffixes), which a capture of the last segment leaves
	// out: "/orders/{id}" on "/orders/42.json" is order "42".
	known bool
}

// match reports whether the route applies to method and the path, and
// what it captured. With fold, literal segments (and the literal parts of
// mixed ones) match in any letter case, as the routers of Express,
// ASP.NET Core and others do; captured values keep the request's case
// either way (ids are case-sensitive).
//
// The whole segments are tried first, so that a template that matches
// the last segment whole ("/files/{name}", "/files/{id}.json") captures
// it whole, then the segments without a suffix. A known format suffix is
// the exception: a template whose last segment is a bare placeholder
// tries the segments without it first, so the format never ends up in
// an id, while "{name}.pdf" and "{id}.json" keep matching the whole
// segment.
func (rt *route) match(method string, v pathView, fold bool) (captures, bool) {
	if len(rt.methods) > 0 && !slices.Contains(rt.methods, method) {
		return captures{}, false
	}
	if v.known && rt.capturesLast() {
		if c, ok := rt.matchSegs(v.stripped, fold); ok {
			return c, true
		}
	}
	if c, ok := rt.matchSegs(v.segs, fold); ok {
		return c, true
	}
	if v.stripped != nil {
		return rt.matchSegs(v.stripped, fold)
	}
	return captures{}, false
}

// capturesLast reports whether the template's last segment is a bare
// placeholder, which takes the request's last segment whole.
func (rt *route) capturesLast() bool {
	return !rt.rest && len(rt.segs) > 0 && rt.segs[len(rt.segs)-1].kind == segParam
}

// withoutSuffix returns segs with the format suffix of the last segment
// cut off, or nil when it has none.
func withoutSuffix(segs []string) []string {
	n := len(segs)
	if n == 0 {
		return nil
	}
	base, ok := formatSuffix(segs[n-1])
	if !ok {
		return nil
	}
	return append(slices.Clip(segs[:n-1]), base)
}

func (rt *route) matchSegs(segs []string, fold bool) (captures, bool) {
	var c captures
	if len(segs) < len(rt.segs) || (!rt.rest && len(segs) != len(rt.segs)) {
		return c, false
	}
	for i, ts := range rt.segs {
		s := segs[i]
		switch ts.kind {
		case segLiteral:
			if s != ts.literal && (!fold || !strings.EqualFold(s, ts.literal)) {
				return captures{}, false
			}
		case segParam:
			c.set(ts.name, s)
		case segMixed:
			re := ts.re
			if fold {
				re = ts.reFold
			}
			m := re.FindStringSubmatch(s)
			if m == nil {
				return captures{}, false
			}
			for j, name := range ts.names {
				c.set(name, m[j+1])
			}
		}
	}
	return c, true
}

// formatSuffix splits a format suffix off a path segment: "export.json"
// is "export". A suffix is a "." followed by one or more ASCII letters or
// digits, after a non-empty base; only the last one is taken
// ("a.tar.gz" is "a.tar").
func formatSuffix(seg string) (base string, ok bool) {
	dot := strings.LastIndexByte(seg, '.')
	if dot <= 0 || dot == len(seg)-1 {
		return "", false
	}
	for i := dot + 1; i < len(seg); i++ {
		c := seg[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return "", false
		}
	}
	return seg[:dot], true
}
