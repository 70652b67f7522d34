package apikey

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Key is one entry of the file: what a key stands for, and its hash.
type Key struct {
	// ID is the key's id, the part between "svck_" and the secret.
	ID string
	// Tenant, Subject and Roles are the identity a request with the key
	// carries, as a token's tenant_id, sub and roles claims.
	Tenant  string
	Subject string
	Roles   []string
	// Expires is when the key stops working; zero means never.
	Expires time.Time
	// Revoked keys are refused (api-key-revoked).
	Revoked bool
	// Line is the line of the entry's [[keys]] header.
	Line int

	hash [sha256.Size]byte
}

// entry is one [[keys]] table as written.
type entry struct {
	ID      string    `toml:"id"`
	Hash    string    `toml:"hash"`
	Tenant  string    `toml:"tenant"`
	Subject string    `toml:"subject"`
	Roles   []string  `toml:"roles"`
	Expires time.Time `toml:"expires"`
	Revoked bool      `toml:"revoked"`
}

type document struct {
	Keys []entry `toml:"keys"`
}

// LineError is a refusal of the file that names the line at fault.
type LineError struct {
	Line int
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Parse reads a key file: [[keys]] tables with id, hash, tenant, subject,
// roles and the optional expires and revoked. It refuses the whole file,
// with a *LineError naming the line, when a line holds a plaintext key
// (anything starting "svck_", or a key field), an id repeats, or an
// entry is incomplete or malformed.
func Parse(data []byte) (*Set, error) {
	if line := plaintextLine(data); line > 0 {
		return nil, &LineError{Line: line, Msg: "holds a plaintext API key; the file keeps only hashes (core api-key create writes them)"}
	}
	var doc document
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, decodeError(err)
	}
	lines := entryLines(data)
	set := &Set{keys: make(map[string]*Key, len(doc.Keys))}
	for i, e := range doc.Keys {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		k, msg := e.key()
		if msg != "" {
			return nil, &LineError{Line: line, Msg: msg}
		}
		if prev, dup := set.keys[k.ID]; dup {
			return nil, &LineError{Line: line, Msg: fmt.Sprintf("id %q repeats the entry of line %d", k.ID, prev.Line)}
		}
		k.Line = line
		set.keys[k.ID] = k
		set.order = append(set.order, k)
	}
	return set, nil
}

func (e entry) key() (*Key, string) {
	switch {
	case !ValidID(e.ID):
		return nil, fmt.Sprintf("id %q is not 12 characters of lower-case base32", e.ID)
	case e.Tenant == "":
		return nil, "tenant is missing"
	case e.Subject == "":
		return nil, "subject is missing"
	}
	k := &Key{ID: e.ID, Tenant: e.Tenant, Subject: e.Subject, Roles: e.Roles, Expires: e.Expires, Revoked: e.Revoked}
	hexHash, ok := strings.CutPrefix(e.Hash, hashTag)
	if n, err := hex.Decode(k.hash[:], []byte(hexHash)); !ok || err != nil || n != sha256.Size || len(hexHash) != 2*sha256.Size {
		return nil, `hash must be "sha256:" and 64 hex digits`
	}
	for _, r := range e.Roles {
		if r == "" {
			return nil, "roles holds an empty role"
		}
	}
	if k.Roles == nil {
		k.Roles = []string{}
	}
	return k, ""
}

// plaintextLine is the first line holding the key prefix, 0 when none.
func plaintextLine(data []byte) int {
	i := bytes.Index(data, []byte(Prefix))
	if i < 0 {
		return 0
	}
	return bytes.Count(data[:i], []byte("\n")) + 1
}

// decodeError names the line of a TOML error; a key field gets the
// plaintext refusal.
func decodeError(err error) error {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) && len(strict.Errors) > 0 {
		de := strict.Errors[0]
		line, _ := de.Position()
		key := de.Key()
		if len(key) > 0 && key[len(key)-1] == "key" {
			return &LineError{Line: line, Msg: "holds a plaintext API key (key = ...); the file keeps only hashes"}
		}
		return &LineError{Line: line, Msg: fmt.Sprintf("unknown field %q", strings.Join(key, "."))}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		return &LineError{Line: line, Msg: de.Error()}
	}
	return &LineError{Line: 1, Msg: err.Error()}
}

// entryLines is the line of every [[keys]] header, in order.
func entryLines(data []byte) []int {
	var lines []int
	var p unstable.Parser
	p.Reset(data)
	for p.NextExpression() {
		e := p.Expression()
		if e.Kind != unstable.ArrayTable {
			continue
		}
		it := e.Key()
		if it.Next() {
			n := it.Node()
			if string(n.Data) == "keys" && !it.Next() {
				lines = append(lines, p.Shape(n.Raw).Start.Line)
			}
		}
	}
	return lines
}
