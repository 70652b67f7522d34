package samlgw

import "time"

// SetMemoryStoreLimit lowers the entry limit of s, so that tests reach it
// without writing MaxMemoryEntries keys.
func SetMemoryStoreLimit(s *MemoryStore, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.max = n
}

// MemoryStoreLen is the number of entries in s, expired or not.
func MemoryStoreLen(s *MemoryStore) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// ScaleClientBudget multiplies the work budget of every client of g's ACS
// seen from now on: tests under the race detector, where validating costs
// several times the CPU, keep the budget's meaning in documents.
func ScaleClientBudget(g *Gateway, k float64) {
	g.acs.mu.Lock()
	defer g.acs.mu.Unlock()
	g.acs.clients.share *= k
	g.acs.clients.burst = time.Duration(float64(g.acs.clients.burst) * k)
}
