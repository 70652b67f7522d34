package filter

import (
	"fmt"
	"strings"
	"unicode"
)

type kind int

const (
	tEnd kind = iota
	tWord
	tString
	tEq
	tNe
	tAnd
	tOr
	tOpen
	tClose
)

type token struct {
	kind kind
	text string
	pos  int // 1-based, in runes
}

func (t token) String() string {
	switch t.kind {
	case tEnd:
		return "the end of the filter"
	case tString:
		return fmt.Sprintf("%q", t.text)
	case tAnd:
		return "AND"
	case tOr:
		return "OR"
	}
	return fmt.Sprintf("%q", t.text)
}

// lex splits s into tokens, ending with a tEnd token.
func lex(s string) ([]token, error) {
	rs := []rune(s)
	var toks []token
	for i := 0; i < len(rs); {
		r := rs[i]
		pos := i + 1
		switch {
		case unicode.IsSpace(r):
			i++
		case r == '(':
			toks = append(toks, token{tOpen, "(", pos})
			i++
		case r == ')':
			toks = append(toks, token{tClose, ")", pos})
			i++
		case r == '=':
			toks = append(toks, token{tEq, "=", pos})
			i++
		case r == '!':
			if i+1 < len(rs) && rs[i+1] == '=' {
				toks = append(toks, token{tNe, "!=", pos})
				i += 2
				continue
			}
			return nil, &SyntaxError{Pos: pos, Msg: `expected "!=", got a lone "!"`}
		case r == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(rs) && rs[j] != '"'; j++ {
				if rs[j] == '\\' {
					if j+1 >= len(rs) || (rs[j+1] != '"' && rs[j+1] != '\\') {
						return nil, &SyntaxError{Pos: j + 1, Msg: `only \" and \\ are escapes in a quoted value`}
					}
					j++
				}
				b.WriteRune(rs[j])
			}
			if j >= len(rs) {
				return nil, &SyntaxError{Pos: pos, Msg: "quoted value is never closed"}
			}
			toks = append(toks, token{tString, b.String(), pos})
			i = j + 1
		default:
			j := i
			for j < len(rs) && !unicode.IsSpace(rs[j]) && !strings.ContainsRune(`()="!`, rs[j]) {
				j++
			}
			w := string(rs[i:j])
			k := tWord
			// A keyword only where a comparison cannot continue: not right
			// after = or != (where it is a value).
			if n := len(toks); n == 0 || (toks[n-1].kind != tEq && toks[n-1].kind != tNe) {
				switch strings.ToUpper(w) {
				case "AND":
					k = tAnd
				case "OR":
					k = tOr
				}
			}
			toks = append(toks, token{k, w, pos})
			i = j
		}
	}
	return append(toks, token{kind: tEnd, pos: len(rs) + 1}), nil
}
