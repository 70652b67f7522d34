package policy

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// decisionQuery is one of the decision queries (fastQuery, fullQuery),
// compiled once per Set by the set's query compiler and evaluated with
// topdown directly. It sets up for topdown what rego.PreparedEvalQuery.Eval
// did (OPA v1.22.2's rego.eval), without the per-evaluation result set,
// expression values, JSON conversion and option closures: print
// statements erased, non-strict built-in errors, indexing and early exit,
// no metrics, the clock read and the random source chosen by topdown.
type decisionQuery struct {
	body     ast.Body
	compiler ast.QueryCompiler
	// allow and reasons are the query's variables holding the two
	// outputs, as the compiler rewrote them.
	allow, reasons ast.Var
}

// compileQuery compiles src against compiler, as rego does for a prepared
// query without a package or imports.
func compileQuery(compiler *ast.Compiler, src string) (decisionQuery, error) {
	parsed, err := ast.ParseBodyWithOpts(src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return decisionQuery{}, err
	}
	qc := compiler.QueryCompiler().
		WithContext(ast.NewQueryContext()).
		WithEnablePrintStatements(false).
		WithStrict(false)
	body, err := qc.Compile(parsed)
	if err != nil {
		return decisionQuery{}, err
	}
	q := decisionQuery{body: body, compiler: qc, allow: "allow", reasons: "reasons"}
	for generated, name := range qc.RewrittenVars() {
		switch name {
		case "allow":
			q.allow = generated
		case "reasons":
			q.reasons = generated
		}
	}
	return q, nil
}

// evalArgs is what one evaluation gives topdown besides the query.
type evalArgs struct {
	store  storage.Store
	txn    storage.Transaction
	tracer topdown.QueryTracer
	// rules is the rule cache; st.rules unless a test gives another.
	rules topdown.VirtualCache
	st    *evalState
}

// noRequestMetadata is the request metadata of every evaluation: topdown
// would make an empty map for each. Only built-ins registered by the
// embedding program read it, and this package registers none.
var noRequestMetadata = map[string]any{}

// run evaluates the query and returns how many results it had and the
// outputs of the first (nil when it had none).
func (q *decisionQuery) run(ctx context.Context, c *ast.Compiler, a *evalArgs) (n int, allow, reasons *ast.Term, err error) {
	tq := topdown.NewQuery(q.body).
		WithQueryCompiler(q.compiler).
		WithCompiler(c).
		WithStore(a.store).
		WithTransaction(a.txn).
		WithMetrics(metrics.NoOp()).
		WithStrictBuiltinErrors(false).
		WithRequestMetadata(noRequestMetadata).
		WithInput(&a.st.input).
		WithVirtualCache(a.rules)
	if done := ctx.Done(); done != nil {
		tq = tq.WithCancel(doneCancel(done))
	}
	if a.tracer != nil {
		tq = tq.WithQueryTracer(a.tracer)
	}
	a.st.start(q)
	err = tq.Iter(ctx, a.st.collect)
	return a.st.n, a.st.allow, a.st.reasons, err
}

// doneCancel stops an evaluation once its context is done: topdown asks
// Cancelled before each expression, and a closed channel answers without
// a lock. Unlike topdown.NewCancel with context.AfterFunc (what rego does
// with an external cancel), it costs no allocation and no registration on
// the context. Cancel does nothing: the evaluation is canceled through its
// context.
type doneCancel <-chan struct{}

var _ topdown.Cancel = doneCancel(nil)

// Cancel implements topdown.Cancel; see doneCancel.
func (doneCancel) Cancel() {}

// Cancelled implements topdown.Cancel.
func (c doneCancel) Cancelled() bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// readTxn opens the read transaction every evaluation of a set shares.
// The set's store (an inmem store, or a compactStore over one) is one
// that nothing writes after build (see Storage): a read transaction of it only reads the store's data, and
// holds the store's read lock for as long as the set lives.
func readTxn(store storage.Store) (storage.Transaction, error) {
	txn, err := store.NewTransaction(context.Background())
	if err != nil {
		return nil, fmt.Errorf("open data store: %w", err)
	}
	return txn, nil
}
