package policy

import (
	"context"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"
)

// compactThreshold is the size of JSON text from which a set's data is
// kept as a compact tree rather than as AST values: below it the AST
// values take a few MB at most and evaluation reads them without
// decoding; above it they take about 4× the JSON, which a compact tree
// does not.
var compactThreshold int64 = 1 << 20

// compactStore is a read-only storage.Store of a compact data tree. An
// in-memory store with no data provides the transactions, policies and
// triggers; Read answers for the data from the tree, decoding the leaf a
// path ends in (or the rest of the path within it) into AST values, as
// the in-memory store with OptReturnASTValuesOnRead returns them. A path
// ending at an internal node materialises all of it: correct, and slow
// for a large table, which topdown reads whole only where a policy
// iterates it. Writes to the data are refused: nothing writes a set's
// data after it is built.
type compactStore struct {
	storage.Store
	data *CompactData
}

// newCompactStore returns a store over data.
func newCompactStore(data *CompactData) *compactStore {
	return &compactStore{
		Store: inmem.NewWithOpts(inmem.OptRoundTripOnWrite(false), inmem.OptReturnASTValuesOnRead(true)),
		data:  data,
	}
}

// errNotFound is the error the in-memory store gives for a path that
// does not exist; topdown tells an undefined document by its code.
var errNotFound = &storage.Error{Code: storage.NotFoundErr, Message: "document does not exist"}

// find walks the tree's nodes along path: to the node it ends at (node
// set), or to the leaf it reaches (raw set) with the rest of the path
// within it; ok is false when a member is missing.
func (d *CompactData) find(path []string) (node *compactNode, raw []byte, rest []string, ok bool) {
	n := d.root
	for i, k := range path {
		v, found := n.get(k)
		if !found {
			return nil, nil, nil, false
		}
		if v.node == nil {
			return nil, v.raw, path[i+1:], true
		}
		n = v.node
	}
	return n, nil, nil, true
}

// Read implements storage.Store.
func (s *compactStore) Read(_ context.Context, _ storage.Transaction, path storage.Path) (any, error) {
	n, raw, rest, ok := s.data.find(path)
	switch {
	case !ok:
		return nil, errNotFound
	case n != nil:
		return n.value()
	}
	sub, ok, err := locate(raw, rest)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errNotFound
	}
	return decodeJSONValue(sub)
}

// errReadOnly refuses writes to a set's data.
var errReadOnly = &storage.Error{Code: storage.InvalidTransactionErr, Message: "a policy set's data is read-only"}

// Write implements storage.Store: it refuses every write.
func (s *compactStore) Write(context.Context, storage.Transaction, storage.PatchOp, storage.Path, any) error {
	return errReadOnly
}

// Truncate implements storage.Store: it refuses to replace the data.
func (s *compactStore) Truncate(context.Context, storage.Transaction, storage.TransactionParams, storage.Iterator) error {
	return errReadOnly
}

// NonEmpty implements storage.NonEmptyer, which the compiler's check of
// rules against data asks: whether data exists at a rule's path or at a
// prefix of it that is not an object. storage.NonEmpty would read each
// prefix, and a read of data.svc materialises all of it.
func (s *compactStore) NonEmpty(context.Context, storage.Transaction) func([]string) (bool, error) {
	return func(path []string) (bool, error) {
		n, raw, rest, ok := s.data.find(path)
		if !ok || n != nil || len(rest) == 0 {
			return ok, nil
		}
		// Within a leaf: its values decide.
		val, err := decodeJSONValue(raw)
		if err != nil {
			return false, err
		}
		return nonEmptyWithin(val, rest), nil
	}
}

// nonEmptyWithin is NonEmpty within the value v: true when path exists
// in v or its longest prefix that does is not an object.
func nonEmptyWithin(v ast.Value, path []string) bool {
	for _, k := range path {
		switch x := v.(type) {
		case ast.Object:
			t := x.Get(ast.InternedTerm(k))
			if t == nil {
				return false
			}
			v = t.Value
		case *ast.Array:
			i, ok := util.Atoi(k)
			if !ok || i < 0 || i >= x.Len() {
				return true
			}
			v = x.Elem(i).Value
		default:
			return true
		}
	}
	return true
}
