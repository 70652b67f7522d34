package plan

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Dialect is the SQL dialect a plan is rendered in: it decides the bind
// parameter markers and how identifiers are quoted.
type Dialect string

const (
	// Postgres numbers its parameters ($1, $2…) and quotes with "".
	Postgres Dialect = "postgres"
	// SQLite uses ? and quotes with backticks: a column named in double
	// quotes that the table lacks is read by SQLite as a string literal
	// (its "double-quoted string" compatibility), which would turn a
	// misnamed column into a constant that lists rows the policy denies;
	// in backticks it is an error ("no such column").
	SQLite Dialect = "sqlite"
	// MySQL uses ? and quotes with backticks.
	MySQL Dialect = "mysql"
)

// ParseDialect reads a dialect name; "" is Postgres.
func ParseDialect(s string) (Dialect, error) {
	switch Dialect(s) {
	case "", Postgres:
		return Postgres, nil
	case SQLite, MySQL:
		return Dialect(s), nil
	}
	return "", errorf("dialect %q is not postgres, sqlite or mysql", s)
}

// SQL is a WHERE clause with its bind parameters, in order.
type SQL struct {
	Where  string `json:"where"`
	Params []any  `json:"params"`
}

// The WHERE clauses of the plans that need no condition.
const (
	WhereTrue  = "1 = 1"
	WhereFalse = "1 = 0"
)

// Columns maps a condition's fields ("id", "tenant",
// "attributes.owner") to column names. A field it does not name is the
// column of the same name: "id", "tenant", and an attribute's own name.
// A column is an identifier, optionally qualified by a table
// ("orders.owner_id").
type Columns map[string]string

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// ValidColumn reports whether name may name a column.
func ValidColumn(name string) bool { return len(name) <= 128 && identifier.MatchString(name) }

// Validate checks every field and column of cols.
func (cols Columns) Validate() error {
	for f, c := range cols {
		if !ValidField(f) {
			return errorf("column for %q: the field is not id, tenant or attributes.<name>", f)
		}
		if !ValidColumn(c) {
			return errorf("column %q for %s is not an identifier (letters, digits, _; one optional table. prefix)", c, f)
		}
	}
	return nil
}

// Column is the column of field f.
func (cols Columns) Column(f string) (string, error) {
	if c, ok := cols[f]; ok {
		return c, nil
	}
	name := strings.TrimPrefix(f, AttributePrefix)
	if !ValidColumn(name) {
		return "", errorf("attribute %q has no column: name one in list_filter.columns", name)
	}
	return name, nil
}

// Render is the WHERE clause of a plan of kind k and condition c.
func Render(k Kind, c *Condition, d Dialect, cols Columns) (SQL, error) {
	switch k {
	case AlwaysAllowed:
		return SQL{Where: WhereTrue, Params: []any{}}, nil
	case AlwaysDenied:
		return SQL{Where: WhereFalse, Params: []any{}}, nil
	case Conditional:
		if c == nil {
			return SQL{}, ErrNoCondition
		}
		return c.SQL(d, cols)
	}
	return SQL{}, errorf("unknown plan kind %q", k)
}

// SQL renders c as a WHERE clause in dialect d with cols naming the
// columns. Every value is a bind parameter, never part of the text.
func (c *Condition) SQL(d Dialect, cols Columns) (SQL, error) {
	if _, err := ParseDialect(string(d)); err != nil {
		return SQL{}, err
	}
	if err := c.Validate(); err != nil {
		return SQL{}, err
	}
	r := renderer{d: d, cols: cols, params: []any{}}
	if err := r.cond(c); err != nil {
		return SQL{}, err
	}
	return SQL{Where: r.b.String(), Params: r.params}, nil
}

type renderer struct {
	d      Dialect
	cols   Columns
	b      strings.Builder
	params []any
}

func (r *renderer) cond(c *Condition) error {
	switch c.Op {
	case And, Or:
		if len(c.Args) == 0 {
			if c.Op == And {
				r.b.WriteString(WhereTrue)
			} else {
				r.b.WriteString(WhereFalse)
			}
			return nil
		}
		r.b.WriteByte('(')
		for i, a := range c.Args {
			if i > 0 {
				r.b.WriteString(" " + strings.ToUpper(string(c.Op)) + " ")
			}
			if err := r.cond(a); err != nil {
				return err
			}
		}
		r.b.WriteByte(')')
		return nil
	case Not:
		// NULL, a missing field, is not true: "not" holds then, as an
		// undefined expression's negation holds in Rego.
		r.b.WriteByte('(')
		if err := r.cond(c.Arg); err != nil {
			return err
		}
		r.b.WriteString(") IS NOT TRUE")
		return nil
	case In:
		col, err := r.column(c.Field)
		if err != nil {
			return err
		}
		var vals []any
		hasNull := false
		for _, v := range c.Values {
			if v == nil {
				hasNull = true
			} else {
				vals = append(vals, v)
			}
		}
		switch {
		case len(vals) == 0 && !hasNull:
			r.b.WriteString(WhereFalse)
			return nil
		case len(vals) == 0:
			r.b.WriteString(col + " IS NULL")
			return nil
		}
		if hasNull {
			r.b.WriteByte('(')
		}
		r.b.WriteString(col + " IN (")
		for i, v := range vals {
			if i > 0 {
				r.b.WriteString(", ")
			}
			r.value(v)
		}
		r.b.WriteByte(')')
		if hasNull {
			r.b.WriteString(" OR " + col + " IS NULL)")
		}
		return nil
	}
	col, err := r.column(c.Field)
	if err != nil {
		return err
	}
	if c.Op.stringTest() {
		r.stringTest(col, c.Op, c.Value.(string))
		return nil
	}
	if c.Value == nil {
		if c.Op == Eq {
			r.b.WriteString(col + " IS NULL")
		} else {
			r.b.WriteString(col + " IS NOT NULL")
		}
		return nil
	}
	r.b.WriteString(col + " " + sqlOps[c.Op] + " ")
	r.value(c.Value)
	if _, ok := c.Value.(string); ok && r.d == Postgres && c.Op != Eq && c.Op != Ne {
		// PostgreSQL orders strings by the column's collation, which is
		// rarely C: "B" < "a" in bytes, not in en_US.
		r.b.WriteString(` COLLATE "C"`)
	}
	return nil
}

// value renders a compared value's bind parameter. In MySQL a string is
// CAST(? AS BINARY), so that the comparison is byte for byte, as the
// policy's is: MySQL compares strings by the column's collation, and the
// default ones ignore case, accents and trailing spaces ('acme' =
// 'ACME', 'acme ' and 'acmé'), which would list another tenant's rows.
// PostgreSQL's and SQLite's default equality is byte for byte already;
// PostgreSQL's ordering of strings is by the column's collation, so an
// ordering comparison of a string adds COLLATE "C" (see cond).
func (r *renderer) value(v any) {
	if _, ok := v.(string); !ok || r.d != MySQL {
		r.param(v)
		return
	}
	r.b.WriteString("CAST(")
	r.param(v)
	r.b.WriteString(" AS BINARY)")
}

// stringTest renders starts_with, ends_with or contains as a pattern
// match that is case-sensitive in every dialect, as Match is, the
// pattern a bind parameter whose wildcards are escaped:
//
//	postgres: "col" LIKE $1 ESCAPE '\'
//	sqlite:   "col" GLOB ?   (SQLite's LIKE ignores ASCII case; GLOB does not)
//	mysql:    `col` LIKE CAST(? AS BINARY) ESCAPE '!'
//
// MySQL compares a binary pattern byte for byte whatever the column's
// collation; its escape is '!' because what a backslash in a string
// literal means depends on the server's sql_mode (NO_BACKSLASH_ESCAPES).
func (r *renderer) stringTest(col string, op Op, v string) {
	switch r.d {
	case SQLite:
		r.b.WriteString(col + " GLOB ")
		r.param(Pattern(SQLite, op, v))
	case MySQL:
		r.b.WriteString(col + " LIKE CAST(")
		r.param(Pattern(MySQL, op, v))
		r.b.WriteString(" AS BINARY) ESCAPE '!'")
	default:
		r.b.WriteString(col + " LIKE ")
		r.param(Pattern(Postgres, op, v))
		r.b.WriteString(` ESCAPE '\'`)
	}
}

// Pattern is the bind parameter of starts_with, ends_with or contains
// of v in dialect d: v with the pattern's special characters escaped and
// a wildcard before, after or on both sides. Postgres and MySQL take a
// LIKE pattern (%, _ and the escape character, \ or !, escaped with the
// escape character), SQLite a GLOB pattern (*, ? and [ written as [*],
// [?] and [[]).
func Pattern(d Dialect, op Op, v string) string {
	var b strings.Builder
	b.Grow(len(v) + 4)
	wild := "%"
	if d == SQLite {
		wild = "*"
	}
	if op == EndsWith || op == Contains {
		b.WriteString(wild)
	}
	esc := byte('\\')
	if d == MySQL {
		esc = '!'
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case d == SQLite && (c == '*' || c == '?' || c == '['):
			b.WriteByte('[')
			b.WriteByte(c)
			b.WriteByte(']')
			continue
		case d != SQLite && (c == '%' || c == '_' || c == esc):
			b.WriteByte(esc)
		}
		b.WriteByte(c)
	}
	if op == StartsWith || op == Contains {
		b.WriteString(wild)
	}
	return b.String()
}

var sqlOps = map[Op]string{Eq: "=", Ne: "<>", Lt: "<", Le: "<=", Gt: ">", Ge: ">="}

func (r *renderer) param(v any) {
	r.params = append(r.params, paramValue(v))
	if r.d == Postgres {
		r.b.WriteString("$" + strconv.Itoa(len(r.params)))
	} else {
		r.b.WriteByte('?')
	}
}

// paramValue is v as a database driver takes it: a json.Number becomes an
// int64 when it is whole, a float64 otherwise.
func paramValue(v any) any {
	n, ok := v.(json.Number)
	if !ok {
		return v
	}
	if i, err := n.Int64(); err == nil {
		return i
	}
	f, _ := n.Float64()
	return f
}

func (r *renderer) column(f string) (string, error) {
	name, err := r.cols.Column(f)
	if err != nil {
		return "", err
	}
	if !ValidColumn(name) {
		return "", errorf("column %q for %s is not an identifier", name, f)
	}
	q := `"`
	if r.d == MySQL || r.d == SQLite {
		q = "`"
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, "."), nil
}

// String renders c as text for people: the SQL of the Postgres dialect
// with its values inlined as JSON. It is for reading, never for a query.
func (c *Condition) String() string {
	s, err := c.SQL(Postgres, nil)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	out := s.Where
	for i := len(s.Params); i >= 1; i-- {
		v, _ := json.Marshal(s.Params[i-1])
		out = strings.ReplaceAll(out, "$"+strconv.Itoa(i), string(v))
	}
	return out
}
