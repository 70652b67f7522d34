package docgen

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

var (
	fenceLine  = regexp.MustCompile("^\\s*(```|~~~)")
	inlineCode = regexp.MustCompile("`[^`]*`")
	mdLink     = regexp.MustCompile(`\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRe  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a (?:name|id)="([^"]+)"`)
)

// prose returns the lines of a Markdown text outside fenced code blocks.
func prose(text string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		if fenceLine.MatchString(l) {
			in = !in
			continue
		}
		if !in {
			out = append(out, l)
		}
	}
	return out
}

// Slug is GitHub's anchor for a heading's text: the rendered text lower
// case, without punctuation but hyphens and underscores, spaces made
// hyphens.
func Slug(heading string) string {
	h := mdLink.ReplaceAllString(heading, "$1")
	h = strings.ReplaceAll(h, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Anchors returns the anchors of a Markdown text: its headings' slugs,
// numbered as GitHub numbers repeated ones, and explicit <a id>s.
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	count := map[string]int{}
	for _, l := range prose(text) {
		if m := headingRe.FindStringSubmatch(l); m != nil {
			s := Slug(m[2])
			if n := count[s]; n > 0 {
				out[fmt.Sprintf("%s-%d", s, n)] = true
			} else {
				out[s] = true
			}
			count[s]++
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
	}
	return out
}

// Link is one relative link of a page.
type Link struct {
	Line   int
	Target string
}

// RelativeLinks returns the links of a Markdown text that point into the
// repository (no scheme), outside code.
func RelativeLinks(text string) []Link {
	var out []Link
	in := false
	for i, l := range strings.Split(text, "\n") {
		if fenceLine.MatchString(l) {
			in = !in
			continue
		}
		if in {
			continue
		}
		l = inlineCode.ReplaceAllString(l, "")
		for _, m := range mdLink.FindAllStringSubmatch(l, -1) {
			t := m[2]
			if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			out = append(out, Link{Line: i + 1, Target: t})
		}
	}
	return out
}

// CheckLinks checks every relative link of the Markdown file at path:
// the file or directory it names exists (relative to path's directory,
// inside root), and its #anchor is a heading of the target page. Targets
// listed in pending may be missing (pages another change brings); their
// anchors are then not checked.
func CheckLinks(root, path string, pending map[string]bool) []error {
	text, err := os.ReadFile(path)
	if err != nil {
		return []error{err}
	}
	var errs []error
	rel, _ := filepath.Rel(root, path)
	for _, l := range RelativeLinks(string(text)) {
		file, anchor, _ := strings.Cut(l.Target, "#")
		target := path
		if file != "" {
			target = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
		}
		trel, _ := filepath.Rel(root, target)
		if strings.HasPrefix(trel, "..") {
			errs = append(errs, fmt.Errorf("%s:%d: %s points outside the repository", rel, l.Line, l.Target))
			continue
		}
		if _, err := os.Stat(target); err != nil {
			if !pending[filepath.ToSlash(trel)] {
				errs = append(errs, fmt.Errorf("%s:%d: %s: no such file", rel, l.Line, l.Target))
			}
			continue
		}
		if anchor == "" || !strings.HasSuffix(target, ".md") {
			continue
		}
		page, err := os.ReadFile(target)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !Anchors(string(page))[anchor] {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %s has no heading with anchor #%s", rel, l.Line, l.Target, trel, anchor))
		}
	}
	return errs
}
