package envoy

import (
	"maps"
	"testing"

	"github.com/svc-dev/svc/engine"
)

var _ engine.RequestSource = (*mappedRequest)(nil)

// What a deferred mapping offers the decision log (engine.RequestSource)
// is what CompleteRequest sets: the headers it keeps, the query it
// parses, forwarding headers only when trusted.
func TestRequestSourceIsTheCompletedRequest(t *testing.T) {
	headers := map[string]string{
		":authority": "shop.example", ":path": "/orders/1?expand=items&a=1&a=2", "authorization": "Bearer t",
		"x-forwarded-for": "203.0.113.9", "forwarded": "for=203.0.113.9", "x-real-ip": "203.0.113.9",
		"user-agent": "curl/8", "x-tag": "a", HeaderPrefix + "token": "t",
	}
	for _, trust := range []bool{false, true} {
		for _, target := range []string{"/orders/1?expand=items&a=1&a=2&bad=%zz#frag", "/orders/1", "/orders/1?"} {
			m, err := NewMapper(testTenant, nil)
			if err != nil {
				t.Fatal(err)
			}
			m.trustForwardedFor = trust
			pr := proxyRequest{method: "GET", target: target, headers: headers, sourceIP: "198.51.100.4"}
			var blk mappedRequest
			if _, _, err := m.mapRequestInto(pr, &blk, true); err != nil {
				t.Fatal(err)
			}
			kept := map[string]string{}
			for k, v := range blk.SourceHeaders() {
				if blk.KeepHeader(k) {
					kept[k] = v
				}
			}
			query := blk.SourceQuery()
			blk.CompleteRequest(&blk.req)
			if len(kept) == 0 || !maps.Equal(kept, blk.req.Headers) {
				t.Errorf("trust %v, %s: source's headers %v, completed %v", trust, target, kept, blk.req.Headers)
			}
			if !maps.Equal(query, blk.req.Query) || (query == nil) != (blk.req.Query == nil) {
				t.Errorf("trust %v, %s: source's query %v, completed %v", trust, target, query, blk.req.Query)
			}
		}
	}
}
