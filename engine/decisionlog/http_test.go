package decisionlog_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/decisionlog"
	"github.com/svc-dev/svc/engine/decisionlog/spool"
	"github.com/svc-dev/svc/internal/testkit"
)

// logService is an httptest decision log service: it records the
// decision ids of every upload it acknowledges, answering status while
// it is not 0.
type logService struct {
	*httptest.Server
	status atomic.Int32
	// maxBody, when not 0, bounds an upload's (gzipped) body: a larger
	// one is answered 413, as a proxy's body limit does.
	maxBody atomic.Int64
	mu      sync.Mutex
	ids     map[string]int
	errs    []string
}

func startLogService(t *testing.T, token string) *logService {
	t.Helper()
	s := &logService{ids: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var problem string
		switch {
		case r.Method != http.MethodPost || r.URL.Path != "/v1/logs":
			problem = r.Method + " " + r.URL.Path
		case r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Content-Encoding") != "gzip":
			problem = fmt.Sprintf("headers %v", r.Header)
		case token != "" && r.Header.Get("Authorization") != "Bearer "+token:
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var recs []map[string]any
		if limit := s.maxBody.Load(); limit != 0 && problem == "" {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
			if err != nil {
				http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		if problem == "" {
			zr, err := gzip.NewReader(r.Body)
			if err == nil {
				err = json.NewDecoder(zr).Decode(&recs)
			}
			if err != nil {
				problem = "body: " + err.Error()
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if problem != "" {
			s.errs = append(s.errs, problem)
			http.Error(w, problem, http.StatusBadRequest)
			return
		}
		if st := s.status.Load(); st != 0 {
			http.Error(w, strings.Repeat("overloaded ", 100), int(st))
			return
		}
		for _, rec := range recs {
			id, _ := rec["decision_id"].(string)
			s.ids[id]++
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		s.Close()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.errs {
			t.Errorf("decision log service refused an upload: %s", e)
		}
	})
	return s
}

func (s *logService) received() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.ids))
	for k, v := range s.ids {
		out[k] = v
	}
	return out
}

// A batch is one POST <url>/logs of the gzipped JSON array of its
// records, with the bearer token.
func TestHTTPUpload(t *testing.T) {
	svc := startLogService(t, "s3cret")
	sink, err := decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: svc.URL + "/v1/", Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	batch := []decisionlog.Record{
		{DecisionID: "dec-1", Tenant: "acme", JSON: []byte(`{"decision_id":"dec-1"}`)},
		{DecisionID: "dec-2", Tenant: "acme", JSON: []byte(`{"decision_id":"dec-2"}`)},
	}
	if err := sink.Send(context.Background(), batch); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := svc.received(); len(got) != 2 || got["dec-1"] != 1 || got["dec-2"] != 1 {
		t.Fatalf("service received %v, want dec-1 and dec-2 once", got)
	}
}

// A refused upload fails the batch with the status and a bounded part
// of the answer, never the token.
func TestHTTPRefused(t *testing.T) {
	svc := startLogService(t, "s3cret")
	sink, err := decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: svc.URL + "/v1", Token: "wrong-token"})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	err = sink.Send(context.Background(), []decisionlog.Record{{DecisionID: "dec-1", JSON: []byte(`{}`)}})
	if err == nil || !strings.HasPrefix(err.Error(), "decision log http: ") || !strings.Contains(err.Error(), "401 Unauthorized") || strings.Contains(err.Error(), "wrong-token") {
		t.Fatalf("Send with a wrong token: %v, want the status without the token", err)
	}
	svc.status.Store(http.StatusServiceUnavailable)
	sink, err = decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: svc.URL + "/v1", Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	err = sink.Send(context.Background(), []decisionlog.Record{{DecisionID: "dec-1", JSON: []byte(`{}`)}})
	if err == nil || !strings.Contains(err.Error(), "503") || len(err.Error()) > 300 {
		t.Fatalf("Send to an overloaded service: %v, want the status and a short snippet", err)
	}
}

// An upload that takes too long fails at the timeout.
func TestHTTPTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		<-release
	}))
	defer srv.Close()
	defer close(release)
	sink, err := decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: srv.URL, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	start := time.Now()
	if err := sink.Send(context.Background(), []decisionlog.Record{{DecisionID: "dec-1", JSON: []byte(`{}`)}}); err == nil {
		t.Fatal("Send to a service that never answers succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Send took %s, want about the 200ms timeout", d)
	}
}

func TestHTTPBadURL(t *testing.T) {
	for _, u := range []string{"", "ftp://host/x", "https://", "kafka://b:9092"} {
		if _, err := decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: u}); err == nil || !strings.HasPrefix(err.Error(), "decision log http:") {
			t.Errorf("NewHTTP(%q) = %v, want an error", u, err)
		}
	}
}

// Batches the service refuses (503) wait in the spool and are uploaded
// again once it accepts: every decision id at least once.
func TestHTTPResend(t *testing.T) {
	svc := startLogService(t, "")
	sink, err := decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: svc.URL + "/v1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, stop := runLogger(t, sink, t.TempDir())
	logN(t, l, 0, 300)
	testkit.Eventually(t, "300 records shipped", func() bool { return l.Stats().Unsent == 0 })

	svc.status.Store(http.StatusServiceUnavailable)
	logN(t, l, 300, 200)
	testkit.Eventually(t, "the refusals seen", func() bool { st := l.Stats(); return !st.Connected && st.Retries > 0 })
	if st := l.Stats(); st.Unsent != 200 || !strings.Contains(st.LastError, "503") {
		t.Fatalf("while the service refuses: %+v, want 200 unsent and the status", st)
	}
	svc.status.Store(0)
	testkit.Eventually(t, "the refused records shipped", func() bool { return l.Stats().Unsent == 0 })
	stop()
	got := svc.received()
	for i := range 500 {
		if id := fmt.Sprintf("dec-%06d", i); got[id] == 0 {
			t.Fatalf("decision %s never reached the service", id)
		}
	}
}

// A redirect fails the batch: neither the records nor the token follow
// it.
func TestHTTPNoRedirect(t *testing.T) {
	var followed atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Store(true) }))
	defer other.Close()
	srv := httptest.NewServer(http.RedirectHandler(other.URL+"/logs", http.StatusTemporaryRedirect))
	defer srv.Close()
	sink, err := decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: srv.URL, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	err = sink.Send(context.Background(), []decisionlog.Record{{DecisionID: "dec-1", JSON: []byte(`{}`)}})
	if err == nil || !strings.Contains(err.Error(), "307") || followed.Load() {
		t.Fatalf("Send answered a redirect: %v (followed %v), want a failure without following it", err, followed.Load())
	}
}

// An https:// service is verified against RootCAs when they are set: a
// private authority's server is reached, and without its authority the
// upload fails.
func TestHTTPPrivateAuthority(t *testing.T) {
	var got atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	batch := []decisionlog.Record{{DecisionID: "dec-1", Tenant: "acme", JSON: []byte(`{"decision_id":"dec-1"}`)}}
	for _, tc := range []struct {
		name  string
		roots *x509.CertPool
		ok    bool
	}{{"with the authority", roots, true}, {"system roots", nil, false}} {
		sink, err := decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: srv.URL, RootCAs: tc.roots, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		err = sink.Send(context.Background(), batch)
		sink.Close()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Send = %v", tc.name, err)
		}
	}
	if got.Load() != 1 {
		t.Fatalf("service received %d uploads, want 1", got.Load())
	}
}

// BenchmarkHTTPSend uploads batches of 500 records shaped as the
// sidecar's (ids, trace ids, an input with headers) to a service that
// reads and discards them; cpu-ns/record is this process's CPU, the
// service's reading included.
func BenchmarkHTTPSend(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	sink, err := decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	benchSend(b, sink, 0, benchRecord)
}

// benchRecord is a decision record of about 1.2 KB as the sidecar
// writes them, with the ids and digests that differ between records.
func benchRecord(n int) decisionlog.Record {
	id := fmt.Sprintf("%016x%016x", uint64(n)*0x9e3779b97f4a7c15, uint64(n)*0xbf58476d1ce4e5b9)
	body := fmt.Sprintf(`{"decision_id":"dec-%s","time":"2026-11-28T12:%02d:%02d.%06dZ","tenant":"acme","subject":"user-%d",`+
		`"action":"orders:read","resource":"orders/%d","allowed":true,"reason":"policy-allow","policy_revision":"sha256:5f2c0e9a1b7d3c44",`+
		`"trace_id":"%s","span_id":"%s","latency_us":%d,"source":"envoy","client_ip":"10.0.%d.%d",`+
		`"input":{"subject":{"sub":"user-%d","tenant_id":"acme","roles":["viewer","editor"],"iss":"https://idp.example.com","aud":["svc"]},`+
		`"action":"orders:read","resource":{"type":"orders","id":"%d"},"request":{"method":"GET","path":"/orders/%d","host":"shop.internal",`+
		`"headers":{"accept":"application/json","user-agent":"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36","x-request-id":"%s",`+
		`"x-forwarded-for":"203.0.113.%d","content-type":"application/json"},"scheme":"https","protocol":"HTTP/2"},`+
		`"source":{"address":"10.0.%d.%d","principal":"spiffe://cluster.local/ns/shop/sa/frontend"},"tenant":"acme","token":{"kid":"k-2026-11","alg":"RS256"}}}`,
		id, n%60, n%60, n%1000000, n%1000, n, id, id[:16], 100+n%900, n%256, n%200, n%1000, n, n, id, n%256, n%256, n%200)
	return decisionlog.Record{DecisionID: "dec-" + id, Tenant: "acme", JSON: []byte(body)}
}

// Behind a body limit (a proxy's, 64 KiB here), an upload refused with
// 413 is sent again in halves; a record refused alone goes without its
// input, or is dropped when even that is refused: the records behind it
// ship.
func TestHTTPRecordsOverTheServiceLimit(t *testing.T) {
	svc := startLogService(t, "")
	svc.maxBody.Store(64 << 10)
	sink, err := decisionlog.NewHTTP(decisionlog.HTTPOptions{URL: svc.URL + "/v1", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := runLoggerWith(t, sink, decisionlog.Options{
		Spool:         spool.Options{Dir: t.TempDir(), SegmentBytes: 4 << 20},
		FlushInterval: 20 * time.Millisecond, BatchMaxRecords: 100,
	})
	noise := make([]byte, 200<<10) // incompressible
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	big := base64.StdEncoding.EncodeToString(noise)
	for i := range 300 {
		id := fmt.Sprintf("dec-%06d", i)
		rec := `{"decision_id":"` + id + `","input":{"n":` + strconv.Itoa(i) + `}}`
		switch i {
		case 100:
			rec = `{"decision_id":"` + id + `","input":{"blob":"` + big + `"}}`
		case 200:
			rec = `{"decision_id":"` + id + `","deny_reasons":["` + big + `"]}`
		}
		if err := l.Log(decisionlog.Record{DecisionID: id, Tenant: "acme", JSON: []byte(rec)}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, "every record shipped or dropped", func() bool {
		st := l.Stats()
		return st.Unsent == 0 && st.Dropped == 1
	})
	got := svc.received()
	for i := range 300 {
		if id := fmt.Sprintf("dec-%06d", i); (got[id] == 0) != (i == 200) {
			t.Errorf("decision %s received %d times", id, got[id])
		}
	}
	if n := sink.MaxRecordBytes(); n < len(big) || n > len(big)+100 {
		t.Errorf("MaxRecordBytes %d after the refused records of %d bytes and a little", n, len(big))
	}
	// Later records over the bound are refused at once: the engine logs
	// them without their input.
	if err := l.Log(decisionlog.Record{DecisionID: "dec-late", JSON: []byte(`{"input":"` + big + big + `"}`)}); !errors.Is(err, decisionlog.ErrTooLarge) {
		t.Errorf("Log of a record over the bound: %v, want ErrTooLarge", err)
	}
}
