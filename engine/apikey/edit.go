package apikey

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// NewEntry is what Append writes for a new key.
type NewEntry struct {
	Tenant  string
	Subject string
	Roles   []string
	// Expires is when the key stops working; zero means never.
	Expires time.Time
}

// written is an entry as Append writes it: the optional fields only when
// set.
type written struct {
	ID      string     `toml:"id"`
	Hash    string     `toml:"hash"`
	Tenant  string     `toml:"tenant"`
	Subject string     `toml:"subject"`
	Roles   []string   `toml:"roles"`
	Expires *time.Time `toml:"expires,omitempty"`
}

// Append creates a key for e, appends its entry to the file at path
// (created with mode 0600 when missing; the rest of its content is kept)
// and returns the key and its id. The key is nowhere else: the file holds
// its hash. A file that does not parse is left alone.
func Append(path string, e NewEntry) (id, key string, err error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", "", err
	}
	set, err := Parse(data)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	for {
		if id, key, err = Generate(nil); err != nil {
			return "", "", err
		}
		if _, taken := set.keys[id]; !taken {
			break
		}
	}
	w := written{ID: id, Hash: Hash(key), Tenant: e.Tenant, Subject: e.Subject, Roles: e.Roles}
	if w.Roles == nil {
		w.Roles = []string{}
	}
	if !e.Expires.IsZero() {
		t := e.Expires.UTC().Truncate(time.Second)
		w.Expires = &t
	}
	if _, msg := (entry{ID: w.ID, Hash: w.Hash, Tenant: w.Tenant, Subject: w.Subject, Roles: w.Roles}).key(); msg != "" {
		return "", "", errors.New(msg)
	}
	text, err := toml.Marshal(struct {
		Keys []written `toml:"keys"`
	}{[]written{w}})
	if err != nil {
		return "", "", err
	}
	var out bytes.Buffer
	out.Write(data)
	if len(data) > 0 {
		if data[len(data)-1] != '\n' {
			out.WriteByte('\n')
		}
		out.WriteByte('\n')
	}
	out.Write(text)
	if _, err := Parse(out.Bytes()); err != nil {
		return "", "", fmt.Errorf("%s: the new entry would not parse: %w", path, err)
	}
	if err := replace(path, out.Bytes()); err != nil {
		return "", "", err
	}
	return id, key, nil
}

// Revoke marks the entry of id revoked in the file at path, keeping the
// rest of its content, and reports whether it was revoked already.
func Revoke(path, id string) (already bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	set, err := Parse(data)
	if err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	k := set.keys[id]
	if k == nil {
		return false, fmt.Errorf("%s: no key with id %q", path, id)
	}
	if k.Revoked {
		return true, nil
	}
	header, end, revokedLine := entryBlock(data, k.Line)
	lines := bytes.SplitAfter(data, []byte("\n"))
	if revokedLine > 0 {
		lines[revokedLine-1] = []byte("revoked = true\n")
	} else {
		// After the entry's last non-blank line.
		at := end - 1
		for at > header && len(bytes.TrimSpace(lines[at-1])) == 0 {
			at--
		}
		if !bytes.HasSuffix(lines[at-1], []byte("\n")) {
			lines[at-1] = append(bytes.Clone(lines[at-1]), '\n')
		}
		lines = append(lines[:at], append([][]byte{[]byte("revoked = true\n")}, lines[at:]...)...)
	}
	out := bytes.Join(lines, nil)
	check, err := Parse(out)
	if err != nil || !check.keys[id].Revoked {
		return false, fmt.Errorf("%s: could not mark %q revoked in place: %v", path, id, err)
	}
	return false, replace(path, out)
}

// entryBlock finds the entry whose [[keys]] header is on line header: the
// line after its last (the next table's header, or one past the end), and
// the line of its revoked key (0 when it has none).
func entryBlock(data []byte, header int) (_, end, revoked int) {
	end = bytes.Count(data, []byte("\n")) + 1
	if len(data) > 0 && data[len(data)-1] != '\n' {
		end++
	}
	var p unstable.Parser
	p.Reset(data)
	in := false
	for p.NextExpression() {
		e := p.Expression()
		it := e.Key()
		if !it.Next() {
			continue
		}
		n := it.Node()
		line := p.Shape(n.Raw).Start.Line
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			if in {
				return header, line, revoked
			}
			in = line == header
		case unstable.KeyValue:
			if in && string(n.Data) == "revoked" && !it.Next() {
				revoked = line
			}
		}
	}
	return header, end, revoked
}

// replace writes data to path through a temporary file in the same
// directory, so that a reader sees the old file or the new one, never a
// part; the file keeps its mode (0600 for a new one).
func replace(path string, data []byte) error {
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
