package samlgw

import (
	"net/http"
)

// admission returns what the ACS gate needs to know of r before its body
// is read: its client, its lane and whether it carries a genuine request
// cookie.
func (g *Gateway) admission(r *http.Request) post {
	client, ignored := g.clients.clientOf(r)
	if ignored && g.ignoredForwarding.CompareAndSwap(false, true) {
		g.log.Warn("an ACS post named its client in X-Real-IP or X-Forwarded-For from a peer that sidecar.trusted_proxies does not list: "+
			"the header is ignored and the peer is the client, so every user behind that proxy shares one ACS budget; "+
			"list the proxy in sidecar.trusted_proxies", "peer", r.RemoteAddr)
	}
	return post{client: client, lane: laneOf(r.ContentLength), priority: g.genuineRequestCookie(r)}
}

// genuineRequestCookie reports whether r carries a request cookie
// (binding.go) that lists a sign-on this gateway started and that has not
// expired: its MAC verifies under the gateway's request key. Merely
// present, or forged, it gives no priority. Such a post answers a login
// this browser began, the one kind of post a real user sends. It is no
// proof against a determined flooder, who can fetch the login page too:
// its posts then stay within their client's budget all the same, and the
// priority only keeps the cookie-less part of a flood, the cheap one to
// send from many addresses, out of the lane's reserve.
func (g *Gateway) genuineRequestCookie(r *http.Request) bool {
	for _, id := range g.boundRequests(r) {
		if _, ok, err := g.v.requests.verify(r.Context(), id, g.v.skew); ok && err == nil {
			return true
		}
	}
	return false
}
