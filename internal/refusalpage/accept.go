// Package refusalpage answers people as well as programs: it tells a
// browser's Accept header from an API client's, and renders the small,
// self-contained HTML page a browser gets instead of a JSON refusal. The
// proxy path (package envoy) and the SAML gateway (package samlgw) share
// it, so that both negotiate alike.
package refusalpage

import (
	"strconv"
	"strings"
)

// PrefersHTML reports whether an Accept header is a browser's: text/html
// listed by name with a q-value above 0 and at least that of
// application/json (whose q-value is that of the most specific range
// naming it: application/json, then application/*, then */*). "*/*"
// alone, as curl and most HTTP libraries send, is not a browser, nor is
// an absent header, nor text/* without text/html.
func PrefersHTML(accept string) bool {
	html, json, _ := qualities(accept)
	return html > 0 && html >= json
}

// WantsJSON reports whether an Accept header asks for JSON over HTML:
// application/json listed by name with a q-value above 0, and not
// PrefersHTML. The SAML gateway answers the ACS and logout in JSON then,
// and the browser's way (cookie, redirect) otherwise.
func WantsJSON(accept string) bool {
	html, json, named := qualities(accept)
	return named && json > 0 && !(html > 0 && html >= json)
}

// qualities returns the q-values that accept gives text/html (named only)
// and application/json (by the most specific matching range), and whether
// application/json is named.
func qualities(accept string) (html, json float64, jsonNamed bool) {
	jsonSpec := 0 // 3 application/json, 2 application/*, 1 */*
	for part := range strings.SplitSeq(accept, ",") {
		mt, q := mediaRange(part)
		switch mt {
		case "text/html":
			html = max(html, q)
		case "application/json":
			if jsonSpec < 3 {
				jsonSpec, json = 3, q
			} else {
				json = max(json, q)
			}
			jsonNamed = true
		case "application/*":
			if jsonSpec < 2 {
				jsonSpec, json = 2, q
			} else if jsonSpec == 2 {
				json = max(json, q)
			}
		case "*/*":
			if jsonSpec < 1 {
				jsonSpec, json = 1, q
			} else if jsonSpec == 1 {
				json = max(json, q)
			}
		}
	}
	return html, json, jsonNamed
}

// mediaRange parses one element of an Accept header into its lower-case
// media range and its q-value (1 when absent; 0 when unreadable, so that a
// malformed weight never wins).
func mediaRange(part string) (string, float64) {
	mt, params, _ := strings.Cut(part, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	q := 1.0
	for p := range strings.SplitSeq(params, ";") {
		k, v, ok := strings.Cut(p, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f > 1 || f != f {
			return mt, 0
		}
		q = f
		break
	}
	return mt, q
}
