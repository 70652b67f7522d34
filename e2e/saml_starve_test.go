package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svc-dev/svc/internal/harness"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/samlgw/testidp"
)

// starveDoc is the attacker's document of the ACS starvation: boundsDoc
// (about 9,900 elements under a forged Response signature) with its
// attribute values grown so that the form is about size bytes. It stays
// inside every bound of the ACS, so each post is validated (tens of ms of
// CPU) before its signature is refused.
func starveDoc(g samlTarget, size int) []byte {
	doc := boundsDoc(g)
	n := strings.Count(string(doc), ` b="1"`)
	grow := (size*3/4 - len(doc)) / n
	return bytes.ReplaceAll(doc, []byte(` b="1"`), []byte(` b="`+strings.Repeat("1", 1+max(0, grow))+`"`))
}

// clientFrom is a browser whose connections leave from the loopback
// address ip (any of 127/8 on Linux): another client to the sidecar. It
// keeps cookies and follows no redirect.
func clientFrom(t testing.TB, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	probe, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		harness.Missing(t, "the local address "+ip, "Linux answers on the whole of 127.0.0.0/8; elsewhere add "+ip+" to the loopback interface")
	}
	if err != nil {
		t.Fatal(err)
	}
	probe.Close()
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 2}
	t.Cleanup(tr.CloseIdleConnections)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr, Jar: jar, Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// signIn signs in at g from c as a browser does, SP-initiated: login
// (which sets the request cookie), the IdP's signed answer to that
// request, posted with the cookie. It returns the ACS answer.
func (g samlTarget) signIn(t *testing.T, c *http.Client, extra http.Header) (acsAnswer, error) {
	t.Helper()
	resp, err := c.Get("http://" + g.samlAddr + "/auth/saml/login?return_to=/app")
	if err != nil {
		return acsAnswer{}, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return acsAnswer{status: resp.StatusCode}, nil
	}
	r := g.response()
	r.InResponseTo = requestIDOf(t, resp.Header.Get("Location"))
	return g.postSigned(t, c, r, extra)
}

// signInIdPInitiated posts an IdP-initiated response from c: no request
// cookie.
func (g samlTarget) signInIdPInitiated(t *testing.T, c *http.Client, extra http.Header) (acsAnswer, error) {
	t.Helper()
	return g.postSigned(t, c, g.response(), extra)
}

// postSigned posts r, signed by g's IdP, to g's ACS from c with the extra
// headers.
func (g samlTarget) postSigned(t *testing.T, c *http.Client, r testidp.Response, extra http.Header) (acsAnswer, error) {
	t.Helper()
	return postAs(c, g.acsURL(), formOf(g.signed(t, r)), extra)
}

// signedIn reports whether a is the ACS's token answer.
func signedIn(a acsAnswer) bool {
	var tok tokenAnswerJSON
	return a.status == http.StatusOK && json.Unmarshal(a.body, &tok) == nil && tok.Token != ""
}

// flood posts body to g's ACS from c in workers concurrent loops, each
// post after the answer to the last, until ctx ends; it counts the
// answers by kind.
type flood struct {
	validated, busy, failed atomic.Int64
	firstOther              atomic.Value
}

func (f *flood) run(ctx context.Context, wg *sync.WaitGroup, c *http.Client, acs, body string, workers int, header func(n int) http.Header) {
	for w := range workers {
		wg.Go(func() {
			for n := w; ctx.Err() == nil; n += workers {
				var h http.Header
				if header != nil {
					h = header(n)
				}
				a, err := postAs(c, acs, body, h)
				switch {
				case err != nil:
					// The ACS answers 503 before reading the body and closes
					// the connection: the client may see the close first.
					f.failed.Add(1)
				case a.status == http.StatusServiceUnavailable && bytes.Contains(a.body, []byte(`"saml-busy"`)) && a.retryAfter != "":
					f.busy.Add(1)
				case a.status == http.StatusUnauthorized && bytes.Contains(a.body, []byte(`"saml-signature-invalid"`)):
					f.validated.Add(1)
				default:
					f.firstOther.CompareAndSwap(nil, a.String())
				}
			}
		})
	}
}

// startFlood runs a flood of body from c against acs in workers loops and
// waits until it is answered saml-busy (what says so); stop ends the
// flood and waits for its loops, as the test's end does at the latest.
func startFlood(t *testing.T, c *http.Client, acs, body string, workers int, header func(n int) http.Header, what string) (f *flood, stop func()) {
	t.Helper()
	f = &flood{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	f.run(ctx, &wg, c, acs, body, workers, header)
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	testkit.Eventually(t, what, func() bool { return f.busy.Load() > 0 })
	return f, stop
}

// busyMetric returns svc_saml_acs_busy_total of s by "reason/lane".
func busyMetric(t *testing.T, s *harness.Sidecar) map[string]float64 {
	t.Helper()
	status, h, body := harness.Get(t, s.URL("/metrics"))
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %s", harness.Describe(status, h, body))
	}
	out := map[string]float64{}
	line := regexp.MustCompile(`(?m)^svc_saml_acs_busy_total\{([^}]*)\} (\S+)$`)
	label := regexp.MustCompile(`(\w+)="([^"]*)"`)
	for _, m := range line.FindAllStringSubmatch(string(body), -1) {
		labels := map[string]string{}
		for _, l := range label.FindAllStringSubmatch(m[1], -1) {
			labels[l[1]] = l[2]
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("/metrics: %q", m[0])
		}
		out[labels["reason"]+"/"+labels["lane"]] += v
	}
	return out
}

// TestSAMLACSOneClientCannotStarveSignIns is the starvation attack on a
// running sidecar: one client (127.0.0.1) posts, in three loops each
// waiting for its answer, a 650 KB document that passes every bound of
// the ACS and costs tens of ms of CPU to refuse. Meanwhile browsers at
// other addresses sign in as browsers do, SP-initiated (with the request
// cookie of their login) and IdP-initiated (without): at least 90 % of
// their sign-ins get a session token. With one work budget for the whole
// ACS, none did. The flooder's own posts are answered saml-busy, counted
// by bound in svc_saml_acs_busy_total.
func TestSAMLACSOneClientCannotStarveSignIns(t *testing.T) {
	t.Parallel()
	g := startSAMLTarget(t, nil)
	body := formOf(starveDoc(g, 650_000))
	if n := len(body); n < 600_000 || n > 700_000 {
		t.Fatalf("the flood's form is %d bytes, want about 650 KB", n)
	}
	attacker := clientFrom(t, "127.0.0.1")
	if a, err := postAs(attacker, g.acsURL(), body, nil); err != nil || a.status != http.StatusUnauthorized || !bytes.Contains(a.body, []byte(`"saml-signature-invalid"`)) {
		t.Fatalf("one flood document: %v %v, want 401 saml-signature-invalid (validated, inside the bounds)", a, err)
	}

	f, stop := startFlood(t, attacker, g.acsURL(), body, 3, nil, "the flooder answered saml-busy")
	defer stop()

	// Browsers, each at an address of its own, sign in: at least 30
	// SP-initiated (127.0.2.x, with the request cookie of their login)
	// and 30 IdP-initiated (127.0.3.x, without), and on until the flood
	// has had another document validated meanwhile (its client's budget
	// grows back every few seconds), so that the sign-ins span the
	// flood's work, not only the lull after its first document. Each
	// kind signs in ten times a second.
	const attempts, most, signInGap = 30, 240, 100 * time.Millisecond
	floodBefore := f.validated.Load()
	type result struct {
		ok, tried int
		last      string
	}
	results := map[string]*result{}
	var sw sync.WaitGroup
	start := time.Now()
	for _, c := range []struct {
		kind string
		net  int
	}{{"SP-initiated", 2}, {"IdP-initiated", 3}} {
		r := &result{}
		results[c.kind] = r
		sw.Go(func() {
			// Browsers arrive as people do, a few a second: the small
			// lane's own budget (about 25 to 100 sign-ons a second per
			// slot) is not what this test measures.
			arrivals := time.NewTicker(signInGap)
			defer arrivals.Stop()
			for r.tried < attempts || (f.validated.Load() <= floodBefore && r.tried < most) {
				<-arrivals.C
				browser := clientFrom(t, fmt.Sprintf("127.0.%d.%d", c.net, 1+r.tried))
				r.tried++
				var a acsAnswer
				var err error
				if c.kind == "SP-initiated" {
					a, err = g.signIn(t, browser, nil)
				} else {
					a, err = g.signInIdPInitiated(t, browser, nil)
				}
				if err == nil && signedIn(a) {
					r.ok++
				} else {
					r.last = fmt.Sprintf("%v %v", a, err)
				}
			}
		})
	}
	sw.Wait()
	took := time.Since(start)
	stop()

	for kind, r := range results {
		t.Logf("%s: %d of %d sign-ins completed", kind, r.ok, r.tried)
		if r.ok*10 < r.tried*9 {
			t.Errorf("%s: %d of %d sign-ins completed during the flood, want at least 90 %%; last failure %s", kind, r.ok, r.tried, r.last)
		}
	}
	t.Logf("flood from 127.0.0.1 for %s: %d validated, %d saml-busy, %d closed before the answer",
		took.Round(time.Millisecond), f.validated.Load(), f.busy.Load(), f.failed.Load())
	if other := f.firstOther.Load(); other != nil {
		t.Errorf("an ACS answer to the flood neither saml-busy nor saml-signature-invalid: %v", other)
	}
	m := busyMetric(t, g.s)
	t.Logf("svc_saml_acs_busy_total: %v", m)
	if m["client-budget/large"]+m["client-busy/large"] == 0 {
		t.Errorf("svc_saml_acs_busy_total counts no client-budget or client-busy refusal in the large lane: %v", m)
	}
}

// TestSAMLACSTrustedProxiesNameTheClient: X-Real-IP and X-Forwarded-For
// name the client only from a peer in sidecar.trusted_proxies. A flooder
// at 127.0.0.1 posting under a new X-Real-IP each time is one client all
// the same, refused by its own budget (client-budget) and never by the
// lane's (as many fresh clients would be); its own sign-on, under yet
// another name, is refused too. From the trusted proxy 127.0.0.5 the
// header is honoured: a sign-on named as a new client completes, one
// named as the flooder (X-Real-IP, or the last X-Forwarded-For hop) is
// refused with it.
func TestSAMLACSTrustedProxiesNameTheClient(t *testing.T) {
	t.Parallel()
	g := startSAMLTarget(t, map[string]string{"SVC_TRUSTED_PROXIES": "127.0.0.5"})
	body := formOf(starveDoc(g, 650_000))
	attacker, proxy := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.5")
	posing := func(n int) http.Header { return http.Header{"X-Real-Ip": {fmt.Sprintf("10.9.%d.%d", n/250, n%250+1)}} }

	f, stop := startFlood(t, attacker, g.acsURL(), body, 1, posing, "the flooder answered saml-busy")
	defer stop()

	// refusedOnce signs in up to five times and reports whether one was
	// refused saml-busy: the flooder's budget grows back now and then,
	// for as long as its next document takes.
	refusedOnce := func(c *http.Client, h http.Header) (bool, string) {
		var seen []string
		for range 5 {
			a, err := g.signInIdPInitiated(t, c, h)
			if err != nil {
				t.Fatal(err)
			}
			if a.status == http.StatusServiceUnavailable && bytes.Contains(a.body, []byte(`"saml-busy"`)) {
				return true, ""
			}
			seen = append(seen, a.String())
		}
		return false, strings.Join(seen, "; ")
	}
	if ok, seen := refusedOnce(attacker, http.Header{"X-Real-Ip": {"10.1.1.1"}}); !ok {
		t.Errorf("the flooder's peer naming itself 10.1.1.1 in X-Real-IP signed in every time (%s): the header of an untrusted peer was honoured", seen)
	}
	if a, err := g.signInIdPInitiated(t, proxy, http.Header{"X-Real-Ip": {"10.1.1.1"}}); err != nil || !signedIn(a) {
		t.Errorf("the trusted proxy naming a new client: %v %v, want a token", a, err)
	}
	if a, err := g.signInIdPInitiated(t, proxy, http.Header{"X-Forwarded-For": {"127.0.0.1, 10.2.2.2"}}); err != nil || !signedIn(a) {
		t.Errorf("the trusted proxy with a new client as the last X-Forwarded-For hop: %v %v, want a token", a, err)
	}
	for name, h := range map[string]http.Header{
		"X-Real-IP":                    {"X-Real-Ip": {"127.0.0.1"}},
		"the last X-Forwarded-For hop": {"X-Forwarded-For": {"10.3.3.3, 127.0.0.1"}},
	} {
		if ok, seen := refusedOnce(proxy, h); !ok {
			t.Errorf("the trusted proxy naming the flooder in %s signed in every time (%s), want it refused with the flooder", name, seen)
		}
	}
	stop()
	m := busyMetric(t, g.s)
	t.Logf("flood: %d validated, %d saml-busy; svc_saml_acs_busy_total %v", f.validated.Load(), f.busy.Load(), m)
	if m["client-budget/large"] == 0 || m["lane-budget/large"] != 0 {
		t.Errorf("svc_saml_acs_busy_total %v: want client-budget refusals in the large lane and no lane-budget ones (the flood is one client)", m)
	}
}

// TestSAMLACSBehindShippedProxies runs the starvation attack through the
// shipped nginx and Caddy configs, the sidecar trusting them (they reach
// it from 127.0.0.1): each names the client in X-Real-IP, so the flooder
// at 127.0.0.1 spends its own budget and browsers at other addresses
// still sign in. Without the header every post would come from the
// proxy's address, one client, and the flood would spend everyone's.
func TestSAMLACSBehindShippedProxies(t *testing.T) {
	t.Parallel()
	g := startSAMLTarget(t, map[string]string{"SVC_TRUSTED_PROXIES": "127.0.0.1"})
	body := formOf(starveDoc(g, 650_000))
	root := harness.ModuleRoot(t)
	for _, px := range shippedProxies {
		t.Run(px.name, func(t *testing.T) {
			front := startShippedProxy(t, px.bin, filepath.Join(root, px.file), px.args, map[string]string{"127.0.0.1:7701": g.samlAddr})
			acs := front + "/auth/saml/acs"
			f, stop := startFlood(t, clientFrom(t, "127.0.0.1"), acs, body, 3, nil, "the flooder answered saml-busy through "+px.name)
			defer stop()

			const attempts = 30
			ok, last := 0, ""
			for i := range attempts {
				a, err := postAs(clientFrom(t, fmt.Sprintf("127.0.4.%d", 1+i)), acs, formOf(g.signed(t, g.response())), nil)
				if err == nil && signedIn(a) {
					ok++
				} else {
					last = fmt.Sprintf("%v %v", a, err)
				}
			}
			stop()
			t.Logf("through %s: %d of %d sign-ins completed; flood %d validated, %d saml-busy", px.name, ok, attempts, f.validated.Load(), f.busy.Load())
			if ok*10 < attempts*9 {
				t.Errorf("through %s: %d of %d sign-ins completed during the flood, want at least 90 %%; last failure %s", px.name, ok, attempts, last)
			}
			if other := f.firstOther.Load(); other != nil {
				t.Errorf("an answer to the flood through %s neither saml-busy nor saml-signature-invalid: %v", px.name, other)
			}
		})
	}
}
