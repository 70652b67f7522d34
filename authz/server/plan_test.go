package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/svc-dev/svc/authz"
	authzv1 "github.com/svc-dev/svc/authz/v1"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit/servertest"
	"github.com/svc-dev/svc/plan"
)

// planReply is the JSON of a PlanResourcesResponse.
type planReply struct {
	Kind      plan.Kind       `json:"kind"`
	Condition *plan.Condition `json:"condition"`
	SQL       struct {
		Where  string `json:"where"`
		Params []any  `json:"params"`
	} `json:"sql"`
	DecisionID string `json:"decision_id"`
	Reason     string `json:"reason"`
	Subject    string `json:"subject"`
	TenantID   string `json:"tenant_id"`
	Revision   string `json:"policy_revision"`
}

func TestHTTPPlanResources(t *testing.T) {
	p := servertest.NewIDP(t)
	base := servertest.ServeHTTP(t, servertest.NewServer(t, servertest.NewEngine(t, p, nil)))
	unsupported := servertest.ServeHTTP(t, servertest.NewServer(t, servertest.NewEngine(t, p, func(c *config.Config) {
		c.Policy.Dir = "testdata/policy-plan-unsupported"
	})))
	viewer := p.TokenFor(t, servertest.User("alice", "viewer"))
	bearer := map[string]string{"Authorization": "Bearer " + viewer}
	url := base + authz.PathPlanResources

	post := func(t *testing.T, url, body string, header map[string]string) (int, planReply, []byte) {
		t.Helper()
		r := servertest.Post(t, http.MethodPost, url, body, header)
		var out planReply
		if r.Status == http.StatusOK {
			if err := json.Unmarshal(r.Body, &out); err != nil {
				t.Fatalf("%s: %v", r.Body, err)
			}
		}
		return r.Status, out, r.Body
	}

	t.Run("conditional on the tenant", func(t *testing.T) {
		code, got, body := post(t, url, `{"action":"orders:read","dialect":"sqlite"}`, bearer)
		if code != 200 || got.Kind != plan.Conditional || got.Reason != "plan-conditional" || got.DecisionID == "" || got.Subject != "alice" || got.Revision == "" {
			t.Fatalf("%d %s", code, body)
		}
		if got.SQL.Where != "`tenant` = ?" || len(got.SQL.Params) != 1 || got.SQL.Params[0] != servertest.Tenant {
			t.Errorf("sql = %+v", got.SQL)
		}
		if !got.Condition.Match(plan.Row{Tenant: servertest.Tenant}) || got.Condition.Match(plan.Row{Tenant: "globex"}) {
			t.Errorf("condition %s", got.Condition)
		}
	})
	t.Run("postgres is the default dialect", func(t *testing.T) {
		_, got, _ := post(t, url, `{"token":"`+viewer+`","action":"orders:read","resource_type":"orders"}`, nil)
		if got.SQL.Where != `"tenant" = $1` {
			t.Errorf("where = %q", got.SQL.Where)
		}
	})
	t.Run("a verb no role grants is always denied", func(t *testing.T) {
		_, got, body := post(t, url, `{"action":"orders:delete"}`, bearer)
		if got.Kind != plan.AlwaysDenied || got.Reason != "policy-deny" || got.SQL.Where != "1 = 0" || len(got.SQL.Params) != 0 || got.Condition != nil {
			t.Errorf("%s", body)
		}
	})
	t.Run("no credential plans nothing", func(t *testing.T) {
		_, got, body := post(t, url, `{"action":"orders:read"}`, nil)
		if got.Kind != plan.AlwaysDenied || got.Reason != "token-missing" || got.SQL.Where != "1 = 0" || got.DecisionID == "" {
			t.Errorf("%s", body)
		}
	})
	for name, tc := range map[string]struct {
		url, body string
		status    int
		code      string
	}{
		"unknown dialect":      {url, `{"action":"orders:read","dialect":"oracle"}`, 400, "input-invalid"},
		"no action":            {url, `{"dialect":"mysql"}`, 400, "input-invalid"},
		"policy it can't plan": {unsupported + authz.PathPlanResources, `{"action":"orders:read"}`, 422, "plan-unsupported"},
	} {
		t.Run(name, func(t *testing.T) {
			r := servertest.Post(t, http.MethodPost, tc.url, tc.body, bearer)
			var e authz.ErrorBody
			if err := json.Unmarshal(r.Body, &e); err != nil || r.Status != tc.status || e.Error.Code != tc.code {
				t.Fatalf("%d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
			if tc.code == "plan-unsupported" && !strings.Contains(e.Error.Message, "policy.rego:6") {
				t.Errorf("message %q does not name the rule's line", e.Error.Message)
			}
		})
	}
	if r := servertest.Post(t, http.MethodGet, url, "", bearer); r.Status != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", r.Status)
	}
}

func TestGRPCPlanResources(t *testing.T) {
	p := servertest.NewIDP(t)
	addr := servertest.ServeGRPC(t, servertest.NewServer(t, servertest.NewEngine(t, p, func(c *config.Config) {
		c.ListFilter.Columns = plan.Columns{"tenant": "orders.tenant_id"}
	})))
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := authzv1.NewAuthzServiceClient(conn)
	admin := p.TokenFor(t, servertest.User("root", "admin"))
	resp, err := c.PlanResources(t.Context(), &authzv1.PlanResourcesRequest{Token: admin, Action: "orders:delete", Dialect: "mysql"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetKind() != "conditional" || resp.GetSql().GetWhere() != "`orders`.`tenant_id` = CAST(? AS BINARY)" || resp.GetCondition().GetFields()["field"].GetStringValue() != "tenant" {
		t.Errorf("resp = %v", resp)
	}
	_, err = c.PlanResources(t.Context(), &authzv1.PlanResourcesRequest{Token: admin, Action: "orders:read", Dialect: "db2"})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || reasonOf(st) != "input-invalid" {
		t.Errorf("bad dialect: %v", err)
	}
}

func reasonOf(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
