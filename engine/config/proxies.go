package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseTrustedProxies parses sidecar.trusted_proxies: each entry is a CIDR
// ("10.0.0.0/8", "fd00::/8") or a single address, which stands for
// itself alone. IPv4-mapped IPv6 forms are read as IPv4, as the peers
// they are compared with are.
func ParseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := parseTrustedProxy(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parseTrustedProxy(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("must be a CIDR such as \"10.0.0.0/8\" or an IP address, got %q", s)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("must be a CIDR such as \"10.0.0.0/8\" or an IP address, got %q", s)
	}
	if p.Addr().Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("an IPv4-mapped CIDR must be /96 or longer, got %q", s)
		}
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}
