package samlgw

import (
	"container/list"
	"net/netip"
	"time"
)

// maxClients bounds the clients the ACS remembers (about 150 bytes each):
// whoever posts from many addresses cannot grow the table, only push out
// the clients seen longest ago. A client pushed out comes back with a
// whole burst, which is what a new address gets anyway; the lanes'
// budgets bound what many addresses take together.
const maxClients = 10_000

// clientState is what the ACS knows of one client.
type clientState struct {
	key    netip.Prefix
	budget bucket
	// admitted counts the client's posts admitted and not done (waiting
	// for a slot or validating); large those of the large lane.
	admitted, large int
	elem            *list.Element
}

// clientTable is a bounded table of clients, the least recently seen
// pushed out first. It is not safe for concurrent use (the gate's mutex
// guards it).
type clientTable struct {
	max int
	// share and burst are each new client's budget: clientShare and
	// clientBurst, but for tests (ScaleClientBudget).
	share float64
	burst time.Duration
	m     map[netip.Prefix]*clientState
	lru   list.List // of *clientState, the most recently seen first
}

func newClientTable(max int) *clientTable {
	return &clientTable{max: max, share: clientShare, burst: clientBurst, m: make(map[netip.Prefix]*clientState)}
}

// get returns the state of the client key, created with a whole burst
// when it is not known.
func (t *clientTable) get(key netip.Prefix, now time.Time) *clientState {
	if c, ok := t.m[key]; ok {
		t.lru.MoveToFront(c.elem)
		return c
	}
	if len(t.m) >= t.max {
		t.evict(now)
	}
	c := &clientState{key: key, budget: newBucket(t.share, t.burst, now)}
	c.elem = t.lru.PushFront(c)
	t.m[key] = c
	return c
}

// evict drops a client: the least recently seen whose budget is whole
// and that has no post under way, if one is among the oldest few, else
// the least recently seen. A client in debt is dropped only when every
// one of the oldest is, so a flood of new addresses does not wipe the
// debts of those it follows.
func (t *clientTable) evict(now time.Time) {
	const look = 8
	victim := t.lru.Back()
	for e, n := victim, 0; e != nil && n < look; e, n = e.Prev(), n+1 {
		if c := e.Value.(*clientState); c.admitted == 0 && c.budget.full(now) {
			victim = e
			break
		}
	}
	if victim == nil {
		return
	}
	c := t.lru.Remove(victim).(*clientState)
	delete(t.m, c.key)
}

// len returns how many clients are remembered.
func (t *clientTable) len() int { return len(t.m) }
