package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/pgtest"
)

// listFilterConfig serves the resource-attributes example with the
// tenant in a column of another name.
const listFilterConfig = sidecarConfig + `
[rate_limit]
disabled = true

[list_filter.columns]
tenant = "tenant_id"
`

// order is a row of the orders table; a nil attribute is NULL.
type order struct {
	ID, Tenant                string
	Owner, Status, Department *string
}

// TestListFilterOnRealDatabases: the WHERE clause of a resource plan,
// run on a real SQLite and a real PostgreSQL table of 400 random
// orders, returns exactly the orders the sidecar's Authorize allows one
// by one — for an owner, a department member, an admin, a caller of
// another tenant and a caller without a credential, for reading,
// updating and deleting.
func TestListFilterOnRealDatabases(t *testing.T) {
	k := newKeyring(t)
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: listFilterConfig, Env: map[string]string{
		"SVC_JWKS_URL":   k.jwks.URL,
		"SVC_POLICY_DIR": filepath.Join(harness.ModuleRoot(t), "examples", "policies", "resource-attributes"),
	}})
	orders := randomOrders(400)

	dbs := orderDatabases(t, orders)

	user := func(sub, tenant, department string, roles ...string) string {
		c := harness.Claims(sub, tenant, roles...)
		if department != "" {
			c["department"] = department
		}
		return k.rsa.Token(t, c)
	}
	callers := map[string]string{
		"owner":         user("alice", "acme", "", "member"),
		"department":    user("dana", "acme", "sales", "member"),
		"admin":         user("root", "acme", "", "admin"),
		"other tenant":  user("eve", "globex", "sales", "admin"),
		"no credential": "",
	}
	conditional := 0
	for name, token := range callers {
		for _, action := range []string{"orders:read", "orders:update", "orders:delete"} {
			want := allowedOrders(t, s, token, action, orders)
			for dialect, db := range dbs {
				p := planFor(t, s, token, action, dialect)
				if p.Kind == "conditional" {
					conditional++
				}
				got := testkit.QueryIDs(t, db, "SELECT id FROM orders WHERE "+p.SQL.Where, p.SQL.Params...)
				if !slices.Equal(got, want) {
					t.Errorf("%s %s on %s: plan %s (%s %v) lists %d orders, Authorize allows %d; first differences: %v",
						name, action, dialect, p.Kind, p.SQL.Where, p.SQL.Params, len(got), len(want), firstDiffs(got, want))
				}
			}
		}
	}
	if conditional < 6 {
		t.Errorf("%d conditional plans: the callers should need conditions", conditional)
	}
}

// TestListFilterStringTests: a plan of startswith and "not contains" on
// an attribute (sdk/testdata/plan: the tenant reads orders whose status
// starts with "public" and does not mention a draft), run on a real
// SQLite and PostgreSQL table whose statuses hold case differences,
// LIKE and GLOB wildcards and multi-byte text, lists exactly the orders
// Authorize allows one by one.
func TestListFilterStringTests(t *testing.T) {
	k := newKeyring(t)
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: listFilterConfig, Env: map[string]string{
		"SVC_JWKS_URL":   k.jwks.URL,
		"SVC_POLICY_DIR": filepath.Join(harness.ModuleRoot(t), "sdk", "testdata", "plan"),
	}})
	statuses := []string{"public", "Public", "PUBLIC", "public draft", "public-%", "public_x", `public\`, "public*?[",
		"publié", "publi", "draft public", "open", "archived", ""}
	var orders []order
	for i := range 120 {
		o := order{ID: fmt.Sprintf("ord-%04d", i), Tenant: []string{"acme", "acme", "globex"}[i%3]}
		if i%9 != 8 { // else no status: a NULL column
			st := statuses[i%len(statuses)]
			o.Status = &st
		}
		if i%4 == 1 {
			owner := "alice"
			o.Owner = &owner
		}
		orders = append(orders, o)
	}
	dbs := orderDatabases(t, orders)
	token := k.rsa.Token(t, harness.Claims("bob", "acme", "member"))
	want := allowedOrders(t, s, token, "orders:read", orders)
	if len(want) == 0 || len(want) == len(orders) {
		t.Fatalf("Authorize allows %d of %d orders: the table should tell plans apart", len(want), len(orders))
	}
	for dialect, db := range dbs {
		p := planFor(t, s, token, "orders:read", dialect)
		if p.Kind != "conditional" || !strings.Contains(p.SQL.Where, map[string]string{"sqlite": "GLOB", "postgres": "LIKE"}[dialect]) {
			t.Fatalf("%s: plan %s %s", dialect, p.Kind, p.SQL.Where)
		}
		if got := testkit.QueryIDs(t, db, "SELECT id FROM orders WHERE "+p.SQL.Where, p.SQL.Params...); !slices.Equal(got, want) {
			t.Errorf("%s: plan (%s %v) lists %d orders, Authorize allows %d; first differences: %v",
				dialect, p.SQL.Where, p.SQL.Params, len(got), len(want), firstDiffs(got, want))
		}
	}
}

func randomOrders(n int) []order {
	rng := rand.New(rand.NewPCG(7, 11))
	pick := func(vals ...string) *string {
		if rng.IntN(8) == 0 {
			return nil
		}
		v := vals[rng.IntN(len(vals))]
		return &v
	}
	out := make([]order, n)
	for i := range out {
		tenant := "acme"
		if rng.IntN(5) == 0 {
			tenant = "globex"
		}
		out[i] = order{
			ID: fmt.Sprintf("ord-%04d", i), Tenant: tenant,
			Owner:      pick("alice", "bob", "dana", ""),
			Status:     pick("open", "archived", "shipped"),
			Department: pick("sales", "ops", ""),
		}
	}
	return out
}

func fillOrders(t *testing.T, db *sql.DB, dialect string, orders []order) {
	t.Helper()
	if _, err := db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, owner TEXT, status TEXT, department TEXT)`); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO orders VALUES (?, ?, ?, ?, ?)`
	if dialect == "postgres" {
		insert = `INSERT INTO orders VALUES ($1, $2, $3, $4, $5)`
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range orders {
		if _, err := tx.Exec(insert, o.ID, o.Tenant, o.Owner, o.Status, o.Department); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// planReply is the answer of /v1/plan-resources.
type planReply struct {
	Kind string `json:"kind"`
	SQL  struct {
		Where  string `json:"where"`
		Params []any  `json:"params"`
	} `json:"sql"`
	Reason string `json:"reason"`
}

func planFor(t *testing.T, s *harness.Sidecar, token, action, dialect string) planReply {
	t.Helper()
	header := map[string]string{}
	if token != "" {
		header["Authorization"] = harness.Bearer(token)
	}
	status, h, body := harness.Send(t, http.MethodPost, s.URL("/v1/plan-resources"),
		fmt.Sprintf(`{"action":%q,"dialect":%q}`, action, dialect), header)
	var p planReply
	if status != http.StatusOK || json.Unmarshal(body, &p) != nil {
		t.Fatalf("plan-resources: %s", harness.Describe(status, h, body))
	}
	return p
}

// allowedOrders asks Authorize about each order and returns the ids it
// allows, sorted.
func allowedOrders(t *testing.T, s *harness.Sidecar, token, action string, orders []order) []string {
	t.Helper()
	header := map[string]string{}
	if token != "" {
		header["Authorization"] = harness.Bearer(token)
	}
	allowed := make([]bool, len(orders))
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(orders); i = int(next.Add(1) - 1) {
				allowed[i] = authorizeOrder(t, s, header, action, orders[i])
			}
		})
	}
	wg.Wait()
	var ids []string
	for i, ok := range allowed {
		if ok {
			ids = append(ids, orders[i].ID)
		}
	}
	slices.Sort(ids)
	return ids
}

// authorizeOrder asks /v1/authorize whether the caller may act on o.
func authorizeOrder(t *testing.T, s *harness.Sidecar, header map[string]string, action string, o order) bool {
	attrs := map[string]any{}
	for k, v := range map[string]*string{"owner": o.Owner, "status": o.Status, "department": o.Department} {
		if v != nil {
			attrs[k] = *v
		}
	}
	body, _ := json.Marshal(map[string]any{"action": action, "resource": map[string]any{
		"type": "orders", "id": o.ID, "tenant": o.Tenant, "attributes": attrs,
	}})
	status, h, answer := harness.Send(t, http.MethodPost, s.URL("/v1/authorize"), string(body), header)
	var d struct {
		Allowed bool `json:"allowed"`
	}
	if status != http.StatusOK || json.Unmarshal(answer, &d) != nil {
		t.Errorf("authorize: %s", harness.Describe(status, h, answer))
	}
	return d.Allowed
}

func firstDiffs(got, want []string) string {
	var extra, missing []string
	for _, id := range got {
		if !slices.Contains(want, id) && len(extra) < 3 {
			extra = append(extra, id)
		}
	}
	for _, id := range want {
		if !slices.Contains(got, id) && len(missing) < 3 {
			missing = append(missing, id)
		}
	}
	return "listed but denied " + strings.Join(extra, ",") + "; allowed but not listed " + strings.Join(missing, ",")
}

// orderDatabases opens a SQLite file and a real PostgreSQL server, each
// with a table of orders, closed when t ends; keyed by dialect.
func orderDatabases(t *testing.T, orders []order) map[string]*sql.DB {
	t.Helper()
	lite, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "orders.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lite.Close() })
	pg, err := sql.Open("pgx", pgtest.Start(t).DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Close() })
	dbs := map[string]*sql.DB{"sqlite": lite, "postgres": pg}
	for dialect, db := range dbs {
		fillOrders(t, db, dialect, orders)
	}
	return dbs
}

// TestListOrdersExample runs examples/list-orders against a real
// sidecar serving the resource-attributes policy: each caller's GET
// /orders lists only the orders that caller may read, from the app's own
// SQLite table, with one plan per request; a caller without a token is
// refused.
func TestListOrdersExample(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "list-orders")
	build := exec.Command("go", "build", "-o", bin, "./examples/list-orders")
	build.Dir = harness.ModuleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/list-orders: %v\n%s", err, out)
	}
	k := newKeyring(t)
	s := harness.StartSidecar(t, harness.SidecarOptions{Config: sidecarConfig, Env: map[string]string{
		"SVC_JWKS_URL":   k.jwks.URL,
		"SVC_POLICY_DIR": filepath.Join(harness.ModuleRoot(t), "examples", "policies", "resource-attributes"),
	}})
	addr := harness.FreeAddr(t)
	app := exec.Command(bin)
	app.Env = append(app.Environ(), "SVC_SIDECAR_URL="+s.URL(""), "LIST_ORDERS_ADDR="+addr)
	p := harness.StartProcess(t, "list-orders", app)
	if _, err := p.WaitOutput(t, true, 30*time.Second, func(line string) bool { return strings.Contains(line, "listening on") }); err != nil {
		t.Fatal(err)
	}

	list := func(token string) (int, []string) {
		t.Helper()
		status, h, body := harness.Send(t, http.MethodGet, "http://"+addr+"/orders", "", map[string]string{"Authorization": harness.Bearer(token)})
		if status != http.StatusOK {
			return status, nil
		}
		var out struct {
			Orders []struct {
				ID string `json:"id"`
			} `json:"orders"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%v: %s", err, harness.Describe(status, h, body))
		}
		ids := []string{}
		for _, o := range out.Orders {
			ids = append(ids, o.ID)
		}
		return status, ids
	}
	department := harness.Claims("u-3", "acme", "member")
	department["department"] = "sales"
	for name, tc := range map[string]struct {
		token string
		want  []string
	}{
		"owner":        {k.rsa.Token(t, harness.Claims("u-1", "acme", "member")), []string{"ord-1", "ord-2"}},
		"department":   {k.rsa.Token(t, department), []string{"ord-1", "ord-2", "ord-4"}},
		"admin":        {k.rsa.Token(t, harness.Claims("u-9", "acme", "admin")), []string{"ord-1", "ord-2", "ord-3", "ord-4", "ord-5"}},
		"other tenant": {k.rsa.Token(t, harness.Claims("u-1", "globex", "admin")), []string{}},
	} {
		if status, got := list(tc.token); status != http.StatusOK || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %d %v, want %v", name, status, got, tc.want)
		}
	}
	if status, _ := list(""); status != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", status)
	}
}
