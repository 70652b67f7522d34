package policy

import (
	"context"
	"sync/atomic"

	"github.com/svc-dev/svc/reason"
)

// Store holds the active policy set. Readers take the set with Load and
// evaluate it; activation replaces it with Swap. A reader always sees one
// whole set, never a mix of two, and a set that was swapped out stays
// usable by the evaluations still holding it.
type Store struct {
	active atomic.Pointer[Set]
}

// NewStore returns a Store whose active set is s (nil for none yet).
func NewStore(s *Set) *Store {
	st := &Store{}
	st.active.Store(s)
	return st
}

// Load returns the active set, nil when none was stored.
func (st *Store) Load() *Set { return st.active.Load() }

// Swap makes s the active set and returns the set it replaces.
func (st *Store) Swap(s *Set) (old *Set) { return st.active.Swap(s) }

// Eval evaluates in with the active set, always running the policy (see
// Set.Eval). With no active set it fails with reason.PolicyError.
func (st *Store) Eval(ctx context.Context, in Input) (Result, error) {
	s := st.active.Load()
	if s == nil {
		return Result{}, reason.New(reason.PolicyError, "no policy loaded")
	}
	return s.Eval(ctx, in)
}

// Decide decides in with the active set through its decision cache (see
// Set.Decide). With no active set it fails with reason.PolicyError.
func (st *Store) Decide(ctx context.Context, in Input) (Result, error) {
	s := st.active.Load()
	if s == nil {
		return Result{}, reason.New(reason.PolicyError, "no policy loaded")
	}
	return s.Decide(ctx, in)
}
