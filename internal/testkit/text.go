package testkit

// SwapASCIICase turns ASCII upper-case letters to lower case and back,
// leaving every other byte: a request that should match, or fail to
// match, the way the original does when case folds.
func SwapASCIICase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// WrongSecret is key with one character of its secret changed, in the
// middle of it, where every bit counts (a key's last character may carry
// bits that decoding ignores): the same id, a secret that is surely
// another.
func WrongSecret(key string) string {
	i := len(key) - 8
	c := byte('A')
	if key[i] == 'A' {
		c = 'B'
	}
	return key[:i] + string(c) + key[i+1:]
}
