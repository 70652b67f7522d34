package decisionlog

import (
	"encoding/json"
	"maps"
	"testing"
)

func TestWithoutInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"decision_id":"d","input":{"a":[1,{"b":"}"}]},"allow":true}`, `{"decision_id":"d","allow":true,"input_omitted":"too-large"}`},
		{` { "input" : "x" , "input_omitted":"old", "z" : null } `, `{"z" : null,"input_omitted":"too-large"}`},
		{`{"inp\u0075t":1,"a":"\"input\":"}`, `{"a":"\"input\":","input_omitted":"too-large"}`},
		{`{}`, `{"input_omitted":"too-large"}`},
	} {
		got, ok := withoutInput([]byte(tc.in))
		if !ok || string(got) != tc.want {
			t.Errorf("withoutInput(%s) = %s, %v; want %s", tc.in, got, ok, tc.want)
		}
	}
	for _, bad := range []string{``, `[]`, `"input"`, `{"a":1`, `{"a" 1}`, `{1:2}`, `{"a":}`} {
		if got, ok := withoutInput([]byte(bad)); ok {
			t.Errorf("withoutInput(%s) = %s, want refused", bad, got)
		}
	}
}

// FuzzWithoutInput: whatever a spooled record holds, withoutInput never
// panics, and of a JSON object it makes the same object less its input,
// with input_omitted.
func FuzzWithoutInput(f *testing.F) {
	f.Add([]byte(`{"decision_id":"d","input":{"a":[1,{"b":"}"}]},"allow":true}`))
	f.Add([]byte(`{"input_omitted":"x","input":null}`))
	f.Add([]byte(`{"a":"\\","b":[{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := withoutInput(b)
		var in map[string]any
		if json.Unmarshal(b, &in) != nil || in == nil {
			return
		}
		if !ok {
			t.Fatalf("refused the object %s", b)
		}
		var out map[string]any
		if err := json.Unmarshal(got, &out); err != nil {
			t.Fatalf("%s made %s: %v", b, got, err)
		}
		delete(in, "input")
		in[InputOmitted] = "too-large"
		if !maps.EqualFunc(in, out, func(a, b any) bool { x, _ := json.Marshal(a); y, _ := json.Marshal(b); return string(x) == string(y) }) {
			t.Fatalf("%s made %s", b, got)
		}
	})
}
