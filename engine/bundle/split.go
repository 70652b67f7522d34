package bundle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

// A data file of a bundle is a data.json in a directory: OPA's reader
// merges each at the data path its directory names, so that the keys of
// one object may be spread over the data.json of its own directory and of
// every directory above it. splitData uses that to keep data larger than
// a bundle file may hold (MaxFileBytes) in files that each fit.

// chunk is a subtree of the data small enough for one file: its path
// (the keys from the root) and its JSON.
type chunk struct {
	keys []string
	json []byte
}

// dataFile is a data.json being filled: its directory's keys and the
// chunks it holds.
type dataFile struct {
	keys   []string
	chunks []chunk
	size   int
}

// splitData lays data out in data.json files of at most limit bytes each,
// by directory ("" is the bundle's root, "svc/tables/tenants" the file
// /svc/tables/tenants/data.json). Data that fits one file is one root
// data.json. Otherwise every object too large for a file is cut into its
// members, recursively, and each member goes into the first file with
// room among the data.json of the object's own directory and of the
// directories above it, or, failing those, into one of its own. A value
// too large for a file that is not an object cannot be cut: that is an
// error, as is a key that cannot name a directory.
func splitData(data map[string]any, limit int) (map[string][]byte, error) {
	whole, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("encode data: %w", err)
	}
	if len(whole) <= limit {
		return map[string][]byte{"": whole}, nil
	}
	var chunks []chunk
	if err := cut(nil, data, limit, &chunks); err != nil {
		return nil, err
	}
	files := map[string]*dataFile{}
	var order []string
	for _, c := range chunks {
		if err := place(c, files, &order, limit); err != nil {
			return nil, err
		}
	}
	out := make(map[string][]byte, len(files))
	for _, dir := range order {
		f := files[dir]
		b, err := f.encode()
		if err != nil {
			return nil, err
		}
		if len(b) > limit {
			return nil, fmt.Errorf("data file %s/data.json: %d bytes, more than %d", dir, len(b), limit)
		}
		out[dir] = b
	}
	return out, nil
}

// cut appends the chunks of v, at keys, to chunks.
func cut(keys []string, v any, limit int, chunks *[]chunk) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode data.%s: %w", strings.Join(keys, "."), err)
	}
	// A chunk also takes at least its last key in the file that holds it.
	if len(b)+keysOverhead(keys[max(0, len(keys)-1):])+2 <= limit {
		*chunks = append(*chunks, chunk{slices.Clip(keys), b})
		return nil
	}
	obj, ok := v.(map[string]any)
	if !ok || len(obj) == 0 {
		return fmt.Errorf("data.%s is %d bytes of JSON, more than a bundle file may hold (%d), and only an object can be split over several files", strings.Join(keys, "."), len(b), limit)
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if k == "" || k == "." || k == ".." || strings.ContainsAny(k, "/\\\x00") {
			return fmt.Errorf("data.%s is larger than a bundle file may hold (%d bytes) and its key %q cannot name a directory to split it by", strings.Join(keys, "."), limit, k)
		}
		if err := cut(append(slices.Clip(keys), k), obj[k], limit, chunks); err != nil {
			return err
		}
	}
	return nil
}

// keysOverhead bounds what keys take in JSON around a chunk:
// {"k":…} per key, with escapes.
func keysOverhead(keys []string) int {
	n := 0
	for _, k := range keys {
		q, _ := json.Marshal(k)
		n += len(q) + 3
	}
	return n
}

// place puts c into the first file with room, trying the directory of
// its parent object and every directory above it, then its own.
func place(c chunk, files map[string]*dataFile, order *[]string, limit int) error {
	candidates := make([][]string, 0, len(c.keys)+1)
	for n := len(c.keys) - 1; n >= 0; n-- {
		candidates = append(candidates, c.keys[:n])
	}
	if len(c.keys) > 0 {
		candidates = append(candidates, c.keys)
	}
	for _, dir := range candidates {
		need := len(c.json) + keysOverhead(c.keys[len(dir):]) + 1
		name := path.Join(dir...)
		f := files[name]
		if f == nil {
			f = &dataFile{keys: dir, size: 2}
		}
		if f.size+need > limit {
			continue
		}
		if files[name] == nil {
			files[name] = f
			*order = append(*order, name)
		}
		f.chunks = append(f.chunks, c)
		f.size += need
		return nil
	}
	return fmt.Errorf("data.%s (%d bytes) fits no bundle file: the files of its directory and of those above it are full; give it a key path of more levels", strings.Join(c.keys, "."), len(c.json))
}

// encode writes the file's chunks as one JSON object.
func (f *dataFile) encode() ([]byte, error) {
	if len(f.chunks) == 1 && len(f.chunks[0].keys) == len(f.keys) {
		return f.chunks[0].json, nil // an object of its own directory
	}
	tree := map[string]any{}
	for _, c := range f.chunks {
		node := tree
		rel := c.keys[len(f.keys):]
		for _, k := range rel[:len(rel)-1] {
			next, ok := node[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				node[k] = next
			}
			node = next
		}
		node[rel[len(rel)-1]] = json.RawMessage(c.json)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return nil, fmt.Errorf("encode data file %s/data.json: %w", path.Join(f.keys...), err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
