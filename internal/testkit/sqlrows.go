package testkit

import (
	"database/sql"
	"slices"
	"testing"
)

// QueryIDs runs query, which selects one text column, and returns its
// values sorted (never nil); a failing query fails tb, naming it.
func QueryIDs(tb testing.TB, db *sql.DB, query string, args ...any) []string {
	tb.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		tb.Fatalf("%s %q: %v", query, args, err)
	}
	defer rows.Close()
	ids := []string{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}
