package samlgw

import (
	"context"
	"errors"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/svc-dev/svc/engine/config"
	"github.com/svc-dev/svc/internal/testkit"
	"github.com/svc-dev/svc/reason"
)

// gateUnderTest is an ACS gate on a clock of its own whose validations
// take the work the test says, with done functions to end them.
type gateUnderTest struct {
	*acsGate
	clock time.Time
	cost  time.Duration // the work the next validations take
}

func newGateUnderTest(t *testing.T, slots int) *gateUnderTest {
	t.Helper()
	g := &gateUnderTest{clock: time.Unix(1_700_000_000, 0)}
	g.acsGate = newACSGate(config.SAML{ACSMaxConcurrent: slots, ACSTimeout: config.Duration{Duration: 5 * time.Second}},
		func() time.Time { return g.clock })
	g.acsGate.measure = func() func() time.Duration {
		cost := g.cost
		return func() time.Duration { return cost }
	}
	g.acsGate.wait = 50 * time.Millisecond
	return g
}

// validate admits p, charges cost and ends it; it returns the refusal.
func (g *gateUnderTest) validate(p post, cost time.Duration) error {
	g.cost = cost
	_, done, err := g.enter(context.Background(), p)
	if err == nil {
		done()
	}
	return err
}

// hold admits p and leaves it validating; done ends it.
func (g *gateUnderTest) hold(t *testing.T, p post) (done func()) {
	t.Helper()
	_, done, err := g.enter(context.Background(), p)
	if err != nil {
		t.Fatalf("hold %+v: %v", p, err)
	}
	return done
}

func client(s string) netip.Prefix { return clientPrefix(netip.MustParseAddr(s)) }

var (
	flooder = post{client: client("192.0.2.1"), lane: largeLane}
	signOn  = post{client: client("198.51.100.7"), lane: smallLane}
	cookied = post{client: client("198.51.100.8"), lane: smallLane, priority: true}
)

// reasonOf returns the bound that refused err ("" for nil).
func reasonOf(t *testing.T, err error) busyReason {
	t.Helper()
	if err == nil {
		return ""
	}
	var be *busyError
	if CodeOf(err) != reason.SAMLBusy || !errors.As(err, &be) {
		t.Fatalf("refusal %v is not saml-busy with its bound", err)
	}
	return be.reason
}

// TestACSAdmission: which bound admits or refuses a post, after what
// others did. Every case starts from a quiet gate with one slot per lane
// (the default on two CPUs) unless it says otherwise.
func TestACSAdmission(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, g *gateUnderTest) (cleanup func())
		post  post
		want  busyReason
	}{
		{"a quiet gate admits a sign-on", nil, signOn, ""},
		{"a quiet gate admits a large document", nil, flooder, ""},
		{
			"a client that spent its budget is refused", func(t *testing.T, g *gateUnderTest) func() {
				spendClient(t, g, flooder)
				return nil
			}, flooder, reasonClientBudget,
		},
		{
			"its small posts too", func(t *testing.T, g *gateUnderTest) func() {
				spendClient(t, g, flooder)
				return nil
			}, post{client: flooder.client, lane: smallLane, priority: true}, reasonClientBudget,
		},
		{
			"another client is not", func(t *testing.T, g *gateUnderTest) func() {
				spendClient(t, g, flooder)
				return nil
			}, signOn, "",
		},
		{
			"a spent client is admitted again once its credit grows back", func(t *testing.T, g *gateUnderTest) func() {
				spendClient(t, g, flooder)
				g.clock = g.clock.Add(time.Duration(float64(90*time.Millisecond)/clientShare) + time.Millisecond)
				return nil
			}, flooder, "",
		},
		{
			"an IPv6 client is its /64", func(t *testing.T, g *gateUnderTest) func() {
				spendClient(t, g, post{client: client("2001:db8:1:2::1"), lane: largeLane})
				return nil
			}, post{client: client("2001:db8:1:2:ffff::9"), lane: largeLane}, reasonClientBudget,
		},
		{
			"another /64 is another client", func(t *testing.T, g *gateUnderTest) func() {
				spendClient(t, g, post{client: client("2001:db8:1:2::1"), lane: largeLane})
				return nil
			}, post{client: client("2001:db8:1:3::1"), lane: largeLane}, "",
		},
		{
			"one large document of a client at a time", func(t *testing.T, g *gateUnderTest) func() {
				return g.hold(t, flooder)
			}, flooder, reasonClientBusy,
		},
		{
			"a client has two posts under way at most", func(t *testing.T, g *gateUnderTest) func() {
				g.lanes[smallLane].slots = 4
				a := g.hold(t, signOn)
				b := g.hold(t, post{client: signOn.client, lane: smallLane, priority: true})
				return func() { a(); b() }
			}, post{client: signOn.client, lane: smallLane, priority: true}, reasonClientBusy,
		},
		{
			"large documents of many clients spend the large lane", func(t *testing.T, g *gateUnderTest) func() {
				spendLane(t, g, largeLane)
				return nil
			}, post{client: client("203.0.113.200"), lane: largeLane}, reasonLaneBudget,
		},
		{
			"not the small lane", func(t *testing.T, g *gateUnderTest) func() {
				spendLane(t, g, largeLane)
				return nil
			}, signOn, "",
		},
		{
			"a large document in the slot leaves the small lane's free", func(t *testing.T, g *gateUnderTest) func() {
				return g.hold(t, flooder)
			}, signOn, "",
		},
		{
			"a small lane spent to its reserve refuses posts without a cookie", func(t *testing.T, g *gateUnderTest) func() {
				spendReserve(t, g)
				return nil
			}, signOn, reasonLaneBudget,
		},
		{
			"and admits those with a genuine one", func(t *testing.T, g *gateUnderTest) func() {
				spendReserve(t, g)
				return nil
			}, cookied, "",
		},
		{
			"a full large lane refuses a document without a cookie at once", func(t *testing.T, g *gateUnderTest) func() {
				return g.hold(t, post{client: client("203.0.113.1"), lane: largeLane})
			}, flooder, reasonLaneFull,
		},
		{
			"a document with one waits for the slot", func(t *testing.T, g *gateUnderTest) func() {
				done := g.hold(t, post{client: client("203.0.113.1"), lane: largeLane})
				time.AfterFunc(10*time.Millisecond, done)
				return nil
			}, post{client: client("203.0.113.2"), lane: largeLane, priority: true}, "",
		},
		{
			"a full small lane makes a sign-on wait for the slot", func(t *testing.T, g *gateUnderTest) func() {
				done := g.hold(t, post{client: client("203.0.113.1"), lane: smallLane})
				time.AfterFunc(10*time.Millisecond, done)
				return nil
			}, signOn, "",
		},
		{
			"but not for ever", func(t *testing.T, g *gateUnderTest) func() {
				return g.hold(t, post{client: client("203.0.113.1"), lane: smallLane})
			}, signOn, reasonLaneFull,
		},
		{
			"nor in a queue that is full", func(t *testing.T, g *gateUnderTest) func() {
				done := g.hold(t, post{client: client("203.0.113.1"), lane: smallLane})
				g.mu.Lock()
				for range maxWaitingPerSlot {
					g.lanes[smallLane].queues[1] = append(g.lanes[smallLane].queues[1], &slotWaiter{granted: make(chan struct{})})
				}
				g.mu.Unlock()
				return func() {
					g.mu.Lock()
					g.lanes[smallLane].queues[1] = nil
					g.mu.Unlock()
					done()
				}
			}, signOn, reasonLaneFull,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateUnderTest(t, 1)
			if tt.setup != nil {
				if cleanup := tt.setup(t, g); cleanup != nil {
					defer cleanup()
				}
			}
			// A post that may wait for a slot is not refused before its
			// body is read for want of one.
			if got := reasonOf(t, g.vacancy(tt.post)); got != tt.want && !(mayWait(tt.post) && got == "" && tt.want == reasonLaneFull) {
				t.Errorf("vacancy: %q, want %q", got, tt.want)
			}
			if got := reasonOf(t, g.validate(tt.post, time.Millisecond)); got != tt.want {
				t.Errorf("enter: %q, want %q", got, tt.want)
			}
		})
	}
}

// TestACSCookieGoesFirst: a slot freed while posts wait goes to the one
// with a genuine request cookie, though the other came first.
func TestACSCookieGoesFirst(t *testing.T) {
	g := newGateUnderTest(t, 1)
	g.acsGate.wait = 10 * time.Second
	done := g.hold(t, post{client: client("203.0.113.1"), lane: smallLane})
	type entered struct {
		done func()
		err  error
	}
	enter := func(p post) chan entered {
		ch := make(chan entered, 1)
		go func() {
			_, done, err := g.enter(context.Background(), p)
			ch <- entered{done, err}
		}()
		return ch
	}
	queued := func(q, n int) func() bool {
		return func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.lanes[smallLane].queues[q]) == n }
	}
	first := enter(signOn)
	testkit.Eventually(t, "one sign-on queued", queued(1, 1))
	second := enter(cookied)
	testkit.Eventually(t, "the queue drained", queued(0, 1))
	done()
	e := <-second
	if e.err != nil {
		t.Fatalf("the post with a cookie: %v", e.err)
	}
	select {
	case f := <-first:
		t.Fatalf("the post without a cookie took the slot first (%v)", f.err)
	default:
	}
	e.done()
	if f := <-first; f.err != nil {
		t.Fatalf("the post without a cookie, once the slot freed again: %v", f.err)
	} else {
		f.done()
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if l := g.lanes[smallLane]; l.used != 0 || len(l.queues[0])+len(l.queues[1]) != 0 {
		t.Errorf("after every post: %d slots used, queues %d and %d", l.used, len(l.queues[0]), len(l.queues[1]))
	}
}

// spendClient spends p's client's budget with costly documents.
func spendClient(t *testing.T, g *gateUnderTest, p post) {
	t.Helper()
	for range 10 {
		if err := g.validate(p, 90*time.Millisecond); err != nil {
			if reasonOf(t, err) != reasonClientBudget {
				t.Fatalf("spending %v's budget: %v", p.client, err)
			}
			return
		}
	}
	t.Fatalf("%v posted 900 ms of work and is still admitted", p.client)
}

// spendLane spends lane l's budget with costly documents of many
// clients, none over its own budget.
func spendLane(t *testing.T, g *gateUnderTest, l lane) {
	t.Helper()
	for i := range 100 {
		p := post{client: client(netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}).String()), lane: l}
		if err := g.validate(p, 60*time.Millisecond); err != nil {
			if reasonOf(t, err) != reasonLaneBudget {
				t.Fatalf("spending the %s lane: %v", l, err)
			}
			return
		}
	}
	t.Fatalf("the %s lane admitted 6 s of work at once", l)
}

// spendReserve spends the small lane down to its reserve with sign-ons
// of many clients without a cookie.
func spendReserve(t *testing.T, g *gateUnderTest) {
	t.Helper()
	spendLane(t, g, smallLane)
	if err := g.validate(post{client: client("203.0.113.250"), lane: smallLane, priority: true}, 0); err != nil {
		t.Fatalf("the reserve is spent too: %v", err)
	}
}

// TestACSOneClientCannotStarveOthers: one client posting costly large
// documents as fast as it is answered, for a minute of the gate's clock,
// takes at most its own share of the CPU, and every sign-on of other
// clients meanwhile is admitted.
func TestACSOneClientCannotStarveOthers(t *testing.T) {
	g := newGateUnderTest(t, 1)
	var flood time.Duration
	refused := 0
	start := g.clock
	for i := range 60_000 {
		g.clock = g.clock.Add(time.Millisecond)
		if err := g.validate(flooder, 80*time.Millisecond); err == nil {
			flood += 80 * time.Millisecond
		}
		if i%100 == 0 {
			p := post{client: client(netip.AddrFrom4([4]byte{198, 51, 100, byte(i / 100 % 250)}).String()), lane: smallLane}
			if err := g.validate(p, 500*time.Microsecond); err != nil {
				refused++
			}
		}
	}
	if share, most := flood.Seconds()/g.clock.Sub(start).Seconds(), clientShare*1.1+clientBurst.Seconds()/60; share > most {
		t.Errorf("the flooder got %.3f of a CPU, want at most %.3f", share, most)
	}
	if refused != 0 {
		t.Errorf("%d of 600 sign-ons of other clients refused", refused)
	}
}

// TestClientTableIsBounded: many addresses do not grow the table past
// maxClients, and a client in debt outlives the whole ones around it.
func TestClientTableIsBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tab := newClientTable(100)
	debtor := tab.get(client("192.0.2.1"), now)
	debtor.budget.spend(now, time.Second)
	for i := range 10_000 {
		tab.get(client(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()), now)
		if tab.len() > 100 {
			t.Fatalf("%d clients remembered, want at most 100", tab.len())
		}
	}
	if c := tab.get(client("192.0.2.1"), now); c.budget.above(now, 0) {
		t.Error("the client in debt was forgotten and came back with a whole burst")
	}
}

// TestClientOf: the client of a post is its peer, or the client a listed
// proxy names.
func TestClientOf(t *testing.T) {
	trusted, err := config.ParseTrustedProxies([]string{"127.0.0.5", "10.0.0.0/8", "fd00::/8"})
	if err != nil {
		t.Fatal(err)
	}
	n := clientNamer{trusted: trusted}
	tests := []struct {
		name        string
		peer        string
		headers     map[string][]string
		want        string
		wantIgnored bool
	}{
		{"the peer", "192.0.2.1:4000", nil, "192.0.2.1/32", false},
		{"an IPv6 peer by its /64", "[2001:db8:1:2:3:4:5:6]:4000", nil, "2001:db8:1:2::/64", false},
		{"an IPv4-mapped peer as IPv4", "[::ffff:192.0.2.1]:4000", nil, "192.0.2.1/32", false},
		{"X-Real-IP of an unlisted peer is ignored", "127.0.0.1:4000", map[string][]string{"X-Real-Ip": {"198.51.100.7"}}, "127.0.0.1/32", true},
		{"X-Forwarded-For of an unlisted peer is ignored", "192.0.2.1:4000", map[string][]string{"X-Forwarded-For": {"198.51.100.7"}}, "192.0.2.1/32", true},
		{"X-Real-IP of a listed proxy", "127.0.0.5:4000", map[string][]string{"X-Real-Ip": {"198.51.100.7"}}, "198.51.100.7/32", false},
		{"X-Real-IP over X-Forwarded-For", "10.1.2.3:4000", map[string][]string{"X-Real-Ip": {"198.51.100.7"}, "X-Forwarded-For": {"203.0.113.9"}}, "198.51.100.7/32", false},
		{"the last X-Forwarded-For hop", "10.1.2.3:4000", map[string][]string{"X-Forwarded-For": {"1.1.1.1, 2.2.2.2", "203.0.113.9"}}, "203.0.113.9/32", false},
		{"the last hop of one line", "10.1.2.3:4000", map[string][]string{"X-Forwarded-For": {"1.1.1.1, 203.0.113.9"}}, "203.0.113.9/32", false},
		{"a hop with a port", "10.1.2.3:4000", map[string][]string{"X-Forwarded-For": {"[2001:db8::1]:443"}}, "2001:db8::/64", false},
		{"an unreadable X-Real-IP falls back to X-Forwarded-For", "10.1.2.3:4000", map[string][]string{"X-Real-Ip": {"unknown"}, "X-Forwarded-For": {"203.0.113.9"}}, "203.0.113.9/32", false},
		{"nothing readable: the proxy", "[fd00::1]:4000", map[string][]string{"X-Forwarded-For": {"unknown"}}, "fd00::/64", false},
		{"a peer without an address", "@", nil, "invalid Prefix", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/auth/saml/acs", nil)
			r.RemoteAddr = tt.peer
			for k, vs := range tt.headers {
				r.Header[k] = vs
			}
			got, ignored := n.clientOf(r)
			if got.String() != tt.want || ignored != tt.wantIgnored {
				t.Errorf("clientOf = %s, ignored %v; want %s, %v", got, ignored, tt.want, tt.wantIgnored)
			}
		})
	}
}

// FuzzClientOf: whatever a peer sends in X-Real-IP and X-Forwarded-For,
// the client is an IPv4 address or an IPv6 /64, and an unlisted peer is
// its own client.
func FuzzClientOf(f *testing.F) {
	f.Add("10.1.2.3:4000", "198.51.100.7", "1.1.1.1, 2.2.2.2")
	f.Add("192.0.2.1:4000", "", "[2001:db8::1]:443")
	f.Add("[fd00::1]:80", "::ffff:10.0.0.1", ",,, ,")
	f.Add("@", "fe80::1%eth0", "1.2.3.4:")
	trusted, err := config.ParseTrustedProxies([]string{"10.0.0.0/8", "fd00::/8"})
	if err != nil {
		f.Fatal(err)
	}
	n := clientNamer{trusted: trusted}
	f.Fuzz(func(t *testing.T, peer, realIP, forwardedFor string) {
		r := httptest.NewRequest("POST", "/auth/saml/acs", nil)
		r.RemoteAddr = peer
		r.Header.Set("X-Real-Ip", realIP)
		r.Header.Set("X-Forwarded-For", forwardedFor)
		got, _ := n.clientOf(r)
		p, ok := parseHostAddr(peer)
		switch {
		case !ok:
			if got.IsValid() {
				t.Fatalf("peer %q without an address is client %s", peer, got)
			}
			return
		case !n.trusts(p) && got != clientPrefix(p):
			t.Fatalf("unlisted peer %q is client %s", peer, got)
		case got.Addr().Is4() && got.Bits() != 32, got.Addr().Is6() && got.Bits() != ipv6ClientBits,
			got.Addr().Is4In6(), got.Addr().Zone() != "", got != got.Masked():
			t.Fatalf("client %s (peer %q, X-Real-IP %q, X-Forwarded-For %q)", got, peer, realIP, forwardedFor)
		}
	})
}
