package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestParseLevel(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    slog.Level
		wantErr bool
	}{
		{"trace", LevelTrace, false},
		{"debug", slog.LevelDebug, false},
		{"info", slog.LevelInfo, false},
		{"warn", slog.LevelWarn, false},
		{"error", slog.LevelError, false},
		{"", slog.LevelInfo, false},
		{"WARN", slog.LevelWarn, false},
		{"verbose", 0, true},
		{"warning", 0, true},
		{"-4", 0, true},
	} {
		t.Run("level_"+tc.in, func(t *testing.T) {
			got, err := ParseLevel(tc.in)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), `"`+tc.in+`"`) {
					t.Fatalf("ParseLevel(%q) error = %v, want one naming the value", tc.in, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ParseLevel(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestNewLoggerUnknownLevel(t *testing.T) {
	_, _, err := NewLogger(&bytes.Buffer{}, "loud")
	if err == nil || !strings.Contains(err.Error(), `"loud"`) {
		t.Errorf("NewLogger error = %v, want one naming \"loud\"", err)
	}
}

// lines decodes the JSON lines written so far.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// testLogger is a logger at level that writes to the buffer it returns.
func testLogger(t *testing.T, level string) (*slog.Logger, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	log, _, err := NewLogger(&buf, level)
	if err != nil {
		t.Fatal(err)
	}
	return log, &buf
}

func TestNewLoggerLevelAtRunTime(t *testing.T) {
	var buf bytes.Buffer
	log, lv, err := NewLogger(&buf, "warn")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	log.Info("hidden")
	log.Warn("shown")
	lv.Set(LevelTrace)
	log.Log(ctx, LevelTrace, "detail")
	log.Debug("debugging")
	lv.Set(slog.LevelError)
	log.Warn("hidden again")

	var got []string
	for _, m := range lines(t, &buf) {
		got = append(got, m["level"].(string)+" "+m["msg"].(string))
	}
	want := []string{"WARN shown", "TRACE detail", "DEBUG debugging"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines = %q, want %q", got, want)
	}
	if n := len(LogFeedOf(log).Recent(nil, time.Time{})); n != 3 {
		t.Errorf("feed holds %d records, want 3 (only those logged)", n)
	}
}

// tokenValuer resolves to a group holding a secret.
type tokenValuer struct{}

func (tokenValuer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("user", "u1"), slog.String("id_token", secret))
}

const secret = "s3cr3t-VALUE"

func TestRedaction(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
	}{
		{"authorization", func(l *slog.Logger) { l.Info("m", "authorization", "Bearer "+secret) }},
		{"Authorization_header_case", func(l *slog.Logger) { l.Info("m", "Authorization", secret) }},
		{"token", func(l *slog.Logger) { l.Info("m", "token", secret) }},
		{"access_token", func(l *slog.Logger) { l.Info("m", "ACCESS_TOKEN", secret) }},
		{"id_token", func(l *slog.Logger) { l.Info("m", "id_token", secret) }},
		{"password", func(l *slog.Logger) { l.Info("m", "Password", secret) }},
		{"secret", func(l *slog.Logger) { l.Info("m", "secret", secret) }},
		{"private_key", func(l *slog.Logger) { l.Info("m", "private_key", []byte(secret)) }},
		{"cookie", func(l *slog.Logger) { l.Info("m", "Cookie", "session="+secret) }},
		{"assertion", func(l *slog.Logger) { l.Info("m", "assertion", secret) }},
		{"samlresponse", func(l *slog.Logger) { l.Info("m", "SAMLResponse", secret) }},
		{"group_member", func(l *slog.Logger) {
			l.Info("m", slog.Group("request", slog.String("path", "/x"), slog.String("cookie", secret)))
		}},
		{"sensitive_group_key", func(l *slog.Logger) { l.Info("m", slog.Group("token", slog.String("raw", secret))) }},
		{"bound_with_attrs", func(l *slog.Logger) { l.With("password", secret).Info("m") }},
		{"bound_in_group", func(l *slog.Logger) { l.WithGroup("req").With("authorization", secret).Info("m") }},
		{"http_header", func(l *slog.Logger) {
			l.Info("m", "headers", http.Header{"Authorization": {"Bearer " + secret}, "Accept": {"*/*"}})
		}},
		{"string_map", func(l *slog.Logger) { l.Info("m", "form", map[string]string{"SAMLResponse": secret}) }},
		{"any_map", func(l *slog.Logger) { l.Info("m", "claims", map[string]any{"access_token": secret}) }},
		{"log_valuer", func(l *slog.Logger) { l.Info("m", "session", tokenValuer{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, buf := testLogger(t, "info")
			tc.log(log)
			out := buf.String()
			if strings.Contains(out, secret) {
				t.Errorf("secret in log line: %s", out)
			}
			if !strings.Contains(out, Redacted) {
				t.Errorf("no %s marker in log line: %s", Redacted, out)
			}
			recs := LogFeedOf(log).Recent(nil, time.Time{})
			if len(recs) != 1 {
				t.Fatalf("feed holds %d records", len(recs))
			}
			fed, _ := json.Marshal(recs[0])
			if strings.Contains(string(fed), secret) {
				t.Errorf("secret in feed record: %s", fed)
			}
		})
	}
}

func TestRedactionLeavesOtherKeys(t *testing.T) {
	log, buf := testLogger(t, "info")
	log.Info("m", "token_type", "Bearer", "user_id", "u1", "reason", "token-expired",
		"headers", http.Header{"Accept": {"*/*"}})
	m := lines(t, buf)[0]
	if m["token_type"] != "Bearer" || m["user_id"] != "u1" || m["reason"] != "token-expired" {
		t.Errorf("non-sensitive attributes changed: %v", m)
	}
	if strings.Contains(buf.String(), Redacted) {
		t.Errorf("redacted without cause: %s", buf.String())
	}
}

func TestTraceIDs(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("log-test").Start(context.Background(), "op")
	defer span.End()
	sc := span.SpanContext()
	wantTrace, wantSpan := sc.TraceID().String(), sc.SpanID().String()

	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
		// wantKey is where an extra attribute lands in the JSON line.
		wantKey []string
	}{
		{"plain", func(l *slog.Logger) { l.InfoContext(ctx, "m", "k", "v") }, []string{"k"}},
		{"grouped_logger", func(l *slog.Logger) { l.WithGroup("g").InfoContext(ctx, "m", "k", "v") }, []string{"g", "k"}},
		{"redacted_record", func(l *slog.Logger) { l.InfoContext(ctx, "m", "k", "v", "token", secret) }, []string{"k"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, buf := testLogger(t, "info")
			tc.log(log)
			m := lines(t, buf)[0]
			if m[TraceIDKey] != wantTrace || m[SpanIDKey] != wantSpan {
				t.Errorf("line = %v, want top-level trace_id %s span_id %s", m, wantTrace, wantSpan)
			}
			var v any = m
			for _, k := range tc.wantKey {
				v = v.(map[string]any)[k]
			}
			if v != "v" {
				t.Errorf("attribute %v = %v in %v", tc.wantKey, v, m)
			}
			rec := LogFeedOf(log).Recent(nil, time.Time{})[0]
			if rec.TraceID != wantTrace || rec.SpanID != wantSpan {
				t.Errorf("feed record ids = %s/%s", rec.TraceID, rec.SpanID)
			}
		})
	}

	t.Run("no_span", func(t *testing.T) {
		log, buf := testLogger(t, "info")
		log.InfoContext(context.Background(), "m")
		if strings.Contains(buf.String(), TraceIDKey) {
			t.Errorf("trace_id without a span: %s", buf.String())
		}
	})
	t.Run("bound_trace_id_not_duplicated", func(t *testing.T) {
		log, buf := testLogger(t, "info")
		log.With(TraceIDKey, wantTrace).InfoContext(ctx, "m")
		if n := strings.Count(buf.String(), `"`+TraceIDKey+`"`); n != 1 {
			t.Errorf("trace_id appears %d times: %s", n, buf.String())
		}
	})
}

func TestLogFeedSubscribe(t *testing.T) {
	log, _ := testLogger(t, "debug")
	feed := LogFeedOf(log)
	log.Info("before", "tenant", "acme")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	acme := func(r LogRecord) bool { return r.Attributes["tenant"] == "acme" }
	ch := feed.Subscribe(ctx, acme, time.Time{})

	log.With("tenant", "other").Info("skipped")
	log.WithGroup("policy").Info("live", "result", "deny", slog.String("tenant", "x"))
	log.With("tenant", "acme").Debug("live", slog.Group("policy", slog.String("result", "deny")))

	var got []LogRecord
	for range 2 {
		select {
		case r := <-ch:
			got = append(got, r)
		case <-time.After(5 * time.Second):
			t.Fatalf("received %d of 2 records", len(got))
		}
	}
	if got[0].Message != "before" || got[1].Message != "live" || got[1].Level != "DEBUG" {
		t.Errorf("got %+v", got)
	}
	if got[1].Attributes["policy.result"] != "deny" {
		t.Errorf("group member key: %v", got[1].Attributes)
	}
	select {
	case r := <-ch:
		t.Errorf("unexpected record %+v", r)
	default:
	}
	feed.Close()
	if _, ok := <-ch; ok {
		t.Error("channel open after Close")
	}
}

func BenchmarkLoggerInfo(b *testing.B) {
	log, _, err := NewLogger(discard{}, "info")
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("bench").Start(context.Background(), "op")
	defer span.End()
	_ = trace.SpanFromContext(ctx)
	b.ReportAllocs()
	for b.Loop() {
		log.InfoContext(ctx, "decision", "decision_id", "d1", "tenant", "acme", "allow", true)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
