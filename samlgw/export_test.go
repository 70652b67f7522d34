package samlgw

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
