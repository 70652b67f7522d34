package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/svc-dev/svc/engine"
	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/engine/policy"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/idptest"
	"github.com/svc-dev/svc/internal/testkit/kafkatest"
	"github.com/svc-dev/svc/internal/testkit/metrictest"
	"github.com/svc-dev/svc/internal/testkit/natstest"
	"github.com/svc-dev/svc/reason"
)

func decisionLogConfig(t testing.TB, p *idptest.IdP, natsURL string) config.Config {
	cfg := prodConfig(p.JWKSURL())
	cfg.DecisionLog = config.DecisionLog{Sink: config.DecisionLogNATS, URL: natsURL, SpoolDir: t.TempDir(),
		FlushInterval: config.Duration{Duration: 20 * time.Millisecond}}
	return cfg
}

// streamRecords returns the records in the decision stream by decision id.
func streamRecords(t *testing.T, srv *natstest.Server) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, m := range srv.Messages(t, "SVC_DECISIONS") {
		var rec map[string]any
		if err := json.Unmarshal(m.Data, &rec); err != nil {
			t.Fatalf("record %d is not JSON: %v", m.Sequence, err)
		}
		if id := m.Header.Get(jetstream.MsgIDHeader); id != rec["decision_id"] {
			t.Fatalf("message id %q, record's decision id %v", id, rec["decision_id"])
		}
		out[rec["decision_id"].(string)] = rec
	}
	return out
}

// Every decision, a refused token's too, reaches NATS with its audit
// fields and the redacted input; never the token.
func TestDecisionLogShipsEveryDecision(t *testing.T) {
	srv := natstest.Start(t)
	p := idptest.New(t)
	reader := sdkmetric.NewManualReader()
	e := newEngine(t, decisionLogConfig(t, p, srv.URL()), engine.Deps{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	ctx := context.Background()
	good := p.Token(t, claimsFor("acme", "viewer"))
	var ids []string
	for _, tok := range []string{good, good, "not-a-token"} {
		res, err := e.Decide(ctx, engine.Request{Credential: engine.BearerToken(tok), Source: "grpc",
			Input: engine.Input{Action: "orders:read", Resource: policy.Resource{Type: "orders", ID: "o-1"},
				Request: &policy.Request{Method: "GET", Path: "/orders/o-1", Headers: map[string]string{"x-trace": "t-1"}}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Decision.DecisionID)
	}
	// Token validations are answers too: each has its id and record.
	for _, tok := range []string{good, "not-a-token"} {
		res, err := e.Decide(ctx, engine.Request{Scope: engine.ScopeToken, Credential: engine.BearerToken(tok), Source: "http"})
		if err != nil || res.Token.DecisionID == "" {
			t.Fatalf("validation: %+v, %v; want a decision id", res.Token, err)
		}
		ids = append(ids, res.Token.DecisionID)
	}
	testkit.Eventually(t, "every decision shipped", func() bool {
		st := e.Status().DecisionLog
		return st != nil && st.Shipped == 5 && st.Unsent == 0 && st.Connected
	})
	rm := metrictest.Collect(t, reader)
	for name, want := range map[string]int64{"svc.decision_log.shipped": 5, "svc.decision_log.unsent": 0, "svc.decision_log.dropped": 0} {
		if got := metrictest.Values(rm, name)[""]; got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	recs := streamRecords(t, srv)
	for i, id := range ids {
		rec, ok := recs[id]
		if !ok {
			t.Fatalf("decision %d (%s) is not in the stream", i, id)
		}
		in, _ := rec["input"].(map[string]any)
		if i < 3 && (rec["source"] != "grpc" || rec["action"] != "orders:read" || in == nil || in["action"] != "orders:read") {
			t.Errorf("record %d = %v", i, rec)
		}
		raw, _ := json.Marshal(rec)
		if strings.Contains(string(raw), good) || strings.Contains(string(raw), "sales") {
			t.Errorf("record %d carries the token or a redacted claim: %s", i, raw)
		}
	}
	if r := recs[ids[0]]; r["allow"] != true || r["identity_kind"] != "jwt" {
		t.Errorf("allowed decision's record: allow %v, identity_kind %v", r["allow"], r["identity_kind"])
	}
	if r := recs[ids[2]]; r["allow"] != false || r["reason"] != "token-malformed" {
		t.Errorf("refused token's record: allow %v, reason %v", r["allow"], r["reason"])
	}
	if r := recs[ids[3]]; r["source"] != "http" || r["allow"] != true || r["reason"] != "ok" || r["user_id"] != "user-1" {
		t.Errorf("validated token's record: %v", r)
	}
	if r := recs[ids[4]]; r["source"] != "http" || r["allow"] != false || r["reason"] != "token-malformed" {
		t.Errorf("refused validation's record: %v", r)
	}
}

// A request its surface refused (a proxy's path without a single
// meaning) is answered under a decision id and shipped with its reason,
// its credential unjudged and the query of its path redacted.
func TestDecisionLogShipsRefusals(t *testing.T) {
	srv := natstest.Start(t)
	p := idptest.New(t)
	e := newEngine(t, decisionLogConfig(t, p, srv.URL()), engine.Deps{})
	refused := reason.New(reason.PathInvalid, "the path has an encoded slash")
	res, err := e.Decide(context.Background(), engine.Request{
		Credential: engine.BearerToken(p.Token(t, claimsFor("acme", "viewer"))), Source: "envoy", Refused: refused,
		Input: engine.Input{Request: &policy.Request{Method: "GET", Path: "/orders/%2F1?access_token=SECRET"}}})
	if err != nil || res.Allowed() || res.Decision.Reason != reason.PathInvalid || res.Decision.DecisionID == "" {
		t.Fatalf("refusal: %+v, %v; want denied path-invalid with a decision id", res, err)
	}
	if res.Token.Allowed || res.Token.Reason != "" {
		t.Errorf("the refused request's credential was judged: %+v", res.Token)
	}
	testkit.Eventually(t, "the refusal shipped", func() bool {
		st := e.Status().DecisionLog
		return st != nil && st.Shipped == 1
	})
	rec := streamRecords(t, srv)[res.Decision.DecisionID]
	raw, _ := json.Marshal(rec)
	in, _ := rec["input"].(map[string]any)
	req, _ := in["request"].(map[string]any)
	if rec == nil || rec["reason"] != "path-invalid" || rec["allow"] != false || rec["source"] != "envoy" ||
		req["path"] != "/orders/%2F1?access_token=[REDACTED]" || strings.Contains(string(raw), "SECRET") {
		t.Errorf("refusal's record: %s", raw)
	}
}

// A record larger than a spool segment (64 KiB with spool_max_bytes of
// 1 MiB), or than the sink takes in one message (NATS's max_payload, 1
// MiB, with segments of 64 MiB), is logged without its input,
// "input_omitted" saying so, and its decision answered: never refused
// for its size, nor counted as refused. The decisions after it ship: a
// record NATS refuses each time would hold them up for good.
//
// A record too large even without its input (a resource id of more than
// max_payload, in its audit fields) is logged with its strings clipped,
// "truncated" saying so, and its decision answered all the same.
func TestDecisionLogOversizedRecord(t *testing.T) {
	for _, tc := range []struct {
		name       string
		spoolBytes int64
		pathBytes  int
		idBytes    int
	}{
		{"larger than a segment", 1 << 20, 80 << 10, 0},
		{"larger than max_payload", 0, 1200 << 10, 0},
		{"larger than max_payload without its input", 0, 0, 1200 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			p := idptest.New(t)
			cfg := decisionLogConfig(t, p, srv.URL())
			if tc.spoolBytes != 0 {
				cfg.DecisionLog.SpoolMaxBytes = tc.spoolBytes
			}
			e := newEngine(t, cfg, engine.Deps{})
			tok := p.Token(t, claimsFor("acme", "viewer"))
			var ids []string
			bigID := "o-1" + strings.Repeat("1", tc.idBytes)
			for _, q := range []struct{ path, id string }{{"/orders/" + strings.Repeat("a", tc.pathBytes), bigID}, {"/orders/o-1", "o-1"}} {
				res, err := e.Decide(context.Background(), engine.Request{Credential: engine.BearerToken(tok), Source: "http",
					Input: engine.Input{Action: "orders:read", Resource: policy.Resource{Type: "orders", ID: q.id},
						Request: &policy.Request{Method: "GET", Path: q.path}}})
				if err != nil || !res.Allowed() {
					t.Fatalf("decision on a %d-byte path, a %d-byte id: %+v, %v", len(q.path), len(q.id), res.Decision, err)
				}
				ids = append(ids, res.Decision.DecisionID)
			}
			testkit.Eventually(t, "both decisions shipped", func() bool {
				st := e.Status().DecisionLog
				return st != nil && st.Shipped == 2
			})
			if st := e.Status().DecisionLog; st.Refused != 0 || st.Dropped != 0 {
				t.Errorf("status: %d refused, %d dropped; want none", st.Refused, st.Dropped)
			}
			recs := streamRecords(t, srv)
			if r := recs[ids[0]]; r == nil || r["input"] != nil || r[engine.InputOmitted] != "too-large" || r["allow"] != true || r["action"] != "orders:read" {
				t.Errorf("oversized decision's record: %.300v", r)
			}
			res, _ := recs[ids[0]]["resource"].(map[string]any)
			if id, _ := res["id"].(string); tc.idBytes > 0 && (recs[ids[0]][engine.Truncated] != true || len(id) >= tc.idBytes || !strings.HasPrefix(bigID, id)) {
				t.Errorf("record of the decision on a %d-byte id: truncated %v, resource id of %d bytes", len(bigID), recs[ids[0]][engine.Truncated], len(id))
			} else if tc.idBytes == 0 && recs[ids[0]][engine.Truncated] != nil {
				t.Errorf("record truncated although its audit fields fit: %.300v", recs[ids[0]])
			}
			if r := recs[ids[1]]; r == nil || r["input"] == nil || r[engine.InputOmitted] != nil {
				t.Errorf("small decision's record: %v", r)
			}
		})
	}
}

// With overflow = "deny", a full spool (the sink down) refuses to
// answer: decision-log-unavailable, never an unlogged allow.
func TestDecisionLogDenyWhenFull(t *testing.T) {
	srv := natstest.Start(t)
	p := idptest.New(t)
	cfg := decisionLogConfig(t, p, srv.URL())
	cfg.DecisionLog.Overflow = config.DecisionLogDeny
	cfg.DecisionLog.SpoolMaxBytes = 1 << 20
	cfg.RateLimit.Disabled = true
	e := newEngine(t, cfg, engine.Deps{})
	srv.Kill()
	ctx := context.Background()
	good := p.Token(t, claimsFor("acme", "viewer"))
	big := strings.Repeat("x", 4000)
	var refused error
	var n int
	for n = 0; n < 2000 && refused == nil; n++ {
		res, err := e.Decide(ctx, engine.Request{Credential: engine.BearerToken(good),
			Input: engine.Input{Action: "orders:read", Resource: policy.Resource{Type: "orders", ID: big}}})
		if err != nil {
			refused = err
			if res.Allowed() || res.Decision.Reason != reason.DecisionLogUnavailable {
				t.Errorf("refused decision: allowed %v, reason %s", res.Allowed(), res.Decision.Reason)
			}
		}
	}
	var re *reason.Error
	if !errors.As(refused, &re) || re.Code != reason.DecisionLogUnavailable {
		t.Fatalf("after %d decisions with the sink down: %v, want decision-log-unavailable", n, refused)
	}
	if d := e.ValidateToken(ctx, good); d.Allowed || d.Reason != reason.DecisionLogUnavailable || d.DecisionID == "" {
		t.Errorf("validation with the spool full: %+v, want refused decision-log-unavailable", d)
	}
	if n < 100 {
		// Each record holds the 4 KB id twice (the record's resource and
		// the input's): about 120 fill 1 MiB.
		t.Fatalf("refused after %d decisions of 8 KB records in a 1 MiB spool", n)
	}
	srv.Restart()
	testkit.Eventually(t, "the spool shipped once the sink is back", func() bool {
		st := e.Status().DecisionLog
		return st.Unsent == 0 && st.Connected
	})
	if res, err := e.Decide(ctx, engine.Request{Credential: engine.BearerToken(good), Input: engine.Input{Action: "orders:read"}}); err != nil || !res.Allowed() {
		t.Fatalf("once shipped: %v, allowed %v", err, res.Allowed())
	}
}

// refuseDecisions makes decisions with a deny-overflow spool of 1 MiB
// and a sink that is down until one is refused, and returns how many
// were answered before it. Each record is about 8 KB.
func refuseDecisions(t *testing.T, reader sdkmetric.Reader) (*engine.Engine, int) {
	t.Helper()
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.DecisionLog = config.DecisionLog{Sink: config.DecisionLogHTTP, URL: "http://127.0.0.1:1/v1", SpoolDir: t.TempDir(),
		Overflow: config.DecisionLogDeny, SpoolMaxBytes: 1 << 20, FlushInterval: config.Duration{Duration: time.Hour}}
	cfg.RateLimit.Disabled = true
	e := newEngine(t, cfg, engine.Deps{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	good := p.Token(t, claimsFor("acme", "viewer"))
	for n := 0; n < 2000; n++ {
		res, err := e.Decide(context.Background(), engine.Request{Credential: engine.BearerToken(good),
			Input: engine.Input{Action: "orders:read", Resource: policy.Resource{Type: "orders", ID: strings.Repeat("x", 4000)}}})
		if err != nil {
			if res.Decision.Reason != reason.DecisionLogUnavailable {
				t.Fatalf("decision %d: %v, reason %s; want decision-log-unavailable", n, err, res.Decision.Reason)
			}
			return e, n
		}
	}
	t.Fatal("2000 decisions of 8 KB records answered with a spool of 1 MiB")
	return nil, 0
}

// A decision the decision log refused is counted in
// svc.decision_log.refused and in the status.
func TestDecisionLogRefusalsCounted(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	e, _ := refuseDecisions(t, reader)
	if st := e.Status().DecisionLog; st.Refused != 1 || !st.Refusing {
		t.Errorf("status after a refusal: %+v, want refused 1, refusing", st)
	}
	rm := metrictest.Collect(t, reader)
	if got := metrictest.Values(rm, "svc.decision_log.refused")[""]; got != 1 {
		t.Errorf("svc.decision_log.refused = %d, want 1", got)
	}
}

// svc.decisions counts a decision the decision log refused as what was
// answered: denied, decision-log-unavailable, not the policy's outcome.
func TestDecisionLogRefusalsCountedAsAnswered(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	_, n := refuseDecisions(t, reader)
	got := metrictest.Values(metrictest.Collect(t, reader), "svc.decisions", "result", "reason")
	want := map[string]int64{"allow/policy-allow": int64(n), "deny/decision-log-unavailable": 1}
	if len(got) != len(want) || got["allow/policy-allow"] != want["allow/policy-allow"] ||
		got["deny/decision-log-unavailable"] != 1 {
		t.Errorf("svc.decisions = %v, want %v", got, want)
	}
}

// A refusal says why the decision log refused: a spool that cannot be
// written under overflow = "drop_oldest" is no full spool under "deny".
func TestDecisionLogRefusalSaysWhy(t *testing.T) {
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	spoolDir := t.TempDir()
	cfg.DecisionLog = config.DecisionLog{Sink: config.DecisionLogHTTP, URL: "http://127.0.0.1:1/v1", SpoolDir: spoolDir,
		FlushInterval: config.Duration{Duration: time.Hour}}
	e := newEngine(t, cfg, engine.Deps{})
	// The process's spool directory gone: its first segment file cannot
	// be created.
	procs, _ := filepath.Glob(filepath.Join(spoolDir, "p-*"))
	for _, d := range procs {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	good := p.Token(t, claimsFor("acme", "viewer"))
	d := e.ValidateToken(ctx, good)
	if d.Allowed || d.Reason != reason.DecisionLogUnavailable || strings.Contains(d.Message, "deny") ||
		!strings.Contains(d.Message, "cannot be written") {
		t.Errorf("validation with the spool unwritable: %+v, want decision-log-unavailable saying the spool cannot be written", d)
	}
	_, err := e.Decide(ctx, engine.Request{Credential: engine.BearerToken(good), Input: engine.Input{Action: "orders:read"}})
	var re *reason.Error
	if !errors.As(err, &re) || re.Code != reason.DecisionLogUnavailable || strings.Contains(re.Msg, "deny") ||
		!strings.Contains(re.Msg, "cannot be written") {
		t.Errorf("decision with the spool unwritable: %v, want decision-log-unavailable saying the spool cannot be written", err)
	}
}

// An unreadable decision_log.http_token_file stops the engine, the
// error naming that key.
func TestDecisionLogHTTPTokenFileMissing(t *testing.T) {
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	cfg.DecisionLog = config.DecisionLog{Sink: config.DecisionLogHTTP, URL: "http://127.0.0.1:1/v1", SpoolDir: t.TempDir(),
		HTTPTokenFile: filepath.Join(t.TempDir(), "missing-token")}
	_, err := engine.New(cfg, engine.Deps{})
	var se *engine.SettingError
	if !errors.As(err, &se) || se.Key != "decision_log.http_token_file" {
		t.Fatalf("engine.New with a missing token file: %v, want a setting error of decision_log.http_token_file", err)
	}
}

// A Kafka cluster behind TLS from a private authority and SCRAM, as
// managed clusters are: decision_log.tls_ca_file and the SASL keys (the
// password from its file) take the decisions there. A password file
// that cannot be read stops the engine, naming its key.
func TestDecisionLogKafkaTLSAndSASL(t *testing.T) {
	kc, ca := kafkatest.StartTLS(t, "SCRAM-SHA-512", "svc", "s3cret", "svc-decisions")
	p := idptest.New(t)
	cfg := prodConfig(p.JWKSURL())
	dir := t.TempDir()
	cfg.DecisionLog = config.DecisionLog{Sink: config.DecisionLogKafka, URL: kc.URL(), SpoolDir: t.TempDir(),
		FlushInterval: config.Duration{Duration: 20 * time.Millisecond}, TLSCAFile: testkit.TempFile(t, "ca.pem", ca.PEM),
		KafkaSASLMechanism: "SCRAM-SHA-512", KafkaSASLUsername: "svc", KafkaSASLPasswordFile: testkit.TempFile(t, "kafka-password", []byte("s3cret\n"))}
	e := newEngine(t, cfg, engine.Deps{})
	res, err := e.Decide(context.Background(), engine.Request{Credential: engine.BearerToken(p.Token(t, claimsFor("acme", "viewer"))),
		Input: engine.Input{Action: "orders:read"}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the decision shipped", func() bool {
		st := e.Status().DecisionLog
		return st != nil && st.Shipped == 1 && st.Unsent == 0
	})
	recs := kc.Records(t, "svc-decisions")
	if len(recs) != 1 || kafkatest.Header(recs[0], "decision-id") != res.Decision.DecisionID {
		t.Fatalf("topic holds %d records, want the decision %s", len(recs), res.Decision.DecisionID)
	}

	cfg.DecisionLog.KafkaSASLPasswordFile = filepath.Join(dir, "missing")
	_, err = engine.New(cfg, engine.Deps{})
	var se *engine.SettingError
	if !errors.As(err, &se) || se.Key != "decision_log.kafka_sasl_password_file" {
		t.Fatalf("engine.New with a missing password file: %v, want a setting error of decision_log.kafka_sasl_password_file", err)
	}
	cfg.DecisionLog.KafkaSASLPasswordFile = testkit.TempFile(t, "kafka-password", []byte("s3cret\n"))
	cfg.DecisionLog.TLSCAFile = testkit.TempFile(t, "not-a-ca", []byte("no certificate here"))
	if _, err = engine.New(cfg, engine.Deps{}); !errors.As(err, &se) || se.Key != "decision_log.tls_ca_file" {
		t.Fatalf("engine.New with a CA file without certificates: %v, want a setting error of decision_log.tls_ca_file", err)
	}
}
