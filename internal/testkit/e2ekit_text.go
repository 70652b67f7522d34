package testkit

import "strings"

// GrepLines returns the lines of text that contain s, joined by
// newlines: the part of a long output (metrics, a log) a failure shows.
func GrepLines(text, s string) string {
	var out []string
	for l := range strings.SplitSeq(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
