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
