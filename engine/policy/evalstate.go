package policy

import (
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// evalState is what one evaluation needs besides the query and the input
// value: the rule cache, the input term, and the collector of the query's
// results with its callback bound once. A set keeps the states of
// finished evaluations for the next (evalStates), so that none of this is
// allocated per evaluation.
type evalState struct {
	rules ruleCache
	input ast.Term
	// doc builds the input document of a typed input (Set.input).
	doc docBuilder
	// The results of the running query: how many, and the first one's
	// outputs at the variables allow and reasons.
	allowVar, reasonsVar ast.Var
	n                    int
	allow, reasons       *ast.Term
	collect              func(topdown.QueryResult) error
}

func newEvalState() *evalState {
	st := &evalState{rules: *newRuleCache(), doc: docBuilder{nodes: make([]docNode, 0, docNodes), strs: make([]docString, 0, maxDocStrings)}}
	st.collect = st.result
	return st
}

// start readies the collector for a run of q.
func (st *evalState) start(q *decisionQuery) {
	st.allowVar, st.reasonsVar = q.allow, q.reasons
	st.n, st.allow, st.reasons = 0, nil, nil
}

func (st *evalState) result(qr topdown.QueryResult) error {
	if st.n == 0 {
		st.allow, st.reasons = qr[st.allowVar], qr[st.reasonsVar]
	}
	st.n++
	return nil
}

// evalStates hands out the evaluation states of one set.
type evalStates struct {
	pool sync.Pool
	// consts are the set's constant rules, nil when it has none.
	consts *constantRules
}

// get returns a state whose rule cache holds the set's constant rules
// when withConsts is true. A traced evaluation goes without them, so that
// the tracer sees every rule evaluated as it always was.
func (p *evalStates) get(withConsts bool) *evalState {
	st, ok := p.pool.Get().(*evalState)
	if !ok {
		st = newEvalState()
	}
	st.rules.consts = nil
	if withConsts {
		st.rules.consts = p.consts
	}
	return st
}

// put keeps st for another evaluation, unless its rule cache grew too
// large to keep (see maxPooledEntries). Nothing of the evaluation may be
// used after.
func (p *evalStates) put(st *evalState) {
	st.input = ast.Term{}
	st.allow, st.reasons = nil, nil
	if !st.doc.reset() {
		st.doc = docBuilder{nodes: make([]docNode, 0, docNodes), strs: make([]docString, 0, maxDocStrings)}
	}
	if st.rules.reset() {
		p.pool.Put(st)
	}
}
