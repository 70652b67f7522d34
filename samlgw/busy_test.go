package samlgw_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/internal/testkit/metrictest"
	"github.com/svc-dev/svc/reason"
	"github.com/svc-dev/svc/samlgw"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// gateStore is a replay store that holds every Add until it is opened or
// the request's context ends; entered receives one value per Add.
type gateStore struct {
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	ended   []error // the context errors Adds returned with
}

func newGateStore() *gateStore {
	return &gateStore{entered: make(chan struct{}, 64), open: make(chan struct{})}
}

func (s *gateStore) Add(ctx context.Context, _ string, _ time.Duration) (bool, error) {
	s.entered <- struct{}{}
	select {
	case <-s.open:
		return true, nil
	case <-ctx.Done():
		s.mu.Lock()
		s.ended = append(s.ended, ctx.Err())
		s.mu.Unlock()
		return false, ctx.Err()
	}
}

func (s *gateStore) release() { s.once.Do(func() { close(s.open) }) }

func (s *gateStore) endedWith() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.ended...)
}

func waitEntered(t *testing.T, st *gateStore, n int) {
	t.Helper()
	for range n {
		select {
		case <-st.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the ACS never reached the replay store")
		}
	}
}

// With acs_max_concurrent validations under way, one more response is
// answered at once: 503 saml-busy with Retry-After, not queued. When the
// slots free, responses are accepted again.
func TestACSBusyWhenEverySlotIsTaken(t *testing.T) {
	const slots = 2
	st := newGateStore()
	var logs testkit.SyncBuffer
	f := newFixture(t, withStore(st), withSAML(func(s *config.SAML) {
		s.AllowIDPInitiated = true
		s.ACSMaxConcurrent = slots
	}), func(_ *config.Config, d *samlgw.Deps) { d.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	t.Cleanup(st.release)
	answers := make(chan answer, slots)
	for range slots {
		doc := signed(t, valid())
		go func() { answers <- f.post(t, doc, true) }()
	}
	waitEntered(t, st, slots)

	a := f.post(t, signed(t, valid()), true)
	if a.status != http.StatusServiceUnavailable || a.code != string(reason.SAMLBusy) {
		t.Fatalf("one response over %d: %d %q %s, want 503 %q", slots, a.status, a.code, a.message, reason.SAMLBusy)
	}
	if ra := a.header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	// Answered before its body is read: a post whose body never comes
	// gets its 503 all the same.
	conn, err := net.Dial("tcp", f.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, "POST /auth/saml/acs HTTP/1.1\r\nHost: sp\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000000\r\n\r\nSAMLResponse="); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("a post without its body while busy: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a post without its body while busy: %d, want 503", resp.StatusCode)
	}
	conn.Close()
	// A flood's refusals are not a log line each.
	for range 5 {
		if a := f.post(t, signed(t, valid()), true); a.code != string(reason.SAMLBusy) {
			t.Fatalf("busy again: %d %q", a.status, a.code)
		}
	}
	if n := strings.Count(logs.String(), "reason=saml-busy"); n != 1 {
		t.Errorf("%d log lines for 7 saml-busy refusals, want 1:\n%s", n, logs.String())
	}
	st.release()
	for range slots {
		if a := <-answers; a.status != http.StatusOK {
			t.Errorf("a response holding a slot: %d %q %s", a.status, a.code, a.message)
		}
	}
	if a := f.post(t, signed(t, valid()), true); a.status != http.StatusOK {
		t.Errorf("after the slots freed: %d %q %s", a.status, a.code, a.message)
	}
}

// A client that leaves stops its validation: the work in progress sees
// its context end, and the slot it held serves the next response.
func TestACSStopsWhenTheClientLeaves(t *testing.T) {
	st := newGateStore()
	f := newFixture(t, withStore(st), withSAML(func(s *config.SAML) {
		s.AllowIDPInitiated = true
		s.ACSMaxConcurrent = 1
	}))
	t.Cleanup(st.release)
	ctx, cancel := context.WithCancel(context.Background())
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(signed(t, valid()))}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/auth/saml/acs", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitEntered(t, st, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's request: %v, want canceled", err)
	}
	// The server sees the connection close, the validation's context
	// ends and its slot frees.
	deadline := time.Now().Add(10 * time.Second)
	testkit.EventuallyWithin(t, 10*time.Second, "the validation to end after its client left", func() bool {
		return len(st.endedWith()) != 0
	})
	if errs := st.endedWith(); !errors.Is(errs[0], context.Canceled) {
		t.Errorf("the validation ended with %v, want context.Canceled", errs[0])
	}
	st.release()
	for {
		a := f.post(t, signed(t, valid()), true)
		if a.status == http.StatusOK {
			break
		}
		// The handler may still be returning from the left request.
		if a.code != string(reason.SAMLBusy) || time.Now().After(deadline) {
			t.Fatalf("after the client left: %d %q %s", a.status, a.code, a.message)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Past acs_timeout the validation stops: 503 saml-busy with Retry-After,
// and nothing is remembered of the response.
func TestACSDeadline(t *testing.T) {
	st := newGateStore()
	f := newFixture(t, withStore(st), withSAML(func(s *config.SAML) {
		s.AllowIDPInitiated = true
		s.ACSTimeout = config.Duration{Duration: 200 * time.Millisecond}
	}))
	t.Cleanup(st.release)
	a := f.post(t, signed(t, valid()), true)
	if a.status != http.StatusServiceUnavailable || a.code != string(reason.SAMLBusy) || a.header.Get("Retry-After") == "" {
		t.Fatalf("past acs_timeout: %d %q %s (Retry-After %q), want 503 %q", a.status, a.code, a.message, a.header.Get("Retry-After"), reason.SAMLBusy)
	}
	if errs := st.endedWith(); len(errs) != 1 || !errors.Is(errs[0], context.DeadlineExceeded) {
		t.Errorf("the store saw %v, want one context.DeadlineExceeded", errs)
	}
}

// The hostile body of the review: 1 MiB of form, nested elements under a
// Response, is refused saml-too-complex (the CPU it costs is measured in
// TestACSRefusesComplexDocumentsCheaply).
func TestACSRefusesNestedBody(t *testing.T) {
	f := newFixture(t, withSAML(allowIDPInitiated))
	body := nestedBody(samlgw.MaxBodyBytes)
	if len(body) > samlgw.MaxBodyBytes || len(body) < samlgw.MaxBodyBytes-1024 {
		t.Fatalf("body of %d bytes, want just under %d", len(body), samlgw.MaxBodyBytes)
	}
	a := f.postBody(t, body, true)
	if a.status != http.StatusBadRequest || a.code != string(reason.SAMLTooComplex) {
		t.Fatalf("nested body: %d %q %s, want 400 %q", a.status, a.code, a.message, reason.SAMLTooComplex)
	}
}

// nestedBody is a form body of at most size bytes whose SAMLResponse is
// a Response of elements nested as deep as the size allows.
func nestedBody(size int) string {
	const open, closeTag = "<a>", "</a>"
	head := `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" ID="r" Version="2.0">`
	tail := "</samlp:Response>"
	n := (size/4*3 - len(head) - len(tail)) / (len(open) + len(closeTag))
	for {
		doc := head + strings.Repeat(open, n) + strings.Repeat(closeTag, n) + tail
		body := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString([]byte(doc))}}.Encode()
		if len(body) <= size {
			return body
		}
		n -= (len(body)-size)/10 + 1
	}
}

// postFrom posts doc to f's ACS as a JSON client through a proxy at
// 127.0.0.1 that names the client realIP, with the cookies given.
func postFrom(t *testing.T, f *fixture, doc []byte, realIP string, cookies ...*http.Cookie) answer {
	t.Helper()
	form := url.Values{"SAMLResponse": {base64.StdEncoding.EncodeToString(doc)}}
	req := f.acsRequest(t, form.Encode(), "application/json")
	req.Header.Set("X-Real-IP", realIP)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	a := answer{status: resp.StatusCode, header: resp.Header}
	a.code, _ = m["error"].(string)
	a.message, _ = m["message"].(string)
	return a
}

// busyCounts returns svc.saml.acs.busy by "reason/lane".
func busyCounts(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	return metrictest.Values(metrictest.Collect(t, reader), "svc.saml.acs.busy", "reason", "lane")
}

// Behind a trusted proxy each client named in X-Real-IP is a client of
// its own, and the two lanes have their own slots: while one client's
// sign-on holds the small lane's only slot and another's large document
// the large lane's, a third client's large document is refused saml-busy
// at once (lane-full), with or without a request cookie the gateway did
// not set, and counted so; a fourth client's sign-on waits for the slot
// and completes.
func TestACSLanesAndClientsBehindAProxy(t *testing.T) {
	st := newGateStore()
	reader := sdkmetric.NewManualReader()
	f := newFixture(t, withStore(st), withSAML(func(s *config.SAML) {
		s.AllowIDPInitiated = true
		s.ACSMaxConcurrent = 1
	}), func(c *config.Config, d *samlgw.Deps) {
		c.Sidecar.TrustedProxies = []string{"127.0.0.1"}
		d.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	})
	t.Cleanup(st.release)
	// Over SmallResponseBytes: the large lane.
	large := func() []byte {
		r := valid()
		r.Attributes = append(r.Attributes, testidp.Attribute{Name: "padding", Values: []string{strings.Repeat("p", samlgw.SmallResponseBytes)}})
		return signed(t, r)
	}
	answers := make(chan answer, 3)
	small, big := signed(t, valid()), large()
	go func() { answers <- postFrom(t, f, small, "198.51.100.1") }()
	go func() { answers <- postFrom(t, f, big, "198.51.100.2") }()
	waitEntered(t, st, 2)

	forged := &http.Cookie{Name: f.gw.CookieName() + samlgw.RequestCookieSuffix, Value: "id-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}
	for name, cookies := range map[string][]*http.Cookie{"no cookie": nil, "a forged request cookie": {forged}} {
		if a := postFrom(t, f, large(), "198.51.100.3", cookies...); a.status != http.StatusServiceUnavailable || a.code != string(reason.SAMLBusy) {
			t.Errorf("a large document with %s while the large slot is held: %d %q %s, want 503 %q", name, a.status, a.code, a.message, reason.SAMLBusy)
		}
	}
	waiting := signed(t, valid())
	go func() { answers <- postFrom(t, f, waiting, "198.51.100.4") }()
	st.release()
	for range 3 {
		if a := <-answers; a.status != http.StatusOK {
			t.Errorf("an admitted sign-on: %d %q %s", a.status, a.code, a.message)
		}
	}
	if got := busyCounts(t, reader); got["lane-full/large"] != 2 || len(got) != 1 {
		t.Errorf("svc.saml.acs.busy = %v, want lane-full/large: 2", got)
	}
}

// A post that names its client in X-Real-IP from a peer that
// sidecar.trusted_proxies does not list is logged once: a proxy the
// operator forgot to list would have every user share its budget.
func TestACSLogsAnUnlistedProxyOnce(t *testing.T) {
	var logs testkit.SyncBuffer
	f := newFixture(t, withSAML(allowIDPInitiated), func(_ *config.Config, d *samlgw.Deps) {
		d.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	for range 3 {
		if a := postFrom(t, f, signed(t, valid()), "198.51.100.7"); a.status != http.StatusOK {
			t.Fatalf("a sign-on through an unlisted proxy: %d %q %s", a.status, a.code, a.message)
		}
	}
	if n := strings.Count(logs.String(), "sidecar.trusted_proxies does not list"); n != 1 {
		t.Errorf("%d log lines about the unlisted proxy for 3 posts, want 1:\n%s", n, logs.String())
	}
}
