package plan

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSQLDialects(t *testing.T) {
	c := &Condition{Op: And, Args: []*Condition{
		{Op: Eq, Field: "tenant", Value: "acme"},
		{Op: Or, Args: []*Condition{
			{Op: Eq, Field: "attributes.owner", Value: "alice"},
			{Op: In, Field: "attributes.status", Values: []any{"open", "shared"}},
		}},
		{Op: Not, Arg: &Condition{Op: Ge, Field: "attributes.level", Value: json.Number("3")}},
		{Op: Ne, Field: "attributes.archived_at", Value: nil},
	}}
	for _, tc := range []struct {
		d    Dialect
		cols Columns
		want string
	}{
		{Postgres, nil, `("tenant" = $1 AND ("owner" = $2 OR "status" IN ($3, $4)) AND ("level" >= $5) IS NOT TRUE AND "archived_at" IS NOT NULL)`},
		{SQLite, Columns{"tenant": "tenant_id", "attributes.owner": "o.owner_id"}, `("tenant_id" = ? AND ("o"."owner_id" = ? OR "status" IN (?, ?)) AND ("level" >= ?) IS NOT TRUE AND "archived_at" IS NOT NULL)`},
		{MySQL, nil, "(`tenant` = ? AND (`owner` = ? OR `status` IN (?, ?)) AND (`level` >= ?) IS NOT TRUE AND `archived_at` IS NOT NULL)"},
	} {
		got, err := c.SQL(tc.d, tc.cols)
		if err != nil {
			t.Fatalf("%s: %v", tc.d, err)
		}
		if got.Where != tc.want {
			t.Errorf("%s where:\n got %s\nwant %s", tc.d, got.Where, tc.want)
		}
		if want := []any{"acme", "alice", "open", "shared", int64(3)}; !reflect.DeepEqual(got.Params, want) {
			t.Errorf("%s params = %#v, want %#v", tc.d, got.Params, want)
		}
	}
}

func TestSQLEdges(t *testing.T) {
	for _, tc := range []struct {
		c    *Condition
		want string
	}{
		{&Condition{Op: And}, WhereTrue},
		{&Condition{Op: Or}, WhereFalse},
		{&Condition{Op: In, Field: "id", Values: []any{}}, WhereFalse},
		{&Condition{Op: In, Field: "id", Values: []any{nil}}, `"id" IS NULL`},
		{&Condition{Op: In, Field: "id", Values: []any{"a", nil}}, `("id" IN ($1) OR "id" IS NULL)`},
		{&Condition{Op: Eq, Field: "id", Value: nil}, `"id" IS NULL`},
		{&Condition{Op: Lt, Field: "attributes.n", Value: 1.5}, `"n" < $1`},
	} {
		got, err := c(tc.c).SQL(Postgres, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Where != tc.want {
			t.Errorf("%v: where %s, want %s", tc.c.Op, got.Where, tc.want)
		}
	}
	for _, k := range []Kind{AlwaysAllowed, AlwaysDenied} {
		s, err := Render(k, nil, SQLite, nil)
		if err != nil || len(s.Params) != 0 || (s.Where != WhereTrue && s.Where != WhereFalse) {
			t.Errorf("Render(%s) = %+v, %v", k, s, err)
		}
	}
	if _, err := Render(Conditional, nil, SQLite, nil); !errors.Is(err, ErrNoCondition) {
		t.Errorf("Render(conditional, nil) err = %v", err)
	}
}

func c(x *Condition) *Condition { return x }

// TestValuesNeverInText: a value that looks like SQL is a parameter.
func TestValuesNeverInText(t *testing.T) {
	evil := `x' OR '1'='1`
	s, err := (&Condition{Op: Eq, Field: "attributes.owner", Value: evil}).SQL(MySQL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.Where, "OR") || s.Params[0] != evil {
		t.Errorf("got %+v", s)
	}
}

func TestColumnsRefused(t *testing.T) {
	bad := []Columns{
		{"attributes.owner": `owner"; DROP TABLE x; --`},
		{"attributes.owner": "a.b.c"},
		{"owner": "owner"},
		{"attributes.": "x"},
	}
	for _, cols := range bad {
		if err := cols.Validate(); err == nil {
			t.Errorf("Columns%v validated", cols)
		}
	}
	_, err := (&Condition{Op: Eq, Field: "attributes.first name", Value: "x"}).SQL(Postgres, nil)
	if err == nil || !strings.Contains(err.Error(), "list_filter.columns") {
		t.Errorf("attribute that is no identifier: err = %v", err)
	}
	if _, err := ParseDialect("oracle"); err == nil {
		t.Error("ParseDialect(oracle) succeeded")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	src := `{"op":"or","args":[{"op":"not","arg":{"op":"eq","field":"attributes.status","value":null}},` +
		`{"op":"in","field":"id","values":[]},{"op":"gt","field":"attributes.n","value":12345678901234567890}]}`
	var c Condition
	if err := json.Unmarshal([]byte(src), &c); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != src {
		t.Errorf("round trip:\n got %s\nwant %s", out, src)
	}
}

func TestJSONRefused(t *testing.T) {
	for _, src := range []string{
		`{"op":"xor"}`,
		`{"op":"eq","field":"owner","value":"a"}`,
		`{"op":"eq","field":"id","value":{"a":1}}`,
		`{"op":"lt","field":"id","value":null}`,
		`{"op":"not"}`,
		`{"op":"in","field":"id","values":[[1]]}`,
		strings.Repeat(`{"op":"not","arg":`, MaxDepth+1) + `{"op":"and"}` + strings.Repeat("}", MaxDepth+1),
	} {
		var c Condition
		err := json.Unmarshal([]byte(src), &c)
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%.60s: err = %v, want *plan.Error", src, err)
		}
	}
}

func FuzzCondition(f *testing.F) {
	f.Add(`{"op":"and","args":[{"op":"eq","field":"tenant","value":"a"},{"op":"in","field":"id","values":[1,"2",null]}]}`)
	f.Add(`{"op":"not","arg":{"op":"le","field":"attributes.x","value":1e3}}`)
	f.Fuzz(func(t *testing.T, src string) {
		var c Condition
		if err := json.Unmarshal([]byte(src), &c); err != nil {
			return
		}
		for _, d := range []Dialect{Postgres, SQLite, MySQL} {
			s, err := c.SQL(d, nil)
			if err != nil {
				continue
			}
			if n := strings.Count(s.Where, "?"); d != Postgres && n != len(s.Params) {
				t.Fatalf("%s: %d markers for %d params in %s", d, n, len(s.Params), s.Where)
			}
		}
		out, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		var back Condition
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("re-read %s: %v", out, err)
		}
	})
}

// TestMatchIsWhatSQLSelects: three-valued logic, a missing field unknown,
// "not" true unless its argument holds.
func TestMatchIsWhatSQLSelects(t *testing.T) {
	owner := &Condition{Op: Eq, Field: "attributes.owner", Value: "alice"}
	open := &Condition{Op: Eq, Field: "attributes.status", Value: "open"}
	none := Row{ID: "1"}
	alices := Row{ID: "2", Attributes: map[string]any{"owner": "alice"}}
	for _, tc := range []struct {
		c    *Condition
		r    Row
		want bool
	}{
		{&Condition{Op: And, Args: []*Condition{owner, open}}, alices, false},
		{&Condition{Op: Or, Args: []*Condition{open, owner}}, alices, true},
		{&Condition{Op: Or, Args: []*Condition{open, owner}}, none, false},
		{&Condition{Op: Not, Arg: &Condition{Op: And, Args: []*Condition{owner, open}}}, alices, true},
		{&Condition{Op: Not, Arg: owner}, none, true},
		{&Condition{Op: In, Field: "attributes.owner", Values: []any{"bob", "alice"}}, alices, true},
		{&Condition{Op: Ge, Field: "attributes.n", Value: json.Number("2")}, Row{Attributes: map[string]any{"n": 2.0}}, true},
		{&Condition{Op: Ne, Field: "attributes.owner", Value: nil}, none, false},
	} {
		if got := tc.c.Match(tc.r); got != tc.want {
			t.Errorf("%s on row %s: %v, want %v", tc.c, tc.r.ID, got, tc.want)
		}
	}
}
