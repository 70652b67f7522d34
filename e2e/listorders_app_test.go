package e2e

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
)

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
