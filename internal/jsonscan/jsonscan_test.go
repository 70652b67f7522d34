package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestSkipValue(t *testing.T) {
	for _, tc := range []struct {
		doc string
		end int
		ok  bool
	}{
		{`"a\"b",`, 6, true},
		{`{"a":[1,"]}"],"b":{}} x`, 21, true},
		{`[]`, 2, true},
		{`123 ,`, 3, true},
		{`true}`, 4, true},
		{`"open`, 0, false},
		{`{"a":[1}`, 0, false},
		{``, 0, false},
		{`,`, 0, false},
	} {
		end, ok := SkipValue([]byte(tc.doc), 0)
		if end != tc.end || ok != tc.ok {
			t.Errorf("SkipValue(%q) = %d, %v; want %d, %v", tc.doc, end, ok, tc.end, tc.ok)
		}
	}
}

func TestKeyIs(t *testing.T) {
	for _, tc := range []struct {
		raw, key  string
		match, ok bool
	}{
		{`"plan"`, "plan", true, true},
		{`"plan"`, "plans", false, true},
		{`"p\u006can"`, "plan", true, true},
		{`"a\"b"`, `a"b`, true, true},
		{"\"\xff\"", "\xff", false, true}, // decodes to U+FFFD
		{"\"\xff\"", "\uFFFD", true, true},
		{`"bad\x"`, "bad", false, false},
		{`plan`, "plan", false, false},
	} {
		match, ok := KeyIs([]byte(tc.raw), tc.key)
		if match != tc.match || ok != tc.ok {
			t.Errorf("KeyIs(%q, %q) = %v, %v; want %v, %v", tc.raw, tc.key, match, ok, tc.match, tc.ok)
		}
	}
}

// A value SkipValue finds in valid JSON ends where encoding/json says,
// when a delimiter or the end follows it (SkipValue does not check a
// number's spelling, so it reads "00" whole).
func FuzzSkipValue(f *testing.F) {
	f.Add(`{"a":[1,"x\"y",{"b":null}]} `)
	f.Add(`"\\"`)
	f.Fuzz(func(t *testing.T, doc string) {
		var raw json.RawMessage
		dec := json.NewDecoder(strings.NewReader(doc))
		if dec.Decode(&raw) != nil || len(doc) == 0 || IsSpace(doc[0]) {
			return
		}
		if rest := doc[dec.InputOffset():]; rest != "" && !IsSpace(rest[0]) && !strings.ContainsRune(",]}", rune(rest[0])) {
			return
		}
		end, ok := SkipValue([]byte(doc), 0)
		if !ok || end != int(dec.InputOffset()) {
			t.Fatalf("SkipValue(%q) = %d, %v; encoding/json ends at %d", doc, end, ok, dec.InputOffset())
		}
	})
}
