package envoy

import (
	"net/url"
	"strings"

	"github.com/svc-dev/svc/engine/reqpath"
)

// cleanPath is reqpath.Clean, the one reading of a request path that the
// route table, input.request.path and input.request.canonical_path share.
func cleanPath(target string) (segs []string, normalized string, err error) {
	return reqpath.Clean(target, nil)
}

// cleanPathInto is cleanPath, appending the segments to buf[:0] when it
// has room for them.
func cleanPathInto(target string, buf []string) (segs []string, normalized string, err error) {
	return reqpath.Clean(target, buf)
}

// parseQuery decodes the query part of a request target into a map. A key
// given several times keeps every value, joined with ",", so a policy that
// compares a parameter to one value does not match a request that smuggles
// a second one. Pairs that fail to decode are dropped, as url.ParseQuery
// does; the query never decides the resource, so leniency here is safe.
func parseQuery(target string) map[string]string {
	i := strings.IndexByte(target, '?')
	if i < 0 {
		return nil
	}
	raw := target[i+1:]
	if j := strings.IndexByte(raw, '#'); j >= 0 {
		raw = raw[:j]
	}
	if raw == "" {
		return nil
	}
	vals, _ := url.ParseQuery(raw)
	if len(vals) == 0 {
		return nil
	}
	q := make(map[string]string, len(vals))
	for k, v := range vals {
		q[k] = strings.Join(v, ",")
	}
	return q
}
