package jsonmask

import (
	"errors"
	"strings"
	"testing"
)

func TestApply(t *testing.T) {
	const doc = `{"b":1,"a":{"x~y":1,"p/q":2,"list":[10,20,30],"deep":[{"k":1,"s":"<&>"}]},"n":12345678901234567890}`
	tests := []struct {
		name     string
		pointers []string
		want     string
	}{
		{"member", []string{"/b"},
			`{"a":{"deep":[{"k":1,"s":"<&>"}],"list":[10,20,30],"p/q":2,"x~y":1},"erased":["/b"],"n":12345678901234567890}`},
		{"escapes", []string{"/a/x~0y", "/a/p~1q"},
			`{"a":{"deep":[{"k":1,"s":"<&>"}],"list":[10,20,30]},"b":1,"erased":["/a/x~0y","/a/p~1q"],"n":12345678901234567890}`},
		{"array element, then the next moves up", []string{"/a/list/0", "/a/list/0"},
			`{"a":{"deep":[{"k":1,"s":"<&>"}],"list":[30],"p/q":2,"x~y":1},"b":1,"erased":["/a/list/0","/a/list/0"],"n":12345678901234567890}`},
		{"inside an array element", []string{"/a/deep/0/k"},
			`{"a":{"deep":[{"s":"<&>"}],"list":[10,20,30],"p/q":2,"x~y":1},"b":1,"erased":["/a/deep/0/k"],"n":12345678901234567890}`},
		{"missing ones skipped", []string{"/nope", "/a/list/3", "/a/list/01", "/a/list/-", "/b/c", "/n"},
			`{"a":{"deep":[{"k":1,"s":"<&>"}],"list":[10,20,30],"p/q":2,"x~y":1},"b":1,"erased":["/n"]}`},
		{"whole subtree", []string{"/a"}, `{"b":1,"erased":["/a"],"n":12345678901234567890}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse(tt.pointers)
			if err != nil {
				t.Fatal(err)
			}
			got, changed, err := m.Apply([]byte(doc))
			if err != nil || !changed || string(got) != tt.want {
				t.Errorf("Apply = %s, %v, %v\nwant %s", got, changed, err, tt.want)
			}
		})
	}
}

func TestApplyNothingErased(t *testing.T) {
	doc := []byte(`{"b":1,"a":2}`)
	for _, m := range []*Mask{nil, mustParse(t, "/c", "/a/b")} {
		got, changed, err := m.Apply(doc)
		if err != nil || changed || &got[0] != &doc[0] {
			t.Errorf("Apply = %s, %v, %v; want doc itself", got, changed, err)
		}
	}
	if _, _, err := mustParse(t, "/a").Apply([]byte(`[1]`)); err == nil {
		t.Error("Apply of an array: no error")
	}
}

func TestParseErrors(t *testing.T) {
	for _, p := range []string{"", "input/x", "/a~", "/a~2b", "/erased"} {
		_, err := Parse([]string{"/ok", p})
		var e *Error
		if !errors.As(err, &e) || e.Pointer != p || !strings.Contains(err.Error(), `"`+p+`"`) {
			t.Errorf("Parse(%q) = %v, want an *Error naming it", p, err)
		}
	}
	if m, err := Parse(nil); m != nil || err != nil || !m.Empty() {
		t.Errorf("Parse(nil) = %v, %v", m, err)
	}
	if got := mustParse(t, "/a", "/erased/0").Pointers(); len(got) != 2 || got[1] != "/erased/0" {
		t.Errorf("Pointers = %q", got)
	}
}

func mustParse(t *testing.T, pointers ...string) *Mask {
	t.Helper()
	m, err := Parse(pointers)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
