package plan

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/mysqltest"
	"github.com/svc-dev/svc/internal/testkit/pgtest"
)

// trickyStrings are the names of the rows and the values of the string
// tests: the pattern characters of every dialect (LIKE's % and _, the
// escapes \ and !, GLOB's * ? and [), case differences in ASCII and
// beyond, and multi-byte characters.
var trickyStrings = []string{
	"", "a", "A", "abc", "ABC", "Abc", "a%c", "a_c", "abc%", "%", "_", `\`, `a\b`, `a\%`, `\_`,
	"*", "?", "[", "]", "[a]", "a*b", "a?b", "a[b]c", "!", "a!b", "!%", "'", `"`,
	"/team-a/report.pdf", "/team-A/report.PDF", "/team-ab/x", "draft", "Draft v2", "a draft",
	"é", "É", "naïve", "NAÏVE", "日本語", "本", "ß", "SS", "😀x", "x😀",
}

// stringRows is a row for each tricky string and one without a name.
func stringRows() []Row {
	rows := []Row{{ID: "none"}}
	for i, s := range trickyStrings {
		rows = append(rows, Row{ID: fmt.Sprintf("r%02d", i), Attributes: map[string]any{"name": s}})
	}
	return rows
}

// stringConditions are starts_with, ends_with and contains of every
// tricky string, each alone and under not, and a few combinations.
func stringConditions() []*Condition {
	var out []*Condition
	for _, op := range []Op{StartsWith, EndsWith, Contains} {
		for _, v := range trickyStrings {
			c := &Condition{Op: op, Field: "attributes.name", Value: v}
			out = append(out, c, &Condition{Op: Not, Arg: c})
		}
	}
	pdf := &Condition{Op: EndsWith, Field: "attributes.name", Value: ".pdf"}
	team := &Condition{Op: StartsWith, Field: "attributes.name", Value: "/team-a/"}
	draft := &Condition{Op: Contains, Field: "attributes.name", Value: "draft"}
	out = append(out,
		&Condition{Op: And, Args: []*Condition{team, pdf}},
		&Condition{Op: Or, Args: []*Condition{draft, &Condition{Op: Not, Arg: team}}},
		&Condition{Op: Not, Arg: &Condition{Op: And, Args: []*Condition{draft, {Op: Ne, Field: "id", Value: "r33"}}}},
	)
	return out
}

// comparisonConditions are eq, ne, in and the orderings of tricky
// strings: equal but for case, accents or a trailing space is not equal,
// as the policy has it.
func comparisonConditions() []*Condition {
	var out []*Condition
	for _, v := range []string{"a", "abc", "Abc", "é", "naïve", "ß", "draft", "", "a ", "😀x", "/team-a/report.pdf"} {
		for _, op := range []Op{Eq, Ne, Lt, Ge} {
			c := &Condition{Op: op, Field: "attributes.name", Value: v}
			out = append(out, c, &Condition{Op: Not, Arg: c})
		}
		in := &Condition{Op: In, Field: "attributes.name", Values: []any{v, "ABC"}}
		out = append(out, in, &Condition{Op: Not, Arg: in}, &Condition{Op: Eq, Field: "id", Value: "R01"})
	}
	return out
}

// TestStringsOnDatabases: the SQL of starts_with, ends_with, contains and
// of the comparisons of strings selects, on a real SQLite, PostgreSQL and
// MariaDB table, exactly the rows Match accepts — wildcards, escape
// characters, case, accent, trailing-space and multi-byte differences, a
// NULL name and "not" included. MariaDB's table has its default,
// case- and accent-insensitive collation.
func TestStringsOnDatabases(t *testing.T) {
	rows := append(stringRows(), Row{ID: "r99", Attributes: map[string]any{"name": "a "}})
	conds := append(stringConditions(), comparisonConditions()...)
	for _, tc := range []struct {
		d      Dialect
		driver string
		dsn    func(testing.TB) string
	}{
		{SQLite, "sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "rows.db") }},
		{Postgres, "pgx", func(t testing.TB) string { return pgtest.Start(t).DSN }},
		{MySQL, "mysql", func(t testing.TB) string { return mysqltest.Start(t).DSN }},
	} {
		t.Run(string(tc.d), func(t *testing.T) {
			db, err := sql.Open(tc.driver, tc.dsn(t))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			checkOnDatabase(t, db, tc.d, rows, conds)
		})
	}
}

func checkOnDatabase(t *testing.T, db *sql.DB, d Dialect, rows []Row, conds []*Condition) {
	t.Helper()
	table := `CREATE TABLE t (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT)`
	switch d {
	case Postgres:
		// A linguistic collation, as most databases' default is: "a" <
		// "B" < "b", where bytes have "B" < "a" < "b".
		table = `CREATE TABLE t (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, name TEXT COLLATE "und-x-icu")`
	case MySQL:
		table = `CREATE TABLE t (id VARCHAR(16) PRIMARY KEY, tenant VARCHAR(64) NOT NULL, name VARCHAR(64)) CHARACTER SET utf8mb4`
	}
	if _, err := db.Exec(table); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO t VALUES (?, ?, ?)`
	if d == Postgres {
		insert = `INSERT INTO t VALUES ($1, $2, $3)`
	}
	for _, r := range rows {
		if _, err := db.Exec(insert, r.ID, r.Tenant, r.Attributes["name"]); err != nil {
			t.Fatal(err)
		}
	}
	caseDiffers := 0
	for _, c := range conds {
		s, err := c.SQL(d, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := testkit.QueryIDs(t, db, "SELECT id FROM t WHERE "+s.Where, s.Params...)
		var want []string
		for _, r := range rows {
			if c.Match(r) {
				want = append(want, r.ID)
			}
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %s %q selects %v, Match accepts %v", c, s.Where, s.Params, got, want)
		}
		if c.Op == StartsWith && c.Value == "a" && !slices.Contains(want, "r02") {
			caseDiffers++ // "A" does not start with "a"
		}
	}
	if caseDiffers != 1 {
		t.Errorf("the conditions should hold a case difference")
	}
}

// TestMisnamedColumnOnSQLite: a column mapping that names a column the
// table lacks (a typo, a column dropped by a migration) makes the query
// fail on SQLite. Quoted in double quotes, SQLite would read the name as
// a string literal instead, and `"tenant_idx" <> ?` would list every
// tenant's rows.
func TestMisnamedColumnOnSQLite(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "rows.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TABLE t (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO t VALUES ('r1', 'acme'), ('r2', 'globex')`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Condition{
		{Op: Ne, Field: "tenant", Value: "acme"},
		{Op: Not, Arg: &Condition{Op: Eq, Field: "tenant", Value: "acme"}},
		{Op: Ne, Field: "tenant", Value: nil},
	} {
		s, err := c.SQL(SQLite, Columns{"tenant": "tenant_idx"})
		if err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query("SELECT id FROM t WHERE "+s.Where, s.Params...)
		if err == nil {
			var ids []string
			for rows.Next() {
				var id string
				_ = rows.Scan(&id)
				ids = append(ids, id)
			}
			rows.Close()
			if err = rows.Err(); err == nil {
				t.Errorf("%s with a misnamed column: %s selects %v, want no such column", c, s.Where, ids)
				continue
			}
		}
		if !strings.Contains(err.Error(), "no such column") {
			t.Errorf("%s: %v, want no such column", c, err)
		}
	}
}
