package jsonstr_test

import (
	"bytes"
	"encoding/json"
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
