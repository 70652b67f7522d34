package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/svc-dev/svc/engine/policy"
)

// module is one policy file: its name as reported, its path relative to
// the policy directory, and its parsed module (nil when it did not parse).
type module struct {
	name string
	rel  string
	src  string
	mod  *ast.Module
}

// Dir lints the policy directory dir. The error is for a directory that
// cannot be linted at all (missing, unreadable, no .rego file); problems
// in the policies are findings in the report.
func Dir(dir string, opts Options) (*Report, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("policy directory: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("policy directory %s: not a directory", dir)
	}
	prefix := filepath.ToSlash(filepath.Clean(dir))
	display := func(rel string) string { return path.Join(prefix, rel) }

	var (
		mods     []*module
		findings []Finding
	)
	fsys := os.DirFS(dir)
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			findings = append(findings, Finding{File: display(p), Severity: Error, Rule: RuleLoadError, Message: err.Error()})
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(p, ".rego") || strings.HasSuffix(p, "_test.rego") {
			return nil
		}
		src, err := fs.ReadFile(fsys, p)
		if err != nil {
			findings = append(findings, Finding{File: display(p), Severity: Error, Rule: RuleLoadError, Message: err.Error()})
			return nil
		}
		mods = append(mods, &module{name: display(p), rel: p, src: string(src)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk policy directory: %w", err)
	}
	if len(mods) == 0 && len(findings) == 0 {
		return nil, fmt.Errorf("policy directory %s: no policy files (*.rego) found", dir)
	}
	findings = append(findings, lintModules(mods)...)

	names := make([]string, len(mods))
	for i, m := range mods {
		names[i] = m.name
	}
	if !slices.ContainsFunc(findings, func(f Finding) bool { return f.Severity == Error }) {
		// The Rego is sound; what the loader adds is about data files
		// and how they meet the rules.
		findings = append(findings, loadFindings(dir)...)
	}
	return newReport(names, dedupe(findings), opts), nil
}

// lintModules parses, compiles and checks the modules.
func lintModules(mods []*module) []Finding {
	var findings []Finding
	parsed := map[string]*ast.Module{}
	for _, m := range mods {
		mod, err := ast.ParseModuleWithOpts(m.name, m.src, ast.ParserOptions{
			RegoVersion:       ast.RegoV1,
			ProcessAnnotation: true,
		})
		if err != nil {
			findings = append(findings, opaFindings(m.name, err)...)
			continue
		}
		m.mod = mod
		parsed[m.name] = mod
	}
	var (
		types    *ast.TypeEnv
		compiled *ast.Compiler
	)
	if len(parsed) == len(mods) {
		// Compiling only some modules would report references to the
		// rules of the others as errors, so compile only a complete set.
		var compileFindings []Finding
		compileFindings, compiled = compile(parsed)
		findings = append(findings, compileFindings...)
		if compiled != nil {
			types = compiled.TypeEnv
		}
	}
	findings = append(findings, checkPackages(mods)...)
	if len(parsed) == len(mods) {
		// With a module missing, allow or deny_reasons may be in it.
		findings = append(findings, checkDecision(mods, types)...)
	}
	findings = append(findings, checkShadowing(mods)...)
	findings = append(findings, checkInputRefs(mods)...)
	findings = append(findings, checkRawPath(mods)...)
	findings = append(findings, checkIndexed(compiled)...)
	return findings
}

// compile compiles the modules twice: in strict mode, for OPA's strict
// checks, and in normal mode, whose errors strict mode can hide (it stops
// at the first failing stage) and whose type environment the decision
// checks use, returned with its rule indices (nil when it failed).
// Compilation rewrites modules, so each run gets copies.
func compile(parsed map[string]*ast.Module) ([]Finding, *ast.Compiler) {
	var findings []Finding
	seen := map[string]bool{}
	add := func(errs ast.Errors) {
		for _, e := range errs {
			f := opaFinding("", e)
			k := fmt.Sprintf("%s:%d:%d:%s", f.File, f.Line, f.Col, f.Message)
			if !seen[k] {
				seen[k] = true
				findings = append(findings, f)
			}
		}
	}
	copies := func() map[string]*ast.Module {
		out := make(map[string]*ast.Module, len(parsed))
		for k, m := range parsed {
			out[k] = m.Copy()
		}
		return out
	}
	strict := ast.NewCompiler().WithStrict(true).WithDefaultRegoVersion(ast.RegoV1)
	strict.Compile(copies())
	add(strict.Errors)

	normal := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1)
	normal.Compile(copies())
	add(normal.Errors)
	if normal.Failed() {
		return findings, nil
	}
	return findings, normal
}

// opaFindings turns an error of OPA's parser or compiler into findings.
func opaFindings(file string, err error) []Finding {
	errs, ok := policy.OPAErrors(err)
	if !ok {
		return []Finding{{File: file, Severity: Error, Rule: RuleCompileError, Message: err.Error()}}
	}
	out := make([]Finding, 0, len(errs))
	for _, e := range errs {
		out = append(out, opaFinding(file, e))
	}
	return out
}

// opaFinding maps one OPA error to a finding with a stable rule id.
func opaFinding(file string, e *ast.Error) Finding {
	f := Finding{File: file, Severity: Error, Message: e.Message}
	if e.Location != nil {
		if e.Location.File != "" {
			f.File = e.Location.File
		}
		f.Line, f.Col = e.Location.Row, e.Location.Col
	}
	msg := e.Message
	switch e.Code {
	case ast.ParseErr:
		f.Rule = RuleParseError
	case ast.TypeErr:
		f.Rule = RuleTypeError
	case ast.UnsafeVarErr:
		f.Rule = RuleUnsafeVar
	case ast.RecursionErr:
		f.Rule = RuleRecursion
	case ast.CompileErr:
		switch {
		case strings.HasPrefix(msg, "import ") && strings.HasSuffix(msg, " unused"):
			f.Rule, f.Severity = RuleUnusedImport, Warning
		case strings.HasSuffix(msg, " unused") && strings.Contains(msg, " var "),
			strings.HasPrefix(msg, "unused argument"):
			f.Rule, f.Severity = RuleUnusedVariable, Warning
		case strings.Contains(msg, "must not shadow input"), strings.Contains(msg, "must not shadow data"):
			f.Rule = RuleShadowsRoot
		default:
			f.Rule = RuleCompileError
		}
	default:
		f.Rule = strings.ReplaceAll(strings.TrimPrefix(e.Code, "rego_"), "_", "-")
	}
	return f
}

// loadFindings loads dir as the engine would and reports what the Rego
// checks cannot see: data files that do not decode or that conflict with
// each other or with rules. Network built-ins are a setting of the
// sidecar (policy.allow_network_builtins), not a lint finding.
func loadFindings(dir string) []Finding {
	_, err := policy.Load(dir, policy.AllowNetworkBuiltins(true))
	var perr *policy.Error
	if err == nil || !errors.As(err, &perr) {
		return nil
	}
	var out []Finding
	for _, p := range perr.Problems {
		f := Finding{File: p.File, Line: p.Row, Col: p.Col, Severity: Error, Message: p.Msg}
		if f.File == "" {
			f.File = filepath.ToSlash(filepath.Clean(dir))
		}
		switch p.Code {
		case policy.CodeData:
			f.Rule = RuleDataError
			if f.Line == 0 && strings.HasSuffix(f.File, ".json") {
				f.Line, f.Col = jsonErrorPosition(f.File)
			}
		case policy.CodeLoad:
			f.Rule = RuleLoadError
		case policy.CodePackageMissing:
			continue // reported by no-allow-rule and package-not-svc-authz
		default:
			f.Rule = opaFinding("", &ast.Error{Code: p.Code, Message: p.Msg}).Rule
		}
		out = append(out, f)
	}
	return out
}

// jsonErrorPosition returns the line and column of the first syntax error
// in the JSON file name, or zeros when there is none to locate.
func jsonErrorPosition(name string) (line, col int) {
	raw, err := os.ReadFile(filepath.FromSlash(name))
	if err != nil {
		return 0, 0
	}
	var v any
	var serr *json.SyntaxError
	if err := json.Unmarshal(raw, &v); !errors.As(err, &serr) {
		return 0, 0
	}
	off := int(min(serr.Offset, int64(len(raw))))
	// The offset counts the bytes read, including the offending one.
	if off > 0 {
		off--
	}
	line = 1 + bytes.Count(raw[:off], []byte("\n"))
	col = 1 + utf8.RuneCount(raw[bytes.LastIndexByte(raw[:off], '\n')+1:off])
	return line, col
}
