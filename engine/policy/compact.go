package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/svc-dev/svc/internal/jsonscan"

	"github.com/svc-dev/svc/internal/jsonstr"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A compact data tree holds a data document as JSON text rather than as
// AST values: a table's entry of 316 bytes of JSON takes about 1.3 KB as
// OPA's AST values and about its own size here. Objects large enough to
// matter are internal nodes, their members sorted by key; every other
// value is a leaf holding its compact JSON, a slice of one of a few large
// arena buffers. Reading a path walks the nodes and decodes only the leaf
// it ends in (see compactStore).

// leafMaxBytes and leafMaxMembers bound the objects kept whole as one
// leaf: an object whose members encode to more than leafMaxBytes, or that
// has more than leafMaxMembers members, is an internal node, so that
// reading one of its members decodes that member alone.
const (
	leafMaxBytes   = 1024
	leafMaxMembers = 64
)

// arenaChunk is the size of the arena's buffers: small enough that the
// last, partly filled, wastes little of a few MB of data.
const arenaChunk = 256 << 10

// compactNode is an object of the tree, its members sorted by key.
type compactNode struct {
	keys []string
	vals []compactVal
}

// compactVal is a member of an object: an internal node, or a leaf's
// compact JSON (a value that is not an object, or a small object).
type compactVal struct {
	node *compactNode
	raw  []byte
}

// get returns the member k of n.
func (n *compactNode) get(k string) (compactVal, bool) {
	i, ok := slices.BinarySearch(n.keys, k)
	if !ok {
		return compactVal{}, false
	}
	return n.vals[i], true
}

// arena hands out slices of large buffers that are never reallocated, so
// that the slices of a tree's leaves and keys stay valid and take one
// allocation per MiB, not one per value.
type arena struct {
	buf  []byte
	size int64 // bytes handed out
}

// copy returns a copy of b in the arena.
func (a *arena) copy(b []byte) []byte {
	a.size += int64(len(b))
	if len(b) > arenaChunk/4 {
		return bytes.Clone(b)
	}
	if cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, arenaChunk)
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// str returns s as a string in the arena.
func (a *arena) str(s string) string {
	if s == "" {
		return ""
	}
	b := a.copy(unsafe.Slice(unsafe.StringData(s), len(s)))
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// compactBuilder builds a compact tree.
type compactBuilder struct {
	arena   arena
	enc     bytes.Buffer
	scratch []byte
}

// pending is a value being built: a node, or a leaf's JSON, in the arena
// or not yet (a small object's members are copied into the arena once, as
// the object's own JSON, not once each).
type pending struct {
	node    *compactNode
	raw     []byte
	inArena bool
}

// isObject says whether p is an object.
func (p pending) isObject() bool {
	return p.node != nil || (len(p.raw) > 0 && p.raw[0] == '{')
}

// member is a member of an object being built.
type member struct {
	key string
	val pending
}

// objectBuilder collects the members of one object. As soon as the object
// is known to be a node (a member is a node, or the members are too many
// or too large for a leaf), its leaves are copied into the arena as they
// come, so that a large table's entries are never all held twice.
type objectBuilder struct {
	b       *compactBuilder
	members []member
	size    int
	node    bool
}

func (ob *objectBuilder) add(key string, v pending) {
	if !ob.node {
		ob.size += len(key) + 4 + len(v.raw)
		if v.node != nil || len(ob.members) >= leafMaxMembers || ob.size > leafMaxBytes {
			ob.node = true
			for i := range ob.members {
				ob.members[i].val = ob.b.toArena(ob.members[i].val)
			}
		}
	}
	if ob.node {
		v = ob.b.toArena(v)
	}
	ob.members = append(ob.members, member{key: key, val: v})
}

// toArena returns p with its leaf in the arena.
func (b *compactBuilder) toArena(p pending) pending {
	if p.node != nil || p.inArena {
		return p
	}
	return pending{raw: b.arena.copy(p.raw), inArena: true}
}

// finish makes the object a pending value: a leaf when it is small, else
// a node. A key given twice keeps its last value, as encoding/json does.
func (ob *objectBuilder) finish() pending {
	return ob.b.object(ob.members, ob.node)
}

// object makes members into a pending value: a leaf when node is false
// and the members are small leaves, else a node whose leaves are copied
// into the arena.
func (b *compactBuilder) object(members []member, node bool) pending {
	members = sortMembers(members)
	size := 2
	for _, m := range members {
		if m.val.node != nil {
			node = true
			break
		}
		size += len(m.key) + 4 + len(m.val.raw)
	}
	if !node && len(members) <= leafMaxMembers && size <= leafMaxBytes {
		raw := make([]byte, 0, size)
		raw = append(raw, '{')
		for i, m := range members {
			if i > 0 {
				raw = append(raw, ',')
			}
			raw = jsonstr.Append(raw, m.key, false)
			raw = append(raw, ':')
			raw = append(raw, m.val.raw...)
		}
		return pending{raw: append(raw, '}')}
	}
	n := &compactNode{keys: make([]string, len(members)), vals: make([]compactVal, len(members))}
	for i, m := range members {
		n.keys[i] = b.arena.str(m.key)
		v := b.toArena(m.val)
		n.vals[i] = compactVal{node: v.node, raw: v.raw}
	}
	return pending{node: n}
}

// root returns the tree of p, which must be an object.
func (b *compactBuilder) root(p pending) (*compactNode, error) {
	if p.node != nil {
		return p.node, nil
	}
	if !p.isObject() {
		return nil, errors.New("top level must be an object")
	}
	// A small document: its root is a node all the same, so that reads
	// of its top-level members need no decoding of the others.
	members, err := b.members(p.raw)
	if err != nil {
		return nil, err
	}
	return b.object(members, true).node, nil
}

// members splits the JSON text of an object into its members, sorted by
// key, the last of equal keys kept.
func (b *compactBuilder) members(raw []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("top level must be an object")
	}
	var members []member
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return nil, err
		}
		p, err := b.fromJSON(dec)
		if err != nil {
			return nil, err
		}
		members = append(members, member{key: key, val: p})
	}
	return sortMembers(members), nil
}

// sortMembers sorts members by key and keeps the last of equal keys, as
// encoding/json does.
func sortMembers(members []member) []member {
	slices.SortStableFunc(members, func(x, y member) int { return strings.Compare(x.key, y.key) })
	out := members[:0]
	for i, m := range members {
		if i+1 < len(members) && members[i+1].key == m.key {
			continue
		}
		out = append(out, m)
	}
	return out
}

// fromGo builds the pending value of v, a document decoded from JSON or
// YAML (maps, slices, strings, json.Number, float64, bool, nil). It
// consumes v: the members of every object are deleted once built, so that
// the decoded document is given back to the collector while the tree is
// built.
func (b *compactBuilder) fromGo(v any) (pending, error) {
	m, ok := v.(map[string]any)
	if !ok {
		b.enc.Reset()
		enc := json.NewEncoder(&b.enc)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return pending{}, err
		}
		return pending{raw: bytes.Clone(bytes.TrimSuffix(b.enc.Bytes(), []byte{'\n'}))}, nil
	}
	ob := objectBuilder{b: b}
	for k, child := range m {
		p, err := b.fromGo(child)
		if err != nil {
			return pending{}, err
		}
		ob.add(k, p)
		delete(m, k)
	}
	return ob.finish(), nil
}

// fromJSON builds the pending value of the next JSON value of dec, which
// must decode numbers with UseNumber. Objects are read member by member,
// so that no document is ever decoded whole into Go values; an array is
// a leaf, its text encoded compactly as its tokens are read.
func (b *compactBuilder) fromJSON(dec *json.Decoder) (pending, error) {
	tok, err := dec.Token()
	if err != nil {
		return pending{}, err
	}
	if tok != json.Delim('{') {
		// Encoded into a buffer reused from leaf to leaf, then copied
		// once at its size.
		raw, err := appendToken(b.scratch[:0], dec, tok)
		b.scratch = raw
		return pending{raw: bytes.Clone(raw)}, err
	}
	ob := objectBuilder{b: b}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return pending{}, err
		}
		p, err := b.fromJSON(dec)
		if err != nil {
			return pending{}, err
		}
		ob.add(key, p)
	}
	if _, err := dec.Token(); err != nil { // }
		return pending{}, err
	}
	return ob.finish(), nil
}

// objectKey reads the key of an object's next member.
func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("object key is %v, not a string", tok)
	}
	return key, nil
}

// appendToken appends the compact JSON of the value starting with tok,
// reading the rest of it from dec.
func appendToken(dst []byte, dec *json.Decoder, tok json.Token) ([]byte, error) {
	switch t := tok.(type) {
	case json.Delim:
		end := json.Delim(']')
		if t == '{' {
			end = '}'
		}
		dst = append(dst, byte(t))
		for i := 0; dec.More(); i++ {
			if i > 0 {
				dst = append(dst, ',')
			}
			if t == '{' {
				key, err := objectKey(dec)
				if err != nil {
					return nil, err
				}
				dst = append(jsonstr.Append(dst, key, false), ':')
			}
			next, err := dec.Token()
			if err != nil {
				return nil, err
			}
			if dst, err = appendToken(dst, dec, next); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return append(dst, byte(end)), nil
	case string:
		return jsonstr.Append(dst, t, false), nil
	case json.Number:
		return append(dst, t...), nil
	case bool:
		return strconv.AppendBool(dst, t), nil
	case nil:
		return append(dst, "null"...), nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// CompactData is a data document built as a compact tree, for the data of
// a set that is too large to hold as AST values (see WithCompactData).
type CompactData struct {
	root *compactNode
	// size is the JSON text the tree holds, in bytes.
	size int64
}

// CompactDataBuilder builds a CompactData from JSON documents merged at
// paths, as data files of a directory or bundle are.
type CompactDataBuilder struct {
	b    compactBuilder
	root pendingTree
}

// pendingTree is an object being merged from several documents: whole,
// while one document alone sets it; members, once another adds to it.
type pendingTree struct {
	whole *pending
	kids  map[string]*pendingTree
	vals  map[string]pending
}

// AddJSON reads one JSON document from r, as OPA's bundle reader decodes
// a data file (one value, nothing but white space after it), and merges
// it at path (see merge). With digest set, the document's canonical
// encoding (see writeCanonical) is written to it.
func (cb *CompactDataBuilder) AddJSON(path []string, r io.Reader, digest io.Writer) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	p, err := cb.b.fromJSON(dec)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	if tok, err := dec.Token(); tok != nil || err != io.EOF {
		return fmt.Errorf("invalid JSON after the top-level value: %v %v", tok, err)
	}
	if digest != nil {
		if err := writeCanonical(digest, p); err != nil {
			return err
		}
	}
	return cb.merge(path, p)
}

// AddValue merges v, a document decoded from JSON or YAML (a YAML data
// file), at path, as AddJSON does. It consumes v.
func (cb *CompactDataBuilder) AddValue(path []string, v any, digest io.Writer) error {
	if digest != nil {
		walkCanonical(v, digest, newCanonicalEncoder())
	}
	p, err := cb.b.fromGo(v)
	if err != nil {
		return err
	}
	return cb.merge(path, p)
}

// merge merges the document p at path, as OPA's bundle reader merges data
// files: at the root p must be an object; below it, any value. Objects
// merge member by member; any other value may be set by one file only.
func (cb *CompactDataBuilder) merge(path []string, p pending) error {
	if len(path) == 0 && !p.isObject() {
		return errors.New("root value must be object")
	}
	t := &cb.root
	last := len(path)
	if !p.isObject() {
		last--
	}
	for i, k := range path[:last] {
		var err error
		if t, err = cb.child(t, k); err != nil {
			return fmt.Errorf("failed to insert data file from path %s", strings.Join(path[:i+1], "/"))
		}
	}
	var err error
	if p.isObject() {
		err = cb.mergeObject(t, p)
	} else {
		err = cb.mergeMember(t, path[last], p)
	}
	if err != nil {
		return fmt.Errorf("failed to insert data file from path %s: %w", strings.Join(path, "/"), err)
	}
	return nil
}

// child returns the member k of t as a tree, creating it when absent; a
// member that is not an object is a conflict.
func (cb *CompactDataBuilder) child(t *pendingTree, k string) (*pendingTree, error) {
	if err := cb.spread(t); err != nil {
		return nil, err
	}
	if v, ok := t.vals[k]; ok {
		if !v.isObject() {
			return nil, fmt.Errorf("data path %q is set by more than one data file", k)
		}
		delete(t.vals, k)
		kid := t.kid(k)
		kid.whole = &v
		return kid, nil
	}
	return t.kid(k), nil
}

// spread turns a tree set whole into its members.
func (cb *CompactDataBuilder) spread(t *pendingTree) error {
	if t.whole == nil {
		return nil
	}
	w := *t.whole
	t.whole = nil
	members, err := cb.membersOf(w)
	if err != nil {
		return err
	}
	if t.vals == nil {
		t.vals = make(map[string]pending, len(members))
	}
	for _, m := range members {
		t.vals[m.key] = m.val
	}
	return nil
}

// mergeObject merges the object p into t.
func (cb *CompactDataBuilder) mergeObject(t *pendingTree, p pending) error {
	if t.whole == nil && len(t.kids) == 0 && len(t.vals) == 0 {
		t.whole = &p
		return nil
	}
	if err := cb.spread(t); err != nil {
		return err
	}
	members, err := cb.membersOf(p)
	if err != nil {
		return err
	}
	for _, m := range members {
		if err := cb.mergeMember(t, m.key, m.val); err != nil {
			return err
		}
	}
	return nil
}

// mergeMember sets the member k of t to v, merging objects.
func (cb *CompactDataBuilder) mergeMember(t *pendingTree, k string, v pending) error {
	if err := cb.spread(t); err != nil {
		return err
	}
	_, isVal := t.vals[k]
	_, isKid := t.kids[k]
	if !isVal && !isKid {
		if t.vals == nil {
			t.vals = map[string]pending{}
		}
		t.vals[k] = v
		return nil
	}
	if !v.isObject() {
		return fmt.Errorf("data path %q is set by more than one data file", k)
	}
	kid, err := cb.child(t, k)
	if err != nil {
		return err
	}
	return cb.mergeObject(kid, v)
}

func (t *pendingTree) kid(k string) *pendingTree {
	if t.kids == nil {
		t.kids = map[string]*pendingTree{}
	}
	c := t.kids[k]
	if c == nil {
		c = &pendingTree{}
		t.kids[k] = c
	}
	return c
}

// membersOf lists the members of the object p.
func (cb *CompactDataBuilder) membersOf(p pending) ([]member, error) {
	if p.node != nil {
		ms := make([]member, len(p.node.keys))
		for i, k := range p.node.keys {
			v := p.node.vals[i]
			ms[i] = member{key: k, val: pending{node: v.node, raw: v.raw, inArena: true}}
		}
		return ms, nil
	}
	return cb.b.members(p.raw)
}

// Build returns the merged data.
func (cb *CompactDataBuilder) Build() *CompactData {
	root := cb.build(&cb.root)
	n, _ := cb.b.root(root)
	return &CompactData{root: n, size: cb.b.arena.size}
}

func (cb *CompactDataBuilder) build(t *pendingTree) pending {
	if t.whole != nil {
		return *t.whole
	}
	members := make([]member, 0, len(t.kids)+len(t.vals))
	for k, v := range t.vals {
		members = append(members, member{key: k, val: v})
	}
	for k, kid := range t.kids {
		members = append(members, member{key: k, val: cb.build(kid)})
	}
	return cb.b.object(members, false)
}

// compactFromGo builds the compact tree of data, consuming it (see
// fromGo).
func compactFromGo(data map[string]any) (*CompactData, error) {
	var b compactBuilder
	p, err := b.fromGo(data)
	if err != nil {
		return nil, err
	}
	root, err := b.root(p)
	if err != nil {
		return nil, err
	}
	return &CompactData{root: root, size: b.arena.size}, nil
}

// Size is the JSON text the data holds, in bytes.
func (d *CompactData) Size() int64 { return d.size }

// value materialises v as an AST value.
func (v compactVal) value() (ast.Value, error) {
	if v.node != nil {
		return v.node.value()
	}
	return decodeJSONValue(v.raw)
}

// value materialises n, all of it, as an AST object.
func (n *compactNode) value() (ast.Value, error) {
	kvs := make([][2]*ast.Term, len(n.keys))
	for i, k := range n.keys {
		v, err := n.vals[i].value()
		if err != nil {
			return nil, err
		}
		kvs[i] = [2]*ast.Term{ast.InternedTerm(k), ast.NewTerm(v)}
	}
	return ast.NewObject(kvs...), nil
}

// decodeJSONValue decodes compact JSON text (as the tree holds it) into
// an AST value, numbers spelt as in the text, as OPA's decoding of a data
// file and its conversion to AST values make them.
func decodeJSONValue(raw []byte) (ast.Value, error) {
	d := jsonDecoder{b: raw}
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	if d.skipSpace(); d.i != len(d.b) {
		return nil, errors.New("data after a JSON value")
	}
	return v, nil
}

// jsonDecoder decodes JSON text into AST values directly.
type jsonDecoder struct {
	b []byte
	i int
}

var errJSONSyntax = errors.New("invalid JSON in compact data")

func (d *jsonDecoder) skipSpace() { d.i = jsonscan.SkipSpace(d.b, d.i) }

func (d *jsonDecoder) value() (ast.Value, error) {
	d.skipSpace()
	if d.i >= len(d.b) {
		return nil, errJSONSyntax
	}
	switch c := d.b[d.i]; {
	case c == '{':
		d.i++
		var kvs [][2]*ast.Term
		d.skipSpace()
		if d.i < len(d.b) && d.b[d.i] == '}' {
			d.i++
			return ast.NewObject(), nil
		}
		for {
			d.skipSpace()
			k, err := d.str()
			if err != nil {
				return nil, err
			}
			d.skipSpace()
			if d.i >= len(d.b) || d.b[d.i] != ':' {
				return nil, errJSONSyntax
			}
			d.i++
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			kvs = append(kvs, [2]*ast.Term{ast.InternedTerm(k), ast.NewTerm(v)})
			var done bool
			if d.i, done, err = afterValue(d.b, d.i, '}'); err != nil || done {
				return ast.NewObject(kvs...), err
			}
		}
	case c == '[':
		d.i++
		var elems []*ast.Term
		d.skipSpace()
		if d.i < len(d.b) && d.b[d.i] == ']' {
			d.i++
			return ast.NewArray(), nil
		}
		for {
			v, err := d.value()
			if err != nil {
				return nil, err
			}
			elems = append(elems, ast.NewTerm(v))
			var done bool
			if d.i, done, err = afterValue(d.b, d.i, ']'); err != nil || done {
				return ast.NewArray(elems...), err
			}
		}
	case c == '"':
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		return ast.String(s), nil
	case c == 't' && bytes.HasPrefix(d.b[d.i:], []byte("true")):
		d.i += 4
		return ast.Boolean(true), nil
	case c == 'f' && bytes.HasPrefix(d.b[d.i:], []byte("false")):
		d.i += 5
		return ast.Boolean(false), nil
	case c == 'n' && bytes.HasPrefix(d.b[d.i:], []byte("null")):
		d.i += 4
		return ast.Null{}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		start := d.i
		for d.i < len(d.b) && strings.IndexByte("+-0123456789.eE", d.b[d.i]) >= 0 {
			d.i++
		}
		return ast.Number(d.b[start:d.i]), nil
	}
	return nil, errJSONSyntax
}

// str decodes the JSON string at d.i.
func (d *jsonDecoder) str() (string, error) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return "", errJSONSyntax
	}
	start := d.i
	escaped := false
	for d.i++; d.i < len(d.b); d.i++ {
		switch d.b[d.i] {
		case '\\':
			escaped = true
			d.i++
		case '"':
			d.i++
			if body := d.b[start+1 : d.i-1]; !escaped && utf8.Valid(body) {
				return string(body), nil
			}
			var s string
			if err := json.Unmarshal(d.b[start:d.i], &s); err != nil {
				return "", err
			}
			return s, nil
		}
	}
	return "", errJSONSyntax
}

// writeTo writes the data's members, keys and leaves in key order, to w
// (a digest): equal data writes equally.
func (d *CompactData) writeTo(w io.Writer) {
	var walk func(n *compactNode)
	walk = func(n *compactNode) {
		_, _ = io.WriteString(w, "{")
		for i, k := range n.keys {
			_, _ = w.Write(jsonstr.Append(nil, k, false))
			_, _ = io.WriteString(w, ":")
			if v := n.vals[i]; v.node != nil {
				walk(v.node)
			} else {
				_, _ = w.Write(v.raw)
			}
		}
		_, _ = io.WriteString(w, "}")
	}
	walk(d.root)
}

// Visit calls fn with the path of every value of the data ("" for the
// root, "/a/b" for data.a.b), an object before its members, which are
// visited only when fn returns false; it stops at fn's first error. It is
// the walk OPA's bundle reader makes to check that data lies within a
// bundle's roots. The members of objects within leaves are visited too.
func (d *CompactData) Visit(fn func(path string, object bool) (skip bool, err error)) error {
	return visitNode(d.root, "", fn)
}

func visitNode(n *compactNode, path string, fn func(string, bool) (bool, error)) error {
	if skip, err := fn(path, true); err != nil || skip {
		return err
	}
	for i, k := range n.keys {
		v := n.vals[i]
		if v.node != nil {
			if err := visitNode(v.node, path+"/"+k, fn); err != nil {
				return err
			}
			continue
		}
		if v.raw[0] != '{' {
			if _, err := fn(path+"/"+k, false); err != nil {
				return err
			}
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(v.raw))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			return err
		}
		if err := visitValue(doc, path+"/"+k, fn); err != nil {
			return err
		}
	}
	return nil
}

func visitValue(v any, path string, fn func(string, bool) (bool, error)) error {
	obj, isObj := v.(map[string]any)
	if skip, err := fn(path, isObj); err != nil || skip {
		return err
	}
	for k, child := range obj {
		if err := visitValue(child, path+"/"+k, fn); err != nil {
			return err
		}
	}
	return nil
}
