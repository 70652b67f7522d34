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
		{SQLite, Columns{"tenant": "tenant_id", "attributes.owner": "o.owner_id"}, "(`tenant_id` = ? AND (`o`.`owner_id` = ? OR `status` IN (?, ?)) AND (`level` >= ?) IS NOT TRUE AND `archived_at` IS NOT NULL)"},
		{MySQL, nil, "(`tenant` = CAST(? AS BINARY) AND (`owner` = CAST(? AS BINARY) OR `status` IN (CAST(? AS BINARY), CAST(? AS BINARY))) AND (`level` >= ?) IS NOT TRUE AND `archived_at` IS NOT NULL)"},
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

// TestSQLStringComparisons: strings are compared byte for byte, as the
// policy compares, whatever the column's collation: binary in MySQL,
// and in PostgreSQL an ordering in collation C. Numbers are left alone.
func TestSQLStringComparisons(t *testing.T) {
	c := &Condition{Op: And, Args: []*Condition{
		{Op: Lt, Field: "attributes.name", Value: "m"},
		{Op: Eq, Field: "attributes.name", Value: "a"},
		{Op: Ge, Field: "attributes.level", Value: json.Number("2")},
	}}
	for d, want := range map[Dialect]string{
		Postgres: `("name" < $1 COLLATE "C" AND "name" = $2 AND "level" >= $3)`,
		SQLite:   "(`name` < ? AND `name` = ? AND `level` >= ?)",
		MySQL:    "(`name` < CAST(? AS BINARY) AND `name` = CAST(? AS BINARY) AND `level` >= ?)",
	} {
		got, err := c.SQL(d, nil)
		if err != nil || got.Where != want {
			t.Errorf("%s: %q, %v; want %q", d, got.Where, err, want)
		}
	}
}

// TestSQLStringTests: starts_with, ends_with and contains are
// case-sensitive pattern matches whose pattern is a parameter, its
// wildcards escaped.
func TestSQLStringTests(t *testing.T) {
	c := &Condition{Op: And, Args: []*Condition{
		{Op: StartsWith, Field: "attributes.path", Value: `/a_b%\!*?[`},
		{Op: Not, Arg: &Condition{Op: EndsWith, Field: "attributes.name", Value: ".pdf"}},
		{Op: Contains, Field: "attributes.title", Value: "draft"},
	}}
	for _, tc := range []struct {
		d      Dialect
		want   string
		params []any
	}{
		{Postgres, `("path" LIKE $1 ESCAPE '\' AND ("name" LIKE $2 ESCAPE '\') IS NOT TRUE AND "title" LIKE $3 ESCAPE '\')`,
			[]any{`/a\_b\%\\!*?[%`, "%.pdf", "%draft%"}},
		{SQLite, "(`path` GLOB ? AND (`name` GLOB ?) IS NOT TRUE AND `title` GLOB ?)",
			[]any{`/a_b%\![*][?][[]*`, "*.pdf", "*draft*"}},
		{MySQL, "(`path` LIKE CAST(? AS BINARY) ESCAPE '!' AND (`name` LIKE CAST(? AS BINARY) ESCAPE '!') IS NOT TRUE AND `title` LIKE CAST(? AS BINARY) ESCAPE '!')",
			[]any{`/a!_b!%\!!*?[%`, "%.pdf", "%draft%"}},
	} {
		got, err := c.SQL(tc.d, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.d, err)
		}
		if got.Where != tc.want {
			t.Errorf("%s where:\n got %s\nwant %s", tc.d, got.Where, tc.want)
		}
		if !reflect.DeepEqual(got.Params, tc.params) {
			t.Errorf("%s params = %q, want %q", tc.d, got.Params, tc.params)
		}
	}
}

// unpattern reads a Pattern back: the value, or false when the pattern
// is not what Pattern writes for op.
func unpattern(d Dialect, op Op, p string) (string, bool) {
	wild, esc := "%", byte('\\')
	switch d {
	case SQLite:
		wild = "*"
	case MySQL:
		esc = '!'
	}
	var ok1, ok2 bool
	if op == EndsWith || op == Contains {
		p, ok1 = strings.CutPrefix(p, wild)
	} else {
		ok1 = true
	}
	if op == StartsWith || op == Contains {
		p, ok2 = strings.CutSuffix(p, wild)
	} else {
		ok2 = true
	}
	if !ok1 || !ok2 {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case d == SQLite && c == '[':
			if i+2 >= len(p) || p[i+2] != ']' || !strings.ContainsRune("*?[", rune(p[i+1])) {
				return "", false
			}
			b.WriteByte(p[i+1])
			i += 2
		case d == SQLite && (c == '*' || c == '?'):
			return "", false
		case d != SQLite && c == esc:
			if i+1 >= len(p) || !strings.ContainsRune("%_"+string(esc), rune(p[i+1])) {
				return "", false
			}
			b.WriteByte(p[i+1])
			i++
		case d != SQLite && (c == '%' || c == '_'):
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
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
		`{"op":"in","field":"id","values":[]},{"op":"gt","field":"attributes.n","value":12345678901234567890},` +
		`{"op":"starts_with","field":"attributes.path","value":"/team-a/"},{"op":"ends_with","field":"id","value":".pdf"},` +
		`{"op":"contains","field":"tenant","value":"\\u00e9%_\\\\"}]}`
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
		`{"op":"starts_with","field":"id","value":1}`,
		`{"op":"ends_with","field":"id","value":null}`,
		`{"op":"contains","field":"id"}`,
		`{"op":"contains","field":"id","value":true}`,
		`{"op":"starts_with","field":"path","value":"a"}`,
		`{"op":"starts_with","field":"id","values":["a"]}`,
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
	f.Add(`{"op":"or","args":[{"op":"starts_with","field":"id","value":"a%_\\!*?[b"},{"op":"not","arg":{"op":"contains","field":"attributes.t","value":"é"}}]}`)
	f.Add(`{"op":"ends_with","field":"tenant","value":""}`)
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
			checkPatterns(t, &c, d)
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

// checkPatterns: the parameter of every string test of c is its value,
// escaped as its dialect reads it.
func checkPatterns(t *testing.T, c *Condition, d Dialect) {
	switch {
	case c.Op == And || c.Op == Or:
		for _, a := range c.Args {
			checkPatterns(t, a, d)
		}
	case c.Op == Not:
		checkPatterns(t, c.Arg, d)
	case c.Op.stringTest():
		v := c.Value.(string)
		p := Pattern(d, c.Op, v)
		if back, ok := unpattern(d, c.Op, p); !ok || back != v {
			t.Fatalf("%s %s %q: pattern %q reads back as %q, %v", d, c.Op, v, p, back, ok)
		}
		m := Row{Attributes: map[string]any{"x": v}}
		if !(&Condition{Op: c.Op, Field: "attributes.x", Value: v}).Match(m) {
			t.Fatalf("%s %q does not hold for its own value", c.Op, v)
		}
	}
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
		{&Condition{Op: StartsWith, Field: "attributes.owner", Value: "al"}, alices, true},
		{&Condition{Op: StartsWith, Field: "attributes.owner", Value: "Al"}, alices, false},
		{&Condition{Op: EndsWith, Field: "attributes.owner", Value: "ice"}, alices, true},
		{&Condition{Op: EndsWith, Field: "attributes.owner", Value: "ICE"}, alices, false},
		{&Condition{Op: Contains, Field: "attributes.owner", Value: "lic"}, alices, true},
		{&Condition{Op: Contains, Field: "attributes.owner", Value: "%"}, alices, false},
		{&Condition{Op: Contains, Field: "attributes.owner", Value: ""}, alices, true},
		{&Condition{Op: Contains, Field: "attributes.owner", Value: ""}, none, false},
		{&Condition{Op: Not, Arg: &Condition{Op: Contains, Field: "attributes.owner", Value: "x"}}, none, true},
		{&Condition{Op: StartsWith, Field: "id", Value: "2"}, alices, true},
		{&Condition{Op: StartsWith, Field: "attributes.n", Value: "2"}, Row{Attributes: map[string]any{"n": 2.0}}, false},
		{&Condition{Op: Not, Arg: &Condition{Op: StartsWith, Field: "attributes.n", Value: "2"}}, Row{Attributes: map[string]any{"n": json.Number("2")}}, true},
		{&Condition{Op: Contains, Field: "attributes.s", Value: "本"}, Row{Attributes: map[string]any{"s": "日本語"}}, true},
	} {
		if got := tc.c.Match(tc.r); got != tc.want {
			t.Errorf("%s on row %s: %v, want %v", tc.c, tc.r.ID, got, tc.want)
		}
	}
}
