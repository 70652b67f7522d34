package introspect

// LooksLikeJWS reports whether raw has the shape of a JWS in compact
// serialization: three base64url parts, joined by two dots, the first
// not empty. Such a bearer is verified as a JWT; any other one is an
// opaque token for the introspection endpoint.
func LooksLikeJWS(raw string) bool {
	dots := 0
	partLen := 0
	for i := 0; i < len(raw); i++ {
		switch b := raw[i]; {
		case b == '.':
			if dots == 0 && partLen == 0 {
				return false
			}
			dots++
			partLen = 0
			if dots > 2 {
				return false
			}
		case b >= 'A' && b <= 'Z', b >= 'a' && b <= 'z', b >= '0' && b <= '9', b == '-', b == '_':
			partLen++
		default:
			return false
		}
	}
	return dots == 2
}
