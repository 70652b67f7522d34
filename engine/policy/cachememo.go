package policy

import (
	"context"
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/open-policy-agent/opa/v1/ast"
)

// UserMemo keeps, for one user, the part of a decision cache key that
// comes from input.user: whether the custom claims convert, the key
// parts under input.user and their hash. Every decision for the user
// reads, converts and hashes them again otherwise, although they only
// change with the user. The zero UserMemo is ready for use; a memo is
// safe for concurrent use, and must not be copied once used.
//
// A memo serves the user it was filled for: DecideMemo fills it again
// (and answers correctly) when the input's user is another one, or the
// set deciding is another one (a policy activation), so a memo belongs
// with one long-lived user value, such as the user derived once per
// verified token. Like every input, that user's Roles and Claims must not
// be modified once it has been decided for.
type UserMemo struct {
	p atomic.Pointer[userKey]
}

// userKey is what a UserMemo holds: the user part of the key of one
// decision cache for one user. It never changes once stored.
type userKey struct {
	// cache is the id of the decision cache (decisionCache.id) the parts
	// were built for: the key paths and the hash seed are that cache's.
	cache uint64
	// user is the user the parts were read from (sameUser).
	user User
	// err is the claims' conversion error; then there are no parts.
	err error
	// parts are the key parts of the cache's user paths, in order.
	parts []keyPart
	// hash and size are those of the parts, as keyHasher finds them.
	hash uint64
	size int
}

// cacheIDs numbers decision caches, for userKey.cache: a number rather
// than a pointer, so that a memo does not keep a replaced cache alive.
var cacheIDs atomic.Uint64

// DecideMemo is Decide, reusing what m remembers of the input's user
// (see UserMemo) and filling m when it remembers nothing of that user for
// this set. A nil m is Decide.
func (s *Set) DecideMemo(ctx context.Context, in Input, m *UserMemo) (Result, error) {
	return s.decideMemo(ctx, in, m)
}

// userKeyFor returns the user part of in's key from m, building it and
// storing it in m when m holds none for this cache and this user.
func (c *decisionCache) userKeyFor(in *Input, m *UserMemo) *userKey {
	if uk := m.p.Load(); uk != nil && uk.cache == c.id && sameUser(&uk.user, &in.User) {
		return uk
	}
	uk := c.newUserKey(in)
	m.p.Store(uk)
	return uk
}

// newUserKey builds the user part of in's key: the parts lazyKey builds
// at the cache's user paths, in the memory of the returned key.
func (c *decisionCache) newUserKey(in *Input) *userKey {
	uk := &userKey{cache: c.id, user: in.User}
	var claims ast.Value
	if !convertible(map[string]any(in.User.Claims)) {
		if claims, uk.err = claimsValue(in.User.Claims); uk.err != nil {
			return uk
		}
	}
	var kh keyHasher
	kh.h.SetSeed(c.seed)
	b := new(termBuf)
	uk.parts = make([]keyPart, 0, c.userPaths)
	for i, path := range c.paths {
		if !c.user[i] {
			continue
		}
		uk.parts = append(uk.parts, keyPart{})
		p := &uk.parts[len(uk.parts)-1]
		if err := typedPartInto(in, path, c.leaves[i], b, claims, p); err != nil {
			// The claims converted above; typedPartInto fails on nothing
			// else.
			return &userKey{cache: c.id, user: in.User, err: err}
		}
		kh.part(p)
	}
	uk.hash, uk.size = kh.h.Sum64(), kh.size
	return uk
}

// sameUser reports whether a and b are the same user value: every field
// the same string, slice or map, not merely equal ones. Copies of one
// user are the same; a user with a field set anew is not.
func sameUser(a, b *User) bool {
	return sameString(a.ID, b.ID) && sameString(a.Role, b.Role) && sameString(a.TenantID, b.TenantID) &&
		sameString(a.Email, b.Email) && sameStrings(a.Roles, b.Roles) && sameMap(a.Claims, b.Claims)
}

func sameString(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.StringData(a) == unsafe.StringData(b))
}

func sameStrings(a, b []string) bool {
	return len(a) == len(b) && (a == nil) == (b == nil) && (len(a) == 0 || &a[0] == &b[0])
}

func sameMap(a, b map[string]any) bool {
	return (a == nil) == (b == nil) && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
