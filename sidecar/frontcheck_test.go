package sidecar

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"net/http"
	"testing"

	"github.com/svc-dev/svc/internal/testkit"
)

// maxFrontCheckAllocs bounds the allocations of one allowed GET /check
// as Caddy's forward_auth sends it, read, decided and answered by the
// HTTP/1.1 front, the token and decision cached, no span recorded: the
// front's copy of the request header and the decision's own.
const maxFrontCheckAllocs = 14

// frontCheck returns a function that reads, decides and answers one
// check of raw on a connection of sc's front, and fails t unless the
// answer is a 200.
func frontCheck(t testing.TB, sc *running, raw []byte) func() {
	t.Helper()
	fc := &frontConn{f: sc.front, c: deadlineConn{}, remote: "127.0.0.1:40000"}
	rd := bytes.NewReader(raw)
	fc.br = bufio.NewReaderSize(rd, frontBufSize)
	fc.bw = bufio.NewWriterSize(io.Discard, 4<<10)
	return func() {
		rd.Reset(raw)
		fc.br.Reset(rd)
		n, ok := fc.readHeader()
		if !ok {
			t.Fatal("no header read")
		}
		if _, fast := fc.parse(n); !fast {
			t.Fatal("the front left the check to net/http")
		}
		fc.br.Discard(n) //nolint:errcheck // n bytes are buffered
		if err := fc.answer(false); err != nil {
			t.Fatal(err)
		}
		if fc.w.status != http.StatusOK {
			t.Fatalf("status %d: %s", fc.w.status, fc.w.body)
		}
	}
}

// caddyCheck is GET /check as Caddy's forward_auth sends it through Go's
// HTTP client, with tok as the bearer token.
func caddyCheck(host, tok string) []byte {
	return []byte("GET /check HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Authorization: Bearer " + tok + "\r\nX-Forwarded-For: 203.0.113.7\r\n" +
		"X-Forwarded-Host: shop.example\r\nX-Forwarded-Method: GET\r\nX-Forwarded-Proto: https\r\n" +
		"X-Forwarded-Uri: /orders/42\r\nAccept-Encoding: gzip\r\n\r\n")
}

// TestFrontCheckAllocs guards the allocation count of a check the front
// answers (BenchmarkFrontCheck): it fails when an allocation the front,
// the check or the decision no longer makes comes back.
func TestFrontCheckAllocs(t *testing.T) {
	idp, sc := startAllocsSidecar(t)
	check := frontCheck(t, sc, caddyCheck(sc.HTTPAddr().String(), idp.token(t, "alice", testTenant, "viewer")))
	check() // the token verified and the decision cached
	// The least of three counts leaves out what the sidecar's background
	// work allocates meanwhile (AllocsPerRun counts the whole process's).
	got := math.Inf(1)
	for range 3 {
		got = min(got, testing.AllocsPerRun(300, check))
	}
	t.Logf("%.0f allocations per check", got)
	if got > maxFrontCheckAllocs {
		t.Errorf("%.0f allocations per check the front answers, want at most %d", got, maxFrontCheckAllocs)
	}
}

// BenchmarkFrontCheck measures one check the front answers, in process
// and without the network: reading GET /check as Caddy sends it,
// deciding it (token and decision cached, audit log, rate limit) and
// writing the answer. "unwatched": no span is recorded, the default
// without an OTLP endpoint; "watched": a trace tail records every span.
func BenchmarkFrontCheck(b *testing.B) {
	idp := newTestIdP(b)
	sc := startBenchSidecar(b, idp)
	raw := caddyCheck(sc.HTTPAddr().String(), idp.token(b, "alice", testTenant, "viewer"))
	for _, watched := range []bool{false, true} {
		name := "unwatched"
		if watched {
			name = "watched"
		}
		b.Run(name, func(b *testing.B) {
			if watched {
				watchSpans(b, sc)
			}
			check := frontCheck(b, sc, raw)
			check()
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				check()
			}
		})
	}
}

// TestFrontWriteAsNetHTTP writes answers of changing header sets with
// one frontWriter, as a connection's answers are written: each answer's
// header lines must be those net/http writes (Header.Write: sorted,
// names that are not field names left out, line breaks as spaces,
// surrounding blanks trimmed), whatever the previous answer's names.
func TestFrontWriteAsNetHTTP(t *testing.T) {
	fixed := http.Header{"Date": {"Sat, 28 Nov 2026 08:00:00 GMT"}, "Content-Length": {"0"}}
	answers := []http.Header{
		{"X-Svc-User-Id": {"alice"}, "X-Svc-Roles": {"viewer"}, "Cache-Control": {"no-store"}},
		{"X-Svc-User-Id": {"bob"}, "X-Svc-Roles": {"admin"}, "Cache-Control": {"no-store"}},
		{"X-Svc-User-Id": {"bob"}, "X-Svc-Tenant-Id": {"acme"}, "Cache-Control": {"no-store"}},
		{"X-Svc-User-Id": {"bob"}, "X-Svc-Tenant-Id": {"acme"}},
		{"X-Svc-User-Id": {"bob"}, "X-Svc-Roles": {"admin"}},
		{},
		{"X-A": {" \tpadded\t "}, "X-B": {"a\r\nb", "c\rd\ne"}, "X-C": {"\r\nends\n"}, "Bad Name": {"x"}, "X-D": {""}},
		{"X-A": {" \tpadded\t "}, "X-B": {"a\r\nb", "c\rd\ne"}, "X-C": {"\r\nends\n"}, "Bad Name": {"x"}, "X-D": {""}},
		{"X-Svc-User-Id": {"carol"}},
	}
	var w frontWriter
	for i, a := range answers {
		w.reset()
		for k, vs := range a {
			w.Header()[k] = vs
		}
		for k, vs := range fixed {
			w.Header()[k] = vs
		}
		w.WriteHeader(http.StatusForbidden)
		var got bytes.Buffer
		bw := bufio.NewWriter(&got)
		if err := w.writeTo(bw, false); err != nil {
			t.Fatal(err)
		}
		_ = bw.Flush()
		want := bytes.NewBufferString("HTTP/1.1 403 Forbidden\r\n")
		all := a.Clone()
		if all == nil {
			all = http.Header{}
		}
		for k, vs := range fixed {
			all[k] = vs
		}
		_ = all.Write(want)
		want.WriteString("\r\n")
		if got.String() != want.String() {
			t.Errorf("answer %d:\nfront:\n%q\nnet/http:\n%q", i+1, got.String(), want.String())
		}
	}
}

// TestFrontWriteAllocs: writing an answer whose header has the previous
// answer's names allocates nothing.
func TestFrontWriteAllocs(t *testing.T) {
	testkit.SkipUnderRace(t)
	var w frontWriter
	bw := bufio.NewWriter(io.Discard)
	vals := map[string][]string{}
	for _, k := range []string{"Cache-Control", "X-Svc-User-Id", "X-Svc-Tenant-Id", "X-Svc-Roles", "X-Svc-Decision-Id", "X-Svc-Identity"} {
		vals[k] = []string{"value of " + k}
	}
	write := func() {
		w.reset()
		h := w.Header()
		for k, vs := range vals {
			h[k] = vs
		}
		w.WriteHeader(http.StatusOK)
		if err := w.writeTo(bw, false); err != nil {
			t.Fatal(err)
		}
		_ = bw.Flush()
	}
	write()
	if n := testing.AllocsPerRun(200, write); n != 0 {
		t.Errorf("%.1f allocations per answer, want 0", n)
	}
}
