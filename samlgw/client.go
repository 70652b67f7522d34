package samlgw

import (
	"net/http"
	"net/netip"
	"strings"
)

// The ACS keeps its work budgets per client (acsGate), so it must
// know who the client of a post is. It is the peer address, unless the
// peer is a proxy listed in sidecar.trusted_proxies: then the proxy names
// the client, in X-Real-IP or else the last hop of X-Forwarded-For (the
// one the proxy itself appended; the hops before it are whatever the
// client wrote). From any other peer those headers are the client's own
// words and are ignored: honoured, they would let one flooder pose as
// any number of clients, each with a fresh budget.

// ipv6ClientBits is the prefix an IPv6 client is known by: a host or a
// home network is given a whole /64 and picks addresses in it at will
// (privacy addresses), so a budget per address would hand one machine as
// many budgets as it asks for.
const ipv6ClientBits = 64

// clientNamer names the client of a post.
type clientNamer struct {
	trusted []netip.Prefix
}

// clientOf returns the client of r: its IPv4 address or IPv6 /64 as a
// prefix (the zero Prefix when the peer has no IP address, such as a Unix
// socket: those posts share one budget), and whether r named a client in
// a header that was ignored because its peer is not a trusted proxy.
func (c clientNamer) clientOf(r *http.Request) (client netip.Prefix, ignored bool) {
	peer, ok := parseHostAddr(r.RemoteAddr)
	if !ok {
		return netip.Prefix{}, false
	}
	named := r.Header.Get("X-Real-Ip") != "" || r.Header.Get("X-Forwarded-For") != ""
	if !c.trusts(peer) {
		return clientPrefix(peer), named
	}
	if a, ok := parseHostAddr(strings.TrimSpace(r.Header.Get("X-Real-Ip"))); ok {
		return clientPrefix(a), false
	}
	if a, ok := lastForwardedFor(r.Header.Values("X-Forwarded-For")); ok {
		return clientPrefix(a), false
	}
	return clientPrefix(peer), false
}

// trusts reports whether peer is a listed proxy.
func (c clientNamer) trusts(peer netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(peer) {
			return true
		}
	}
	return false
}

// lastForwardedFor returns the last hop of the X-Forwarded-For header
// lines taken as one list.
func lastForwardedFor(lines []string) (netip.Addr, bool) {
	if len(lines) == 0 {
		return netip.Addr{}, false
	}
	last := lines[len(lines)-1]
	if i := strings.LastIndexByte(last, ','); i >= 0 {
		last = last[i+1:]
	}
	return parseHostAddr(strings.TrimSpace(last))
}

// parseHostAddr reads an IP address, with or without a port ("1.2.3.4",
// "1.2.3.4:80", "::1", "[::1]:80"), without its zone and with an
// IPv4-mapped IPv6 address read as IPv4.
func parseHostAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.WithZone("").Unmap(), true
}

// clientPrefix is the client a is counted as: itself for IPv4, its /64
// for IPv6.
func clientPrefix(a netip.Addr) netip.Prefix {
	bits := a.BitLen()
	if a.Is6() {
		bits = ipv6ClientBits
	}
	p, _ := a.Prefix(bits)
	return p
}
