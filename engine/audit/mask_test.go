package audit

import (
	"strings"
	"testing"

	"github.com/svc-dev/svc/internal/jsonmask"
	"github.com/svc-dev/svc/internal/testkit"
)

// Options.Mask erases its pointers from every record written, traced
// ones too, keeping the other members in their order; pointers under
// /input name nothing in an audit record.
func TestLoggerMask(t *testing.T) {
	mask, err := jsonmask.Parse([]string{"/input/request/headers/x-ssn", "/user_id", "/resource/id"})
	if err != nil {
		t.Fatal(err)
	}
	var out testkit.SyncBuffer
	l := New(&out, Options{Mask: mask})
	r := fullRecord()
	l.Log(r)
	r.TraceID, r.SpanID = "", ""
	l.LogTraced(r, [16]byte{1}, [8]byte{2})
	closeNow(t, l)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), out.String())
	}
	for i, line := range lines {
		if strings.Contains(line, `"user_id"`) || strings.Contains(line, `"id":`) ||
			!strings.HasSuffix(line, `,"erased":["/user_id","/resource/id"]}`) {
			t.Errorf("line %d not masked as asked: %s", i, line)
		}
		if !strings.HasPrefix(line, `{"time":`) || !strings.Contains(line, `"tenant":"acme","action":`) {
			t.Errorf("line %d lost its order: %s", i, line)
		}
	}
	if !strings.Contains(lines[1], `"trace_id":"01000000000000000000000000000000","span_id":"0200000000000000"`) {
		t.Errorf("traced record: %s", lines[1])
	}
	if s := l.Stats(); s.Written != 2 || s.Failed != 0 {
		t.Errorf("stats = %+v", s)
	}
}
