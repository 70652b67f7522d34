// Package redismem reads what a Redis server says of its memory bound:
// whether it may evict keys when full. The sidecar keeps state in Redis
// whose loss weakens a guarantee (logouts and revoked sessions, the SAML
// replay store, used sign-in states, rate-limit budgets), all of it with
// an expiry; a server with a maxmemory and any policy but noeviction
// deletes such keys under memory pressure (volatile-* policies pick
// among keys with an expiry, which is every one of them), so a logged-out
// session would work again and an answered assertion be taken twice.
package redismem

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// NoEviction is the maxmemory-policy under which a full Redis refuses
// writes instead of deleting keys.
const NoEviction = "noeviction"

// Memory is a server's memory bound, from INFO memory.
type Memory struct {
	// MaxMemory is maxmemory in bytes; 0 for no bound (a server that
	// never evicts).
	MaxMemory int64
	// Policy is maxmemory-policy: noeviction, allkeys-lru, volatile-ttl,
	// and so on.
	Policy string
}

// Evicts reports whether the server may delete keys when it is full: a
// bound and a policy other than noeviction.
func (m Memory) Evicts() bool { return m.MaxMemory > 0 && m.Policy != NoEviction }

// Read asks the server behind c (INFO memory).
func Read(ctx context.Context, c redis.UniversalClient) (Memory, error) {
	info, err := c.Info(ctx, "memory").Result()
	if err != nil {
		return Memory{}, err
	}
	return Parse(info)
}

// errNoPolicy is Parse's error for an answer without the two fields.
var errNoPolicy = errors.New("redismem: INFO memory names no maxmemory or maxmemory_policy")

// maxPolicyLen bounds the policy name taken from an answer.
const maxPolicyLen = 64

// Parse reads maxmemory and maxmemory_policy from the text of INFO
// memory ("name:value" lines, "#" section headers).
func Parse(info string) (Memory, error) {
	var (
		m                 Memory
		haveMax, havePoli bool
	)
	sc := bufio.NewScanner(strings.NewReader(info))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimRight(sc.Text(), "\r"), ":")
		if !ok {
			continue
		}
		switch name {
		case "maxmemory":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 {
				return Memory{}, fmt.Errorf("redismem: maxmemory %q is not a byte count", clip(value))
			}
			m.MaxMemory, haveMax = n, true
		case "maxmemory_policy":
			if value == "" || len(value) > maxPolicyLen || strings.ContainsFunc(value, notPolicyRune) {
				return Memory{}, fmt.Errorf("redismem: maxmemory_policy %q is not a policy name", clip(value))
			}
			m.Policy, havePoli = value, true
		}
	}
	if err := sc.Err(); err != nil {
		return Memory{}, fmt.Errorf("redismem: %w", err)
	}
	if !haveMax || !havePoli {
		return Memory{}, errNoPolicy
	}
	return m, nil
}

// notPolicyRune: policy names are lowercase words joined by "-".
func notPolicyRune(r rune) bool { return (r < 'a' || r > 'z') && r != '-' }

// clip shortens v for an error message.
func clip(v string) string {
	if len(v) > 32 {
		return v[:32] + "..."
	}
	return v
}
