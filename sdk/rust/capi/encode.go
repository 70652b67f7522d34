package main

import (
	"encoding/json"
	"reflect"
	"sync"

	"github.com/svc-dev/svc/engine"
)

// maxEncodedClaims bounds the encoded claim sets an engine keeps.
const maxEncodedClaims = 4096

// claimsCache keeps the JSON encoding of the claim sets the engine
// returned. A token answered from the engine's verified-token cache
// carries the same claims map every time (shared, never modified), so its
// claims are encoded once, not on every call across the boundary. An
// entry holds its map, so that the map's address cannot be reused by
// another map while the entry exists.
type claimsCache struct {
	mu      sync.Mutex
	entries map[uintptr]encodedClaims
	// lastID numbers the entries: an id is never given twice, so that a
	// caller may keep what it made of a claim set by its id.
	lastID uint64
}

type encodedClaims struct {
	m    map[string]any
	json json.RawMessage
	id   uint64
}

// encode returns the JSON of m, from the cache when m was seen, and the
// id of its entry (0 for nil claims, which are not cached).
func (c *claimsCache) encode(m map[string]any) (json.RawMessage, uint64, error) {
	if m == nil {
		return json.RawMessage("null"), 0, nil
	}
	key := uintptr(reflect.ValueOf(m).UnsafePointer())
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok {
		return e.json, e.id, nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, 0, err
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) >= maxEncodedClaims {
		c.entries = make(map[uintptr]encodedClaims)
	}
	c.lastID++
	e = encodedClaims{m: m, json: b, id: c.lastID}
	c.entries[key] = e
	c.mu.Unlock()
	return b, e.id, nil
}

// tokenDecisionWire is engine.TokenDecision with its claims encoded; its
// MarshalJSON writes what json.Marshal writes for engine.TokenDecision,
// claims last.
type tokenDecisionWire struct {
	d      engine.TokenDecision
	claims json.RawMessage
}

func (c *claimsCache) wire(d engine.TokenDecision) (tokenDecisionWire, error) {
	claims, _, err := c.encode(d.Claims)
	if err != nil {
		return tokenDecisionWire{}, err
	}
	return tokenDecisionWire{d: d, claims: claims}, nil
}

// MarshalJSON is the encoding of a token decision, without reflection:
// it is on the path of every call.
func (w tokenDecisionWire) MarshalJSON() ([]byte, error) {
	return w.appendJSON(make([]byte, 0, 64+len(w.claims))), nil
}

// appendJSON writes the decision with its claims last, so that a reader
// can find them after the last top-level key `,"claims":` (which cannot
// occur inside a JSON string, where quotes are escaped) and reuse what it
// made of the same claims before.
func (w tokenDecisionWire) appendJSON(b []byte) []byte {
	if w.d.Allowed {
		b = append(b, `{"allowed":true,"reason":`...)
	} else {
		b = append(b, `{"allowed":false,"reason":`...)
	}
	b = appendString(b, string(w.d.Reason))
	for _, f := range [...]struct{ name, v string }{{"subject", w.d.Subject}, {"tenant_id", w.d.TenantID}, {"message", w.d.Message}, {"decision_id", w.d.DecisionID}} {
		if f.v != "" {
			b = append(b, ',', '"')
			b = append(b, f.name...)
			b = append(b, '"', ':')
			b = appendString(b, f.v)
		}
	}
	b = append(b, `,"claims":`...)
	b = append(b, w.claims...)
	return append(b, '}')
}

// appendString appends s as a JSON string, as encoding/json writes it.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
