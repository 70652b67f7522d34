package audit

import (
	"bytes"
	"context"
	"encoding/hex"
	"math/rand/v2"
	"testing"
	"time"
)

// TestLogTracedWritesFieldsFromBytes: a record logged with its trace ids
// as bytes is written exactly as the record with the ids' hex in TraceID
// and SpanID, and ids the record already holds win over the bytes.
func TestLogTracedWritesFieldsFromBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base := Record{
		Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), DecisionID: "d-1", Tenant: "acme", UserID: "u-1",
		Action: "orders:read", Resource: Resource{Type: "orders", ID: "42", Tenant: "acme"}, Allow: true,
		DenyReasons: []string{}, Reason: "policy-allow", PolicyRevision: "r1", LatencyUS: 7, Source: "envoy",
	}
	for i := range 200 {
		var tid [16]byte
		var sid [8]byte
		for j := range tid {
			tid[j] = byte(r.UintN(256))
		}
		for j := range sid {
			sid[j] = byte(r.UintN(256))
		}
		if i == 0 {
			tid, sid = [16]byte{}, [8]byte{}
		}
		ids := rawIDs{trace: tid, span: sid, set: true}
		want := base
		want.TraceID, want.SpanID = hex.EncodeToString(tid[:]), hex.EncodeToString(sid[:])
		rec := base
		if got, exp := rec.appendJSON(nil, &ids), want.AppendJSON(nil); !bytes.Equal(got, exp) {
			t.Fatalf("from bytes:\n%s\nfrom fields:\n%s", got, exp)
		}
		own := base
		own.TraceID, own.SpanID = "own-trace", "own-span"
		if got, exp := own.appendJSON(nil, &ids), own.AppendJSON(nil); !bytes.Equal(got, exp) {
			t.Fatalf("fields set, from bytes:\n%s\nfrom fields:\n%s", got, exp)
		}
		if got, exp := base.appendJSON(nil, &rawIDs{}), base.AppendJSON(nil); !bytes.Equal(got, exp) {
			t.Fatalf("no ids:\n%s\nwant:\n%s", got, exp)
		}
	}

	var out bytes.Buffer
	l := New(&out, Options{})
	tid := [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sid := [8]byte{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
	l.LogTraced(base, tid, sid)
	l.Log(base)
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := base
	want.TraceID, want.SpanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	exp := append(append(want.AppendJSON(nil), '\n'), append(base.AppendJSON(nil), '\n')...)
	if !bytes.Equal(out.Bytes(), exp) {
		t.Fatalf("log:\n%s\nwant:\n%s", out.Bytes(), exp)
	}
}
