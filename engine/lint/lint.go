// Package lint checks a policy directory for mistakes before it is
// tested, bundled or served. It reports OPA's own parse and compile errors,
// with OPA's strict checks (unused variables and imports, shadowed
// input/data) switched on, and the rules of this service: the svc.authz
// package, its allow and deny_reasons rules, and references to input
// fields the policy input never has.
//
// Every finding carries a stable rule id and a severity. Modules are read
// as policy.Load reads them: every .rego file under the directory except
// *_test.rego files and hidden directories.
//
// Packages: a module at the top of the directory must be package
// svc.authz. Helper packages live in subdirectories and must sit under the
// svc namespace (svc.lib.strings, svc.authz.tables), because bundles claim
// the root "svc" and could not hold them otherwise.
package lint

import (
	"cmp"
	"slices"
)

// Severity says how bad a finding is.
type Severity string

// Severities.
const (
	// Error findings make the lint fail.
	Error Severity = "error"
	// Warning findings make the lint fail only in strict mode.
	Warning Severity = "warning"
)

// Rule ids. They never change once released: scripts and CI filter on
// them.
const (
	// RuleParseError is a Rego syntax error.
	RuleParseError = "parse-error"
	// RuleCompileError is an OPA compile error without a more specific id.
	RuleCompileError = "compile-error"
	// RuleTypeError is an OPA type error, such as an undefined function.
	RuleTypeError = "type-error"
	// RuleUnsafeVar is a variable that is never bound.
	RuleUnsafeVar = "unsafe-var"
	// RuleRecursion is a rule that depends on itself.
	RuleRecursion = "recursion"
	// RuleUnusedVariable is a variable or argument that is assigned or
	// declared but never used (OPA strict mode).
	RuleUnusedVariable = "unused-variable"
	// RuleUnusedImport is an import nothing refers to (OPA strict mode).
	RuleUnusedImport = "unused-import"
	// RuleShadowsRoot is a rule, argument or variable named input or
	// data, which hides the document of that name.
	RuleShadowsRoot = "shadows-builtin-root"
	// RulePackage is a module in the wrong package.
	RulePackage = "package-not-svc-authz"
	// RuleNoAllow means package svc.authz has no allow rule.
	RuleNoAllow = "no-allow-rule"
	// RuleNoDefaultAllowFalse means allow lacks `default allow := false`
	// (or has another default), so that it can be undefined or true when
	// no rule matches.
	RuleNoDefaultAllowFalse = "no-default-allow-false"
	// RuleDenyReasons means deny_reasons is not a set of strings.
	RuleDenyReasons = "deny-reasons-not-string-set"
	// RuleUnknownInputField is a reference to an input path the policy
	// input never has.
	RuleUnknownInputField = "unknown-input-field"
	// RuleRawPathComparison is a comparison of input.request.path (==,
	// startswith, a regex …): "/API/Export" and "/export.json" spell the
	// route it means differently, while input.request.canonical_path
	// spells them all alike.
	RuleRawPathComparison = "raw-path-comparison"
	// RuleNotIndexed is a rule no condition of which OPA's rule index can
	// use, in a set of rules whose indexing decides what a query costs: it
	// is evaluated for every query of the set.
	RuleNotIndexed = "rule-not-indexed"
	// RuleDataError is a data file that does not load.
	RuleDataError = "data-error"
	// RuleLoadError is a file or directory that cannot be read.
	RuleLoadError = "load-error"
)

// RuleInfo describes a rule id.
type RuleInfo struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	Summary  string   `json:"summary"`
}

// Rules lists every rule id with its default severity, in a stable order.
func Rules() []RuleInfo {
	return []RuleInfo{
		{RuleParseError, Error, "Rego syntax error"},
		{RuleCompileError, Error, "OPA compile error"},
		{RuleTypeError, Error, "OPA type error, such as an undefined function or a wrong argument"},
		{RuleUnsafeVar, Error, "variable that is never bound"},
		{RuleRecursion, Error, "rule that depends on itself"},
		{RuleShadowsRoot, Error, "rule, argument or variable named input or data"},
		{RulePackage, Error, "top-level module not in package svc.authz, or helper package outside svc"},
		{RuleNoAllow, Error, "package svc.authz defines no allow rule"},
		{RuleNoDefaultAllowFalse, Error, "allow has no `default allow := false`"},
		{RuleDenyReasons, Error, "deny_reasons is not a set of strings"},
		{RuleDataError, Error, "data file that does not load"},
		{RuleLoadError, Error, "file that cannot be read"},
		{RuleUnusedVariable, Warning, "variable or argument never used"},
		{RuleUnusedImport, Warning, "import never used"},
		{RuleUnknownInputField, Warning, "reference to a field the policy input does not have"},
		{RuleNotIndexed, Warning, ruleNotIndexedSummary},
		{RuleRawPathComparison, Warning, "input.request.path compared with ==, startswith, a regex or the like instead of input.request.canonical_path"},
	}
}

// Finding is one problem at one place.
type Finding struct {
	// File is the file as the report names it.
	File string `json:"-"`
	// Line and Col are 1-based; Col is 0 when OPA gives no column.
	Line     int      `json:"line"`
	Col      int      `json:"col"`
	Severity Severity `json:"severity"`
	Rule     string   `json:"rule"`
	Message  string   `json:"message"`
}

// FileReport holds the findings of one file, in line order.
type FileReport struct {
	File     string    `json:"file"`
	Findings []Finding `json:"findings"`
}

// Report is the result of linting a policy directory.
type Report struct {
	// Files lists every policy file, and every other file with a finding,
	// sorted by name.
	Files    []FileReport `json:"files"`
	Errors   int          `json:"errors"`
	Warnings int          `json:"warnings"`
}

// Options tune a lint run.
type Options struct {
	// Strict turns warnings into errors.
	Strict bool
}

// newReport groups findings by file, sorts them, applies opts and counts
// them. files lists the files to report even without findings.
func newReport(files []string, findings []Finding, opts Options) *Report {
	byFile := map[string][]Finding{}
	for _, f := range files {
		byFile[f] = nil
	}
	r := &Report{}
	for _, f := range findings {
		if opts.Strict && f.Severity == Warning {
			f.Severity = Error
		}
		if f.Severity == Error {
			r.Errors++
		} else {
			r.Warnings++
		}
		byFile[f.File] = append(byFile[f.File], f)
	}
	for name, fs := range byFile {
		slices.SortFunc(fs, func(a, b Finding) int {
			return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col), cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Message, b.Message))
		})
		if fs == nil {
			fs = []Finding{}
		}
		r.Files = append(r.Files, FileReport{File: name, Findings: fs})
	}
	slices.SortFunc(r.Files, func(a, b FileReport) int { return cmp.Compare(a.File, b.File) })
	return r
}

// dedupe drops findings that repeat an earlier one of the same rule at the
// same line of the same file, as happens when OPA and a rule of this
// package see the same mistake.
func dedupe(fs []Finding) []Finding {
	type key struct {
		file, rule string
		line       int
	}
	seen := map[key]bool{}
	out := fs[:0]
	for _, f := range fs {
		k := key{f.File, f.Rule, f.Line}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, f)
	}
	return out
}
