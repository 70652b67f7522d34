// Package policy loads, compiles and evaluates the Rego policies that
// decide authorization requests. A policy set is a directory (or bundle) of
// Rego v1 modules plus optional data files; the package svc.authz must
// define it. Its rule allow decides and its set deny_reasons explains:
// both are read by one query compiled once per Set, so the hot path does no
// parsing or compiling.
//
// A Set is immutable once built and safe for concurrent use. A Store holds
// the active Set and swaps it atomically when a new policy is activated.
// Set.Decide answers repeated inputs from a bounded decision cache that
// lives and dies with the Set; Set.Eval always evaluates.
package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"
)

// Package is the Rego package every policy set must define.
const Package = "svc.authz"

// packageRef is data.svc.authz, the path of Package in the data document.
var packageRef = ast.MustParseRef("data." + Package)

// fastQuery reads both outputs of the policy in one evaluation; it has no
// result when either rule is undefined.
const fastQuery = `allow := data.svc.authz.allow; reasons := data.svc.authz.deny_reasons`

// fullQuery is fastQuery for policies that leave allow or deny_reasons
// undefined: the comprehensions turn an undefined rule into an empty
// array, so it always has exactly one result.
const fullQuery = `allow := [x | x := data.svc.authz.allow]; reasons := [x | x := data.svc.authz.deny_reasons]`

// Set is a compiled policy set with its data and its compiled decision
// query. It is immutable, apart from its decision cache, and safe for
// concurrent use.
type Set struct {
	files    []string
	modules  map[string]*ast.Module
	compiler *ast.Compiler
	store    storage.Store
	// txn is the read transaction of store every evaluation shares.
	txn  storage.Transaction
	fast decisionQuery
	full decisionQuery
	// states holds the states of finished evaluations for the next.
	states   *evalStates
	revision string
	// plan says which parts of input decide; cache is nil when the
	// policy's decisions cannot be cached.
	plan  cachePlan
	cache *decisionCache
	// resPlans answers PlanResources.
	resPlans *resourcePlans
}

// FromModules compiles a policy set from Rego sources keyed by file name
// and a data document (nil for none). It is what bundles and tests use;
// Load and LoadFS read the same from files. Unless opts allow them, a
// call to one of NetworkBuiltins does not compile. Errors are *Error.
func FromModules(modules map[string]string, data map[string]any, opts ...Option) (*Set, error) {
	files := slices.Sorted(maps.Keys(modules))
	return build(files, modules, data, optionsOf(opts))
}

// build parses and compiles the modules, prepares the decision query and
// returns the Set; files lists every file the set came from, data files
// included.
func build(files []string, sources map[string]string, data map[string]any, o options) (*Set, error) {
	if len(sources) == 0 {
		return nil, &Error{Problems: []Problem{{Code: CodeLoad, Msg: "no policy modules (*.rego) to load"}}}
	}
	var err error
	if o.compact != nil && data != nil {
		return nil, &Error{Problems: []Problem{{Code: CodeData, Msg: "data given both as a document and as compact data"}}}
	}
	if o.compact == nil {
		if data, err = setData(data, o.decodedJSON); err != nil {
			return nil, &Error{Problems: []Problem{{Code: CodeData, Msg: err.Error()}}}
		}
	}
	names := slices.Sorted(maps.Keys(sources))
	parsed := make(map[string]*ast.Module, len(sources))
	var problems []Problem
	hasPackage := false
	for _, name := range names {
		m, err := ast.ParseModuleWithOpts(name, sources[name], ast.ParserOptions{
			RegoVersion:       ast.RegoV1,
			ProcessAnnotation: true,
		})
		if err != nil {
			problems = append(problems, problemsOf(name, err)...)
			continue
		}
		if m.Package.Path.Equal(packageRef) {
			hasPackage = true
		}
		parsed[name] = m
	}
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	if !hasPackage {
		return nil, &Error{Problems: []Problem{{Code: CodePackageMissing, Msg: "no policy defines package " + Package}}}
	}

	ctx := context.Background()
	revision := o.revision
	if revision == "" {
		revision = contentRevision(names, sources, data, o.compact)
	}
	// Data of less than compactThreshold is held as AST values, converted
	// once, here, instead of on every read during evaluation; larger data
	// as a compact tree (see compactStore). The document itself is not
	// kept: the store's values are the set's data.
	store, err := dataStore(ctx, data, o.compact)
	if err != nil {
		return nil, &Error{Problems: []Problem{{Code: CodeData, Msg: err.Error()}}}
	}
	data = nil
	caps := o.capabilities()
	compiler, err := compile(ctx, store, parsed, caps)
	if err != nil {
		return nil, err
	}
	s := &Set{
		files:    files,
		modules:  parsed,
		compiler: compiler,
		store:    store,
		revision: revision,
		plan:     planCache(compiler.Modules),
		states:   &evalStates{consts: findConstantRules(compiler)},
		resPlans: &resourcePlans{},
	}
	if s.plan.disabled == "" && o.decisionCacheSize() > 0 {
		s.cache = newDecisionCache(s.plan, o.decisionCacheSize())
	}
	for _, q := range []struct {
		dst   *decisionQuery
		query string
	}{{&s.fast, fastQuery}, {&s.full, fullQuery}} {
		if *q.dst, err = compileQuery(compiler, q.query); err != nil {
			return nil, &Error{Problems: problemsOf("", fmt.Errorf("prepare decision query: %w", err))}
		}
	}
	if s.txn, err = readTxn(store); err != nil {
		return nil, &Error{Problems: problemsOf("", err)}
	}
	return s, nil
}

// dataStore returns the store of a set's data: compact when it was given
// so or data is at least compactThreshold of JSON, else an in-memory
// store of AST values. data is consumed either way.
func dataStore(ctx context.Context, data map[string]any, compact *CompactData) (storage.Store, error) {
	if compact == nil {
		var err error
		if compact, err = compactFromGo(data); err != nil {
			return nil, fmt.Errorf("data is not a JSON document: %w", err)
		}
	}
	if compact.size >= compactThreshold {
		return newCompactStore(compact), nil
	}
	root, err := compact.root.value()
	if err != nil {
		return nil, err
	}
	return astStore(ctx, root)
}

// astStore returns an in-memory store holding root, the data, as AST
// values.
func astStore(ctx context.Context, root ast.Value) (storage.Store, error) {
	store := inmem.NewWithOpts(inmem.OptRoundTripOnWrite(false), inmem.OptReturnASTValuesOnRead(true))
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return nil, err
	}
	if err := store.Write(ctx, txn, storage.AddOp, storage.RootPath, root); err != nil {
		store.Abort(ctx, txn)
		return nil, err
	}
	return store, store.Commit(ctx, txn)
}

// contentRevision is the default revision of a set: a digest of its
// module sources and data, so that status, audit records and traces tell
// which policy decided even without a bundle revision.
func contentRevision(names []string, sources map[string]string, data map[string]any, compact *CompactData) string {
	h := sha256.New()
	for _, name := range names {
		fmt.Fprintf(h, "%d:%s%d:%s", len(name), name, len(sources[name]), sources[name])
	}
	if compact != nil {
		compact.writeTo(h)
		return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
	}
	// encoding/json sorts map keys, so equal data hashes equally.
	if b, err := json.Marshal(data); err == nil {
		h.Write(b)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// jsonData returns a JSON copy of data (an empty object for nil), so that
// the set never shares the caller's maps and holds only values the store
// can represent.
func jsonData(data map[string]any) (map[string]any, error) {
	if data == nil {
		return map[string]any{}, nil
	}
	var x any = data
	if err := util.RoundTrip(&x); err != nil {
		return nil, fmt.Errorf("data is not a JSON document: %w", err)
	}
	obj, ok := x.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("data is not a JSON object")
	}
	return obj, nil
}

// compile compiles the modules against the store, so that a rule whose
// path collides with a data document is reported as a conflict, with the
// built-ins caps allows (nil: all of OPA's).
func compile(ctx context.Context, store storage.Store, modules map[string]*ast.Module, caps *ast.Capabilities) (*ast.Compiler, error) {
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, fmt.Errorf("open data store: %w", err)
	}
	defer store.Abort(ctx, txn)
	c := ast.NewCompiler().
		WithDefaultRegoVersion(ast.RegoV1).
		WithPathConflictsCheck(storage.NonEmpty(ctx, store, txn))
	if caps != nil {
		c = c.WithCapabilities(caps)
	}
	if c.Compile(modules); c.Failed() {
		return nil, &Error{Problems: forbiddenBuiltins(problemsOf("", c.Errors))}
	}
	return c, nil
}

// WithRevision returns a copy of the set that reports rev as its revision
// (a bundle revision, a content hash). The copy shares everything else,
// its decision cache included: the policy is the same.
func (s *Set) WithRevision(rev string) *Set {
	c := *s
	c.revision = rev
	return &c
}

// Revision is the revision given with WithRevision; by default a digest
// of the sources and data ("sha256:" and 16 hex digits).
func (s *Set) Revision() string { return s.revision }

// Files lists the files the set was loaded from (modules and data files),
// sorted, as the loader named them.
func (s *Set) Files() []string { return slices.Clone(s.files) }

// Modules returns the parsed modules keyed by file name. The modules are
// shared with the compiler and must not be modified.
func (s *Set) Modules() map[string]*ast.Module { return maps.Clone(s.modules) }

// Compiler returns the compiler holding the compiled modules, for callers
// that build their own queries (coverage, explanations, linting). It must
// not be modified.
func (s *Set) Compiler() *ast.Compiler { return s.compiler }

// Data returns the data document the policies see as data (merged data
// files), decoded anew from the set's store: the set keeps its data once,
// as the store's values, not also as the document it was given.
func (s *Set) Data() map[string]any {
	v, err := s.store.Read(context.Background(), s.txn, storage.RootPath)
	if err != nil {
		return map[string]any{}
	}
	if av, ok := v.(ast.Value); ok {
		if doc, err := ast.JSON(av); err == nil {
			v = doc
		}
	}
	if doc, ok := v.(map[string]any); ok {
		return doc
	}
	return map[string]any{}
}

// Storage returns the storage holding Data, for callers that prepare their
// own queries against the same compiler and data. It must only be read:
// the set's evaluations share one read transaction of it, open for as long
// as the set lives, so committing a write would wait for ever.
func (s *Set) Storage() storage.Store { return s.store }
