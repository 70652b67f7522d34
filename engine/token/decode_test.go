package token

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// referenceDecode is what decodeObject must match: encoding/json with
// UseNumber into a map, one object and nothing after it.
func referenceDecode(buf []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errNoObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errSyntax
	}
	return m, nil
}

var decodeSeeds = []string{
	`{}`,
	` {"a":1} `,
	`{"exp":1767272400,"iat":1.5e9,"neg":-0.0,"big":123456789012345678901234567890}`,
	`{"s":"plain","e":"tab\tnew\nline \"q\" \\ \/ \u00e9 \ud83d\ude00","u":"héllo wörld"}`,
	`{"nested":{"a":[1,[2,[3,{}]],[]],"b":null,"c":true,"d":false}}`,
	`{"dup":1,"dup":"two"}`,
	`{"bad utf8":"` + "\xff\xfe" + `"}`,
	`{"lone surrogate":"\ud800"}`,
	`[1,2]`, `null`, `"str"`, `1`, `true`,
	`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`, `{"a":0x1}`,
	`{"a":tru}`, `{"a":nul}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":1}x`, `{"a":1}{}`,
	`{"a":"ctrl` + "\x01" + `"}`, `{"a":"unterminated}`, `{"a":"\x"}`, `{"a":"\u12"}`,
	`{"a":[1 2]}`, `{"a":[1,]}`, `{"a":{"b":1}`, `{'a':1}`, "{\"a\":1}\x00",
	`{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
}

func TestDecodeObjectMatchesEncodingJSON(t *testing.T) {
	for _, s := range decodeSeeds {
		t.Run(s[:min(len(s), 30)], func(t *testing.T) { compareDecoders(t, []byte(s)) })
	}
}

func TestDecodeObjectDepth(t *testing.T) {
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		doc := []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
		compareDecoders(t, doc)
	}
}

func compareDecoders(t *testing.T, buf []byte) {
	t.Helper()
	want, wantErr := referenceDecode(buf)
	got, gotErr := decodeObject(bytes.Clone(buf))
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("decode(%q): err = %v, encoding/json err = %v", buf, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decode(%q) = %#v, encoding/json = %#v", buf, got, want)
	}
	// The unique decoding gives the same result, or refuses a duplicate
	// member (it stops there, so the rest may be invalid too).
	u, uErr := decodeUniqueObject(bytes.Clone(buf))
	switch {
	case errors.Is(uErr, errDuplicate):
	case (uErr == nil) != (gotErr == nil):
		t.Fatalf("decodeUnique(%q): err = %v, decode err = %v", buf, uErr, gotErr)
	case !reflect.DeepEqual(u, got):
		t.Fatalf("decodeUnique(%q) = %#v, decode = %#v", buf, u, got)
	}
}

func TestDecodeUniqueObjectRefusesDuplicates(t *testing.T) {
	for _, doc := range []string{
		`{"tenant_id":"globex","tenant_id":"acme"}`,
		`{"a":1,"b":2,"a":1}`,
		`{"org":{"id":1,"id":2}}`,
		`{"x":[{"k":1,"k":1}]}`,
		`{"t":1,"\u0074":2}`,
	} {
		if _, err := decodeUniqueObject([]byte(doc)); !errors.Is(err, errDuplicate) {
			t.Errorf("decodeUnique(%s) err = %v, want errDuplicate", doc, err)
		}
	}
	if _, err := decodeUniqueObject([]byte(`{"a":{"a":1},"b":[{"a":2},{"a":3}]}`)); err != nil {
		t.Errorf("same name in different objects: %v", err)
	}
}

// FuzzDecodeObject holds decodeObject to encoding/json's results.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(compareDecoders)
}

var benchClaims = []byte(`{"aud":"svc","big":123456789012345678901234567890,"email":"user-1@acme.example","exp":1767272400,"iat":1767268740,"iss":"https://idp.example.com","nbf":1767268740,"org":{"flags":[true,null,1.5],"id":42,"plan":"gold"},"roles":["admin","billing:read"],"sub":"user-1","tenant_id":"acme"}`)

// BenchmarkDecodeClaims compares the claims decoder with encoding/json.
func BenchmarkDecodeClaims(b *testing.B) {
	b.Run("decodeUniqueObject", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeUniqueObject(benchClaims); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := referenceDecode(benchClaims); err != nil {
				b.Fatal(err)
			}
		}
	})
}
