package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/util"
)

// diffModule reads data in every way the differential test compares.
const diffModule = `package svc.authz

default allow := false

allow if data.t[input.user.tenant_id].flag

deny_reasons contains "no tenant" if not data.t[input.user.tenant_id]
`

// diffData is JSON text of a document exercising what the stores must
// agree on: a table large enough to be an internal node, entries large
// enough to be nodes themselves, keys needing escapes, arrays, numbers
// spelt in several ways, null, false and empty values.
func diffData(entries int) string {
	var b strings.Builder
	b.WriteString(`{"t":{`)
	for i := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"t%05d":{"flag":%t,"n":%d,"f":1.50,"e":1e3,"neg":-0,"nil":null,"roles":["r%d","admin"],"nested":{"deep":{"x":[%d,{"y":"z"}]}},"empty":{},"list":[]}`,
			i, i%3 != 0, i, i%7, i)
	}
	b.WriteString(`,"a\"b":{"flag":true,"k":"quote"},"ü/é.x":{"flag":false,"k":"unicode"},"":{"flag":true,"k":"empty key"},"\u003ctag\u003e":{"flag":true,"k":"<html> & \n"}},`)
	b.WriteString(`"big":{`)
	for i := range 40 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"b%d":{"pad":"%s","m":{"k%d":%d},"arr":[1,2,3]}`, i, strings.Repeat("p", 1200), i, i)
	}
	b.WriteString(`},"svc":{"cfg":{"mode":"strict","limits":[10,20.0,3e2],"off":false}},"arr":[1,"two",{"three":[3]},null,false],"num":123456789012345678901234567890,"s":"x"}`)
	return b.String()
}

// diffQueries read data by key, nested path, iteration, array index,
// the whole of data and of data.svc.
var diffQueries = []string{
	`x := data.t[input.k]`,
	`x := data.t[input.k].n`,
	`x := data.t[input.k].roles[0]`,
	`x := data.t[input.k].roles[input.i]`,
	`x := data.t[input.k].nested.deep.x[1].y`,
	`x := data.t[input.k].nested`,
	`x := data.t[input.k].missing`,
	`x := data.t[input.k].nil`,
	`x := data.t[input.k].flag == false`,
	`x := [k | data.t[k].flag == false]`,
	`x := count(data.t)`,
	`x := {k | data.t[k].n == input.i}`,
	`x := data.big[input.k]`,
	`x := data.big[input.k].m`,
	`x := data.svc`,
	`x := data.svc.cfg.limits[input.i]`,
	`x := data.arr[input.i]`,
	`x := data.arr[_]`,
	`x := data.num`,
	`x := data.t[input.k].f + data.t[input.k].e`,
	`x := data`,
	`x := data.svc.authz.allow`,
	`x := data.s[0]`,
	`x := data.arr["0"]`,
	`x := walk(data.svc)`,
}

var diffInputs = []string{
	`{"k":"t00000","i":0,"user":{"tenant_id":"t00000"}}`,
	`{"k":"t00001","i":1,"user":{"tenant_id":"t00001"}}`,
	`{"k":"t00699","i":2,"user":{"tenant_id":"t00699"}}`,
	`{"k":"a\"b","i":4,"user":{"tenant_id":"a\"b"}}`,
	`{"k":"ü/é.x","i":-1,"user":{"tenant_id":"ü/é.x"}}`,
	`{"k":"","i":9,"user":{"tenant_id":""}}`,
	`{"k":"<tag>","i":3,"user":{"tenant_id":"<tag>"}}`,
	`{"k":"nope","i":1.5,"user":{"tenant_id":"nope"}}`,
	`{"k":"b7","i":"0","user":{"tenant_id":"b7"}}`,
	`{"k":1,"i":null,"user":{}}`,
}

// thresholdMu serialises the tests that change compactThreshold.
var thresholdMu sync.Mutex

// setWithThreshold builds a set of diffModule and data with the data
// held compact from threshold bytes of JSON.
func setWithThreshold(t *testing.T, threshold int64, data map[string]any) *Set {
	t.Helper()
	thresholdMu.Lock()
	defer thresholdMu.Unlock()
	old := compactThreshold
	compactThreshold = threshold
	defer func() { compactThreshold = old }()
	s, err := FromModules(map[string]string{"a.rego": diffModule}, data, DecodedJSON())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decodeData(t *testing.T, text string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := util.UnmarshalJSON([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestCompactStoreAgrees evaluates the same policies and data with the
// data held as AST values and as a compact tree, over many queries and
// inputs: the results must be identical.
func TestCompactStoreAgrees(t *testing.T) {
	text := diffData(700)
	astSet := setWithThreshold(t, 1<<62, decodeData(t, text))
	compactSet := setWithThreshold(t, 0, decodeData(t, text))
	if _, ok := astSet.store.(*compactStore); ok {
		t.Fatal("small-threshold set is compact")
	}
	if _, ok := compactSet.store.(*compactStore); !ok {
		t.Fatal("compact set is not compact")
	}
	if !cmp.Equal(astSet.Data(), compactSet.Data()) {
		t.Fatalf("Data differs:\n%s", cmp.Diff(astSet.Data(), compactSet.Data()))
	}
	if want := decodeData(t, text); !cmp.Equal(compactSet.Data(), want) {
		t.Fatalf("Data is not the document:\n%s", cmp.Diff(want, compactSet.Data()))
	}
	ctx := context.Background()
	results := 0
	for _, q := range diffQueries {
		for _, in := range diffInputs {
			var input any
			if err := util.UnmarshalJSON([]byte(in), &input); err != nil {
				t.Fatal(err)
			}
			var got [2]string
			for i, s := range []*Set{astSet, compactSet} {
				rs, err := rego.New(rego.Query(q), rego.Compiler(s.Compiler()), rego.Store(s.Storage()), rego.Input(input)).Eval(ctx)
				if err != nil {
					got[i] = "error: " + err.Error()
					continue
				}
				b, err := json.Marshal(rs)
				if err != nil {
					t.Fatal(err)
				}
				got[i] = string(b)
				results += len(rs)
			}
			if got[0] != got[1] {
				t.Errorf("%s with %s:\nAST store: %s\ncompact:   %s", q, in, got[0], got[1])
			}
		}
	}
	if results < len(diffQueries)*len(diffInputs) {
		t.Fatalf("only %d results: the queries are mostly undefined", results)
	}
	for _, in := range diffInputs {
		var input any
		if err := util.UnmarshalJSON([]byte(in), &input); err != nil {
			t.Fatal(err)
		}
		v, err := ast.InterfaceToValue(input)
		if err != nil {
			t.Fatal(err)
		}
		a, aerr := astSet.EvalValue(ctx, v)
		c, cerr := compactSet.EvalValue(ctx, v)
		if fmt.Sprint(aerr) != fmt.Sprint(cerr) || a.Allow != c.Allow || !cmp.Equal(a.DenyReasons, c.DenyReasons) {
			t.Errorf("decision for %s: AST %+v %v, compact %+v %v", in, a, aerr, c, cerr)
		}
	}
}

// countingStore records the paths read.
type countingStore struct {
	storage.Store
	mu    sync.Mutex
	paths []string
}

func (s *countingStore) Read(ctx context.Context, txn storage.Transaction, p storage.Path) (any, error) {
	s.mu.Lock()
	s.paths = append(s.paths, p.String())
	s.mu.Unlock()
	return s.Store.Read(ctx, txn, p)
}

// TestLookupReadsOneEntry checks that topdown reads data.t[x] with x
// bound as the path t/x alone, not the table: a lookup into compact data
// decodes one entry.
func TestLookupReadsOneEntry(t *testing.T) {
	s := setWithThreshold(t, 0, decodeData(t, diffData(700)))
	cs := &countingStore{Store: s.Storage()}
	rs, err := rego.New(rego.Query(`x := data.t[input.k].n`), rego.Compiler(s.Compiler()), rego.Store(cs),
		rego.Input(map[string]any{"k": "t00042"})).Eval(context.Background())
	if err != nil || len(rs) != 1 {
		t.Fatalf("results %v, %v", rs, err)
	}
	if len(cs.paths) == 0 {
		t.Fatal("no reads")
	}
	for _, p := range cs.paths {
		if strings.HasPrefix(p, "/system/") {
			continue // rego reads the bundles it activated
		}
		if p != "/t/t00042" && p != "/t/t00042/n" {
			t.Errorf("read %s, want only /t/t00042 or below", p)
		}
	}
}

// TestCompactStoreNotFound checks the error of a missing path is the
// store's not-found error, which topdown takes for undefined.
func TestCompactStoreNotFound(t *testing.T) {
	s := setWithThreshold(t, 0, decodeData(t, diffData(10)))
	for _, p := range []string{"/nope", "/t/nope", "/t/t00001/roles/9", "/t/t00001/roles/x", "/s/0", "/arr/-1", "/num/x"} {
		path, ok := storage.ParsePath(p)
		if !ok {
			t.Fatal(p)
		}
		if _, err := s.store.Read(context.Background(), s.txn, path); !storage.IsNotFound(err) {
			t.Errorf("read %s: %v, want not found", p, err)
		}
	}
	ctx := context.Background()
	txn, err := s.store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		t.Fatal(err)
	}
	defer s.store.Abort(ctx, txn)
	if err := s.store.Write(ctx, txn, storage.AddOp, storage.MustParsePath("/x"), 1); err == nil {
		t.Error("write to compact data succeeded")
	}
}

// TestCompactBuilderMergesFiles merges JSON documents at paths as Load
// merges data files, with the same conflicts.
func TestCompactBuilderMergesFiles(t *testing.T) {
	var b CompactDataBuilder
	for _, f := range []struct {
		path []string
		doc  string
	}{
		{nil, `{"a":{"x":1},"z":[1]}`},
		{[]string{"a"}, `{"y":{"deep":true}}`},
		{[]string{"a", "y"}, `{"more":"yes"}`},
		{[]string{"b", "c"}, `{"k":"v","k":"last"}`},
	} {
		if err := b.AddJSON(f.path, strings.NewReader(f.doc), nil); err != nil {
			t.Fatal(err)
		}
	}
	d := b.Build()
	v, err := d.root.value()
	if err != nil {
		t.Fatal(err)
	}
	want := ast.MustParseTerm(`{"a":{"x":1,"y":{"deep":true,"more":"yes"}},"b":{"c":{"k":"last"}},"z":[1]}`).Value
	if v.Compare(want) != 0 {
		t.Fatalf("merged %v, want %v", v, want)
	}
	for _, bad := range []struct {
		path []string
		doc  string
	}{
		{nil, `{"a":{"x":2}}`},
		{[]string{"z"}, `{"q":1}`},
		{[]string{"a", "x"}, `{"q":1}`},
		{nil, `[1]`},
		{nil, `{"q":`},
		{nil, `{"q":1} {}`},
	} {
		if err := b.AddJSON(bad.path, strings.NewReader(bad.doc), nil); err == nil {
			t.Errorf("AddJSON(%v, %s) succeeded", bad.path, bad.doc)
		}
	}
}

// BenchmarkTableLookup decides with a lookup into a table of 100k
// entries held as AST values and as a compact tree.
func BenchmarkTableLookup(b *testing.B) {
	var text strings.Builder
	text.WriteString(`{"t":{`)
	for i := range 100_000 {
		if i > 0 {
			text.WriteByte(',')
		}
		fmt.Fprintf(&text, `"t%06d":{"flag":true,"plan":"team","roles":["r%d","admin"],"limits":{"rps":%d,"burst":20}}`, i, i%50, i)
	}
	text.WriteString(`}}`)
	input := ast.MustParseTerm(`{"user":{"tenant_id":"t054321"}}`).Value
	for _, c := range []struct {
		name      string
		threshold int64
	}{{"ast", 1 << 62}, {"compact", 0}} {
		b.Run(c.name, func(b *testing.B) {
			var doc map[string]any
			if err := util.UnmarshalJSON([]byte(text.String()), &doc); err != nil {
				b.Fatal(err)
			}
			thresholdMu.Lock()
			old := compactThreshold
			compactThreshold = c.threshold
			s, err := FromModules(map[string]string{"a.rego": diffModule}, doc, DecodedJSON())
			compactThreshold = old
			thresholdMu.Unlock()
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := s.EvalValue(ctx, input)
				if err != nil || !res.Allow {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// TestCompactNonEmpty compares the compact store's NonEmpty with what
// storage.NonEmpty makes of the AST store's reads.
func TestCompactNonEmpty(t *testing.T) {
	text := diffData(50)
	astSet := setWithThreshold(t, 1<<62, decodeData(t, text))
	compactSet := setWithThreshold(t, 0, decodeData(t, text))
	ctx := context.Background()
	want := storage.NonEmpty(ctx, astSet.store, astSet.txn)
	got := storage.NonEmpty(ctx, compactSet.store, compactSet.txn)
	if _, ok := compactSet.store.(storage.NonEmptyer); !ok {
		t.Fatal("compact store is not a NonEmptyer")
	}
	for _, p := range []string{"t", "t/t00001", "t/t00001/flag", "t/t00001/flag/x", "t/nope", "t/nope/x", "t/t00001/roles/0/x",
		"t/t00001/roles/5/x", "t/t00001/nested/deep/x/1/y", "t/t00001/nested/deep/x/1/q", "t/t00001/nested/q/r", "svc/authz/allow",
		"svc/cfg/mode/x", "arr/2/three/0", "arr/2/four", "arr/9", "num/x", "x/y/z", "big/b1/m/k1", "big/b1/m/k2", "big/b1/q/r"} {
		path := strings.Split(p, "/")
		w, werr := want(path)
		g, gerr := got(path)
		if w != g || (werr == nil) != (gerr == nil) {
			t.Errorf("NonEmpty(%s) = %v, %v; AST store: %v, %v", p, g, gerr, w, werr)
		}
	}
}

// valuePtr, the reference for locate, returns the value at path within v, as the in-memory store
// walks its AST values: object members by key, array elements by
// decimal index.
func valuePtr(v ast.Value, path storage.Path) (ast.Value, error) {
	for _, k := range path {
		switch x := v.(type) {
		case ast.Object:
			t := x.Get(ast.InternedTerm(k))
			if t == nil {
				return nil, errNotFound
			}
			v = t.Value
		case *ast.Array:
			i, ok := util.Atoi(k)
			if !ok || i < 0 || i >= x.Len() {
				return nil, errNotFound
			}
			v = x.Elem(i).Value
		default:
			return nil, errNotFound
		}
	}
	return v, nil
}

// TestLocateAgreesWithDecoding reads paths within leaves by skipping
// (locate) and by decoding the whole leaf and walking it: the same value,
// or not found for both.
func TestLocateAgreesWithDecoding(t *testing.T) {
	raws := []string{
		`{"a":1,"b":{"c":[1,{"d":"e"},[2,3]]},"a":2}`,
		` { "s" : "x\"}]," , "q\"k" : true , "\u00fc" : null , "n" : -1.5e3 } `,
		`[{"d":1,"d":2},[],{},"[{",0]`,
		`{"e":{},"f":[],"g":"","h":[[[]]]}`,
		`"just a string"`,
		`12`,
	}
	paths := [][]string{{}, {"a"}, {"b"}, {"b", "c"}, {"b", "c", "1", "d"}, {"b", "c", "2", "1"}, {"b", "c", "3"}, {"b", "c", "-1"},
		{"b", "c", "01"}, {"b", "c", "x"}, {"s"}, {"q\"k"}, {"ü"}, {"n"}, {"0", "d"}, {"1"}, {"3"}, {"4"}, {"5"}, {"e"}, {"f", "0"},
		{"h", "0", "0"}, {"h", "0", "0", "0"}, {"zz"}, {"a", "b"}, {"0"}}
	for _, raw := range raws {
		whole, err := decodeJSONValue([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		for _, p := range paths {
			want, werr := valuePtr(whole, p)
			sub, ok, err := locate([]byte(raw), p)
			if err != nil {
				t.Fatalf("locate(%s, %q): %v", raw, p, err)
			}
			if !ok {
				if werr == nil {
					t.Errorf("locate(%s, %q) not found, decoding finds %v", raw, p, want)
				}
				continue
			}
			got, err := decodeJSONValue(sub)
			if err != nil {
				t.Fatalf("decode %s: %v", sub, err)
			}
			if werr != nil || got.Compare(want) != 0 {
				t.Errorf("locate(%s, %q) = %v, decoding gives %v, %v", raw, p, got, want, werr)
			}
		}
	}
}

// TestWithCompactData builds sets from a CompactDataBuilder's data, large
// (kept compact) and small (converted to AST values), and refuses data
// given both ways.
func TestWithCompactData(t *testing.T) {
	for _, c := range []struct {
		entries int
		compact bool
	}{{10, false}, {10000, true}} {
		var b CompactDataBuilder
		if err := b.AddJSON(nil, strings.NewReader(diffData(c.entries)), nil); err != nil {
			t.Fatal(err)
		}
		s, err := FromModules(map[string]string{"a.rego": diffModule}, nil, WithCompactData(b.Build()))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.store.(*compactStore); ok != c.compact {
			t.Errorf("%d entries: compact store %v, want %v", c.entries, ok, c.compact)
		}
		if want := decodeData(t, diffData(c.entries)); !cmp.Equal(s.Data(), want) {
			t.Errorf("%d entries: Data is not the document", c.entries)
		}
		res, err := s.EvalValue(context.Background(), ast.MustParseTerm(`{"user":{"tenant_id":"t00001"}}`).Value)
		if err != nil || !res.Allow {
			t.Errorf("%d entries: decision %+v, %v", c.entries, res, err)
		}
	}
	var b CompactDataBuilder
	if _, err := FromModules(map[string]string{"a.rego": diffModule}, map[string]any{"x": 1}, WithCompactData(b.Build())); err == nil {
		t.Error("data given twice accepted")
	}
}
