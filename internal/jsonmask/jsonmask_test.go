package jsonmask

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strconv"
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
			`{"a":{"x~y":1,"p/q":2,"list":[10,20,30],"deep":[{"k":1,"s":"<&>"}]},"n":12345678901234567890,"erased":["/b"]}`},
		{"escapes", []string{"/a/x~0y", "/a/p~1q"},
			`{"b":1,"a":{"list":[10,20,30],"deep":[{"k":1,"s":"<&>"}]},"n":12345678901234567890,"erased":["/a/x~0y","/a/p~1q"]}`},
		{"array element, then the next moves up", []string{"/a/list/0", "/a/list/0"},
			`{"b":1,"a":{"x~y":1,"p/q":2,"list":[30],"deep":[{"k":1,"s":"<&>"}]},"n":12345678901234567890,"erased":["/a/list/0","/a/list/0"]}`},
		{"inside an array element", []string{"/a/deep/0/k"},
			`{"b":1,"a":{"x~y":1,"p/q":2,"list":[10,20,30],"deep":[{"s":"<&>"}]},"n":12345678901234567890,"erased":["/a/deep/0/k"]}`},
		{"missing ones skipped", []string{"/nope", "/a/list/3", "/a/list/01", "/a/list/-", "/b/c", "/n"},
			`{"b":1,"a":{"x~y":1,"p/q":2,"list":[10,20,30],"deep":[{"k":1,"s":"<&>"}]},"erased":["/n"]}`},
		{"whole subtree", []string{"/a"}, `{"b":1,"n":12345678901234567890,"erased":["/a"]}`},
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
		if err != nil || changed || &got[0] != &doc[0] || string(doc) != `{"b":1,"a":2}` {
			t.Errorf("Apply = %s, %v, %v; want doc itself", got, changed, err)
		}
	}
	// Only as much is checked as the pointers need: the records are the
	// sidecar's own JSON.
	for _, bad := range []string{`[1]`, ``, ` `, `{"a":1`, `{"a":"x}`, `{"a" 1}`, `{"b":1 "a":2}`, `{"b":[1,"a":2}`} {
		if _, _, err := mustParse(t, "/a").Apply([]byte(bad)); err == nil {
			t.Errorf("Apply of %q: no error", bad)
		}
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

// Odd but valid JSON: spaces everywhere, escaped keys, strings holding
// brackets and quotes, nested arrays, the only member.
func TestApplyShapes(t *testing.T) {
	tests := []struct{ doc, pointer, want string }{
		{` { "a" : 1 } `, "/a", ` { "erased":["/a"]} `},
		{`{ "a" : [ [1, 2] , [3] ] , "b" : "x\"}]" }`, "/a/0/1", `{ "a" : [ [1] , [3] ] , "b" : "x\"}]" ,"erased":["/a/0/1"]}`},
		{`{"b":"x\"}]","a":[[1,2],[3]]}`, "/a/1", `{"b":"x\"}]","a":[[1,2]],"erased":["/a/1"]}`},
		{`{"q\"k":1,"\u00e9":2,"z":3}`, "/é", `{"q\"k":1,"z":3,"erased":["/é"]}`},
		{`{"q\"k":1,"z":3}`, "/q\"k", `{"z":3,"erased":["/q\"k"]}`},
		{`{"a":{"b":{}},"c":[]}`, "/a/b", `{"a":{},"c":[],"erased":["/a/b"]}`},
		{`{"a":{"":1}}`, "/a/", `{"a":{},"erased":["/a/"]}`},
	}
	for _, tt := range tests {
		got, changed, err := mustParse(t, tt.pointer).Apply([]byte(tt.doc))
		if err != nil || !changed || string(got) != tt.want {
			t.Errorf("Apply(%s, %q) = %s, %v, %v\nwant %s", tt.doc, tt.pointer, got, changed, err, tt.want)
		}
	}
}

// record is a decision record as the engine writes it.
const record = `{"time":"2026-11-27T21:23:00.003035568Z","decision_id":"deb2f1d6","trace_id":"","tenant":"acme","user_id":"u-1","action":"reports:read","resource":{"type":"reports","id":"1","tenant":"acme"},"allow":true,"deny_reasons":["a","b"],"reason":"policy-allow","policy_revision":"sha256:7ecc023c5e5c0b15","latency_us":29427,"simulated":false,"source":"http","identity_kind":"jwt","input":{"action":"reports:read","user":{"id":"u-1","role":"viewer","roles":["viewer","editor"],"tenant_id":"acme","claims":{"x":"[REDACTED]"}},"resource":{"type":"reports","id":"1","tenant":"acme"},"tenant":{"id":"acme","plan":"team"},"request":{"method":"GET","path":"/reports/1","headers":{"x-ssn":"[REDACTED]","accept":"*/*"},"canonical_path":"/reports/1","format":""},"identity":{"kind":"jwt","id":"u-1","tenant_id":"acme","roles":["viewer"],"claims":{}}}}`

// Apply agrees with erasing from the decoded object (encoding/json,
// OPA's way) on every pointer to a value of a record, alone and in
// random sets, and on pointers to nothing.
func TestApplyAgreesWithDecoded(t *testing.T) {
	var v any
	if err := json.Unmarshal([]byte(record), &v); err != nil {
		t.Fatal(err)
	}
	var all []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				p := prefix + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
				all = append(all, p)
				walk(p, c)
			}
		case []any:
			for i, c := range x {
				p := prefix + "/" + strconv.Itoa(i)
				all = append(all, p)
				walk(p, c)
			}
		}
	}
	walk("", v)
	all = append(all, "/nope", "/input/nope/x", "/deny_reasons/2", "/input/user/roles/01", "/time/0")
	rng := rand.New(rand.NewPCG(1, 2))
	sets := make([][]string, 0, len(all)+200)
	for _, p := range all {
		sets = append(sets, []string{p})
	}
	for range 200 {
		n := 1 + rng.IntN(5)
		set := make([]string, n)
		for i := range set {
			set[i] = all[rng.IntN(len(all))]
		}
		sets = append(sets, set)
	}
	for _, set := range sets {
		got, _, err := mustParse(t, set...).Apply([]byte(record))
		if err != nil {
			t.Fatalf("%q: %v", set, err)
		}
		want := eraseDecoded(t, set)
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%q: output is not JSON: %v\n%s", set, err, got)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%q:\n got %s\nwant %s", set, got, want)
		}
	}
}

// eraseDecoded erases pointers from the decoded record: the reference.
func eraseDecoded(t *testing.T, pointers []string) []byte {
	var root map[string]any
	if err := json.Unmarshal([]byte(record), &root); err != nil {
		t.Fatal(err)
	}
	var erased []string
	for _, p := range pointers {
		tokens, err := ParsePointer(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := eraseIn(root, tokens); ok {
			erased = append(erased, p)
		}
	}
	if len(erased) > 0 {
		root[Erased] = erased
	}
	b, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func eraseIn(node any, tokens []string) (any, bool) {
	t, rest := tokens[0], tokens[1:]
	switch v := node.(type) {
	case map[string]any:
		child, ok := v[t]
		if !ok {
			return node, false
		}
		if len(rest) == 0 {
			delete(v, t)
			return v, true
		}
		c, ok := eraseIn(child, rest)
		v[t] = c
		return v, ok
	case []any:
		i, err := strconv.Atoi(t)
		if err != nil || i < 0 || i >= len(v) || strconv.Itoa(i) != t {
			return node, false
		}
		if len(rest) == 0 {
			return append(v[:i:i], v[i+1:]...), true
		}
		c, ok := eraseIn(v[i], rest)
		v[i] = c
		return v, ok
	}
	return node, false
}

func BenchmarkApply(b *testing.B) {
	m, err := Parse([]string{"/input/request/headers/x-ssn", "/user_id", "/input/resource/id"})
	if err != nil {
		b.Fatal(err)
	}
	doc := []byte(record)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := m.Apply(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// Any document and any pointer: a parsed mask never panics, and on a
// JSON object it either erases into valid JSON or says why not.
func FuzzApply(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,{"c":2}]},"d":"x"}`), "/a/b/1/c")
	f.Add([]byte(`{"a~b":1,"a/b":2}`), "/a~0b")
	f.Add([]byte(`[1,2]`), "/0")
	f.Add([]byte(`{"a":`), "/a")
	f.Fuzz(func(t *testing.T, doc []byte, pointer string) {
		m, err := Parse([]string{pointer})
		if err != nil {
			return
		}
		out, _, err := m.Apply(doc)
		if err == nil && json.Valid(doc) && !json.Valid(out) {
			t.Fatalf("Apply(%q, %q) = %q, not JSON", doc, pointer, out)
		}
	})
}
