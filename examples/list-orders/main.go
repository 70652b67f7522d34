// Command list-orders is an HTTP service whose GET /orders lists only the
// orders the caller may read: it asks the svc sidecar once for a resource
// plan (PlanResources) and runs the plan's WHERE clause, with its bind
// parameters, on its own SQLite table. It never asks about each row.
//
//	SVC_POLICY_DIR=examples/policies/resource-attributes make run   # the sidecar
//	go run ./examples/list-orders
//	curl -s localhost:8081/orders -H "Authorization: Bearer $TOKEN"
//
// SVC_SIDECAR_URL (default http://127.0.0.1:7700) is the sidecar's HTTP
// API, LIST_ORDERS_ADDR (default localhost:8081) where it listens,
// LIST_ORDERS_DB (default: in memory) the SQLite file.
package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"os"

	_ "modernc.org/sqlite"

	"github.com/svc-dev/svc/authz"
	"github.com/svc-dev/svc/plan"
)

func main() {
	db, err := openOrders(env("LIST_ORDERS_DB", "file::memory:?cache=shared"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// A plan never fails open, whatever the fail mode: listing every row
	// is no safe default.
	client, err := authz.NewClient(env("SVC_SIDECAR_URL", "http://127.0.0.1:7700"), authz.ClientOptions{FailMode: authz.FailClosed})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	http.HandleFunc("GET /orders", func(w http.ResponseWriter, r *http.Request) {
		p, err := client.PlanResources(r.Context(), authz.PlanRequest{
			Token: authz.BearerToken(r), Action: "orders:read", Dialect: plan.SQLite,
		})
		if err != nil {
			log.Printf("plan-resources: %v", err)
			http.Error(w, "no answer from the authorization sidecar", http.StatusServiceUnavailable)
			return
		}
		if p.Kind == plan.AlwaysDenied && p.Reason != "policy-deny" {
			// The credential was refused (token-missing, token-expired…).
			http.Error(w, string(p.Reason), http.StatusUnauthorized)
			return
		}
		orders, err := listOrders(db, p.SQL)
		if err != nil {
			log.Printf("list orders: %v", err)
			http.Error(w, "the orders could not be read", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"orders": orders, "plan": p.Kind, "decision_id": p.DecisionID})
	})
	addr := env("LIST_ORDERS_ADDR", "localhost:8081")
	log.Printf("listening on %s", addr)
	log.Fatal(http.ListenAndServe(addr, nil))
}

// order is a row of the orders table.
type order struct {
	ID         string  `json:"id"`
	Tenant     string  `json:"tenant"`
	Owner      *string `json:"owner"`
	Status     *string `json:"status"`
	Department *string `json:"department"`
}

// listOrders runs the plan's WHERE clause: its values are bind
// parameters, never part of the text.
func listOrders(db *sql.DB, where plan.SQL) ([]order, error) {
	rows, err := db.Query("SELECT id, tenant, owner, status, department FROM orders WHERE "+where.Where+" ORDER BY id", where.Params...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []order{}
	for rows.Next() {
		var o order
		if err := rows.Scan(&o.ID, &o.Tenant, &o.Owner, &o.Status, &o.Department); err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, rows.Err()
}

// openOrders opens the database and, when it has no orders table, creates
// one with a few orders of two tenants.
func openOrders(dsn string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	var n int
	err = db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'orders'`).Scan(&n)
	if err != nil || n > 0 {
		return db, err
	}
	_, err = db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, owner TEXT, status TEXT, department TEXT);
INSERT INTO orders VALUES
  ('ord-1', 'acme', 'u-1', 'open', 'sales'),
  ('ord-2', 'acme', 'u-1', 'archived', 'sales'),
  ('ord-3', 'acme', 'u-2', 'open', 'ops'),
  ('ord-4', 'acme', 'u-2', 'open', 'sales'),
  ('ord-5', 'acme', NULL, 'open', NULL),
  ('ord-6', 'globex', 'u-1', 'open', 'sales');`)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return db, nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
