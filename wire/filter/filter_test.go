package filter

import (
	"errors"
	"testing"
)

func record(m map[string]string) Getter {
	return func(f string) (string, bool) { v, ok := m[f]; return v, ok }
}

func TestParseAndMatch(t *testing.T) {
	denied := record(map[string]string{"policy.result": "denied", "tenant": "acme", "user_id": "u-1", "level": "INFO"})
	allowed := record(map[string]string{"policy.result": "allowed", "tenant": "globex", "user_id": "u-2", "level": "INFO"})
	tests := []struct {
		name          string
		expr          string
		canonical     string
		denied, allow bool
	}{
		{"empty matches all", "  ", "", true, true},
		{"equality", "policy.result=denied", "policy.result=denied", true, false},
		{"inequality", "tenant!=acme", "tenant!=acme", false, true},
		{"missing field never equals", "reason=policy-deny", "reason=policy-deny", false, false},
		{"missing field is unequal", "reason!=policy-deny", "reason!=policy-deny", true, true},
		{"AND binds tighter than OR", "tenant=globex OR tenant=acme AND user_id=u-9", "tenant=globex OR (tenant=acme AND user_id=u-9)", false, true},
		{"parentheses regroup", "(tenant=globex OR tenant=acme) AND user_id=u-1", "(tenant=globex OR tenant=acme) AND user_id=u-1", true, false},
		{"keywords in any case", "tenant=acme and user_id=u-1 or tenant=globex", "(tenant=acme AND user_id=u-1) OR tenant=globex", true, true},
		{"quoted value", `tenant = "acme"`, "tenant=acme", true, false},
		{"quoted value with escapes", `tenant="a \"b\" \\c"`, `tenant="a \"b\" \\c"`, false, false},
		{"keyword as a value", "tenant=AND", "tenant=AND", false, false},
		{"level is case-insensitive", "level=info", "level=info", true, true},
		{"nested", "((tenant=acme))", "tenant=acme", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Parse(tt.expr)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.expr, err)
			}
			if got := e.String(); got != tt.canonical {
				t.Errorf("String() = %q, want %q", got, tt.canonical)
			}
			if got := e.Match(denied); got != tt.denied {
				t.Errorf("Match(denied record) = %v, want %v", got, tt.denied)
			}
			if got := e.Match(allowed); got != tt.allow {
				t.Errorf("Match(allowed record) = %v, want %v", got, tt.allow)
			}
		})
	}
}

func TestParseErrorsNamePosition(t *testing.T) {
	tests := []struct {
		expr string
		pos  int
		msg  string
	}{
		{"policy.result=", 15, "expected a value after \"=\", got the end of the filter"},
		{"policy.result", 14, `expected = or != after field "policy.result", got the end of the filter`},
		{"tenant=acme AND", 16, "expected a comparison such as field=value or (, got the end of the filter"},
		{"tenant=acme OR OR user_id=x", 16, "expected a comparison such as field=value or (, got OR"},
		{"(tenant=acme", 13, "expected ) to close the ( at position 1, got the end of the filter"},
		{"tenant=acme)", 12, `expected AND, OR or the end, got ")"`},
		{"tenant=acme user_id=x", 13, `expected AND, OR or the end, got "user_id"`},
		{"tenant!acme", 7, `expected "!=", got a lone "!"`},
		{`tenant="acme`, 8, "quoted value is never closed"},
		{`tenant="a\nb"`, 10, `only \" and \\ are escapes in a quoted value`},
		{"9lives=x", 1, `"9lives" is not a field name (letters, digits, _ . -)`},
		{"=x", 1, `expected a comparison such as field=value or (, got "="`},
		{"tenant==x", 8, `expected a value after "=", got "="`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := Parse(tt.expr)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error = %v, want a *SyntaxError", tt.expr, err)
			}
			if se.Pos != tt.pos || se.Msg != tt.msg {
				t.Errorf("Parse(%q) = position %d %q, want position %d %q", tt.expr, se.Pos, se.Msg, tt.pos, tt.msg)
			}
		})
	}
}

func TestParseBoundsInput(t *testing.T) {
	deep := ""
	for range maxDepth + 1 {
		deep += "("
	}
	if _, err := Parse(deep + "a=b"); err == nil {
		t.Error("nesting beyond the bound was accepted")
	}
	long := make([]byte, MaxLen+1)
	for i := range long {
		long[i] = 'a'
	}
	if _, err := Parse(string(long)); err == nil {
		t.Error("an expression beyond MaxLen was accepted")
	}
	if _, err := Parse("tenant=\xff"); err == nil {
		t.Error("invalid UTF-8 was accepted")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"policy.result=denied", "a=b AND (c!=d OR e=\"f g\")", "((", "a=", `x="\"`, "level=WARN or level=error"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := Parse(s)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Pos < 1 {
				t.Fatalf("Parse(%q) = %v, want a *SyntaxError with a position", s, err)
			}
			return
		}
		// The canonical form parses to the same canonical form.
		again, err := Parse(e.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", e.String(), s, err)
		}
		if again.String() != e.String() {
			t.Fatalf("canonical form unstable: %q then %q", e.String(), again.String())
		}
		e.Match(func(string) (string, bool) { return "", false })
	})
}
