package jsonstr_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/jsonstr"
)

// encodingJSON is what encoding/json writes for s, with or without HTML
// escaping.
func encodingJSON(t testing.TB, s string, html bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var samples = []string{
	"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rret\bbs\fff",
	"\x00\x01\x1f\x7f", "<script>&amp;</script>", "line\u2028sep\u2029", "bad \xff utf-8 \xc3",
	"ünïcödé 日本 🎉", "\xed\xa0\x80 surrogate",
}

func TestAppendMatchesEncodingJSON(t *testing.T) {
	for _, s := range samples {
		for _, html := range []bool{true, false} {
			got, want := jsonstr.Append([]byte("x"), s, html), append([]byte("x"), encodingJSON(t, s, html)...)
			if !bytes.Equal(got, want) {
				t.Errorf("Append(%q, html=%v) = %s, want %s", s, html, got, want)
			}
		}
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range samples {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, html bool) {
		if got, want := jsonstr.Append(nil, s, html), encodingJSON(t, s, html); !bytes.Equal(got, want) {
			t.Fatalf("Append(%q, html=%v) = %s, want %s", s, html, got, want)
		}
	})
}

// TestAppendEveryByteEveryPosition compares Append with encoding/json on
// strings of every length up to three words in which one byte, of every
// value, or one multi-byte sequence sits at every position: the boundaries
// between the word-at-a-time scan and the byte loop.
func TestAppendEveryByteEveryPosition(t *testing.T) {
	specials := []string{"\u00e9", "\u2028", "\u2029", "\xe2\x80", "\xf0\x9f\x8e\x89", "<>&", "\"\\"}
	for _, bg := range []byte{'a', '<', 0x1f} {
		for n := 1; n <= 25; n++ {
			for pos := range n {
				var ins []string
				for v := range 256 {
					ins = append(ins, string([]byte{byte(v)}))
				}
				ins = append(ins, specials...)
				for _, in := range ins {
					b := bytes.Repeat([]byte{bg}, n)
					s := string(b[:pos]) + in + string(b[pos+1:])
					for _, html := range []bool{true, false} {
						if got, want := jsonstr.Append(nil, s, html), encodingJSON(t, s, html); !bytes.Equal(got, want) {
							t.Fatalf("Append(%q, html=%v) = %s, want %s", s, html, got, want)
						}
					}
				}
			}
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct{ name, s string }{
		{"id", "0d9f1c7e-3b7a-4c52-9a43-0e6b5a1f2c11"},
		{"short", "acme"},
		{"escapes", "tab\there \"quoted\" <b>ünï</b>"},
	} {
		b.Run(c.name, func(b *testing.B) {
			buf := make([]byte, 0, 256)
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				buf = jsonstr.Append(buf[:0], c.s, false)
			}
		})
	}
}

func TestAppendValueMatchesEncodingJSON(t *testing.T) {
	values := []any{
		nil, true, json.Number("1.50"), 2.5, "<a>&\u2028\xff",
		map[string]any{"z": 1, "a": []any{"x", nil, map[string]any{"k": "v"}}, "<": ">"},
		map[string]any{},
	}
	for _, v := range values {
		for _, html := range []bool{true, false} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(html)
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			got, ok := jsonstr.AppendValue([]byte("prefix"), v, html)
			if !ok || string(got) != "prefix"+strings.TrimSuffix(want.String(), "\n") {
				t.Errorf("AppendValue(%#v, %v) = %s, %v, want prefix%s", v, html, got, ok, want.String())
			}
		}
	}
	if got, ok := jsonstr.AppendValue([]byte("p"), map[string]any{"f": func() {}}, false); ok || string(got) != "p" {
		t.Errorf("AppendValue(func) = %s, %v", got, ok)
	}
}
