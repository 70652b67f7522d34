package e2e

import (
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/kafkatest"
)

// decisionLogEnv is the environment of a sidecar shipping its decision
// log to sink at url.
func decisionLogEnv(t *testing.T, sink, url string) map[string]string {
	return map[string]string{
		"SVC_DECISION_LOG_SINK": sink, "SVC_DECISION_LOG_URL": url,
		"SVC_DECISION_LOG_SPOOL_DIR":      filepath.Join(t.TempDir(), "spool"),
		"SVC_DECISION_LOG_FLUSH_INTERVAL": "50ms",
	}
}

// decideSome makes allowed and denied Envoy Checks and returns the
// decision ids their answers carried.
func decideSome(t *testing.T, k *keyring, s *harness.Sidecar) []string {
	t.Helper()
	viewer := k.token(t, "alice", "acme", "viewer")
	var ids []string
	for range 3 {
		r := envoyCheck(t, s, "GET", "/orders/1", viewer, nil)
		if r.status != http.StatusOK || r.headers["x-svc-decision-id"] == "" {
			t.Fatalf("Check GET: status %d, headers %v, want 200 with x-svc-decision-id", r.status, r.headers)
		}
		ids = append(ids, r.headers["x-svc-decision-id"])
		r = envoyCheck(t, s, "DELETE", "/orders/1", viewer, nil)
		if r.status != http.StatusForbidden {
			t.Fatalf("Check DELETE: status %d, want 403; body %s", r.status, r.body)
		}
		d := parseDeny(t, r.body)
		if d.DecisionID == "" {
			t.Fatalf("deny body has no decision_id: %s", r.body)
		}
		ids = append(ids, d.DecisionID)
	}
	return ids
}

// waitShipped waits until the sidecar's decision log has nothing left
// to ship, then stops it (exit 0).
func waitShipped(t *testing.T, s *harness.Sidecar, n int) {
	t.Helper()
	testkit.Eventually(t, "the decisions shipped", func() bool {
		st, err := fetchStatus(s)
		return err == nil && st.DecisionLog != nil && st.DecisionLog.Unsent == 0 && st.DecisionLog.Shipped >= int64(n)
	})
	s.Stop(t)
}

// Every decision id a client received is in the Kafka topic, keyed by
// the tenant, in the decision-id header and the record's JSON.
func TestDecisionLogKafka(t *testing.T) {
	t.Parallel()
	kc := kafkatest.Start(t, "acme-decisions")
	k := newKeyring(t)
	env := decisionLogEnv(t, "kafka", kc.URL())
	env["SVC_DECISION_LOG_KAFKA_TOPIC"] = "acme-decisions"
	s := startSidecar(t, k, env)
	ids := decideSome(t, k, s)
	waitShipped(t, s, len(ids))

	got := map[string]bool{}
	for _, r := range kc.Records(t, "acme-decisions") {
		var rec struct {
			DecisionID string `json:"decision_id"`
			Tenant     string `json:"tenant"`
		}
		if err := json.Unmarshal(r.Value, &rec); err != nil {
			t.Fatalf("record value is not JSON: %v: %q", err, r.Value)
		}
		if h := kafkatest.Header(r, "decision-id"); h != rec.DecisionID || string(r.Key) != "acme" || rec.Tenant != "acme" {
			t.Errorf("record key %q, decision-id header %q, JSON decision_id %q tenant %q: want key acme and the same id",
				r.Key, h, rec.DecisionID, rec.Tenant)
		}
		got[rec.DecisionID] = true
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("decision %s is not in the topic (%d decisions there)", id, len(got))
		}
	}
}

// Every decision id a client received reaches the HTTP service, in
// OPA's upload shape with the bearer token of the token file; an upload
// it refused is made again.
func TestDecisionLogHTTP(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		got      = map[string]bool{}
		refused  int
		problems []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/decisions/logs" || r.Header.Get("Authorization") != "Bearer upload-token-1" ||
			r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("Content-Type") != "application/json" {
			problems = append(problems, r.Method+" "+r.URL.Path+" with headers "+r.Header.Get("Content-Type")+" "+r.Header.Get("Content-Encoding"))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if refused == 0 { // the first upload: the service is overloaded
			refused++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var recs []struct {
			DecisionID string `json:"decision_id"`
		}
		zr, err := gzip.NewReader(r.Body)
		if err == nil {
			err = json.NewDecoder(zr).Decode(&recs)
		}
		if err != nil {
			problems = append(problems, "body: "+err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, rec := range recs {
			got[rec.DecisionID] = true
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	k := newKeyring(t)
	env := decisionLogEnv(t, "http", srv.URL+"/decisions")
	env["SVC_DECISION_LOG_HTTP_TOKEN_FILE"] = harness.WriteFile(t, t.TempDir(), "token", "upload-token-1\n")
	s := startSidecar(t, k, env)
	ids := decideSome(t, k, s)
	waitShipped(t, s, len(ids))

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("uploads not in the expected shape: %q", problems)
	}
	if refused != 1 {
		t.Errorf("the service refused %d uploads, want the first one", refused)
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("decision %s never reached the service (%d decisions did)", id, len(got))
		}
	}
}
