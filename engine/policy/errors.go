package policy

import (
	"errors"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Problem is one thing wrong with a policy set: a parse or compile error of
// a module, an unreadable data file, a missing package.
type Problem struct {
	// File is the file the problem is in, as the loader named it; empty
	// when the problem concerns the set as a whole.
	File string `json:"file,omitempty"`
	// Row is the 1-based line, or 0 when unknown.
	Row int `json:"row,omitempty"`
	// Col is the 1-based column, or 0 when unknown.
	Col int `json:"col,omitempty"`
	// Code is OPA's error code ("rego_parse_error", "rego_type_error",
	// "rego_compile_error", …) or one of this package's ("data_error",
	// "load_error", "package_missing").
	Code string `json:"code,omitempty"`
	// Msg says what is wrong, on one line.
	Msg string `json:"message"`
	// Details holds further lines some errors carry, such as the argument
	// types a type error saw and expected.
	Details []string `json:"details,omitempty"`
}

// String formats the problem as "file:row:col: code: msg", leaving out the
// parts that are unknown, followed by the details, one per indented line.
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Row > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(p.Row))
			if p.Col > 0 {
				b.WriteByte(':')
				b.WriteString(strconv.Itoa(p.Col))
			}
		}
		b.WriteString(": ")
	}
	if p.Code != "" {
		b.WriteString(p.Code)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	for _, d := range p.Details {
		b.WriteString("\n\t")
		b.WriteString(d)
	}
	return b.String()
}

// Problem codes of this package, beside OPA's own.
const (
	// CodeLoad is a file or directory that could not be read.
	CodeLoad = "load_error"
	// CodeData is a data file that is not a JSON/YAML object or that
	// conflicts with another data file.
	CodeData = "data_error"
	// CodePackageMissing means no module declares package svc.authz.
	CodePackageMissing = "package_missing"
)

// Error is the failure to load or compile a policy set. It lists every
// problem found, in file order, so that a linter can report all of them.
type Error struct {
	// Problems is never empty.
	Problems []Problem
}

// Error formats one problem per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// problemsOf converts OPA's parse and compile errors into Problems; any
// other error becomes one Problem of the given file.
func problemsOf(file string, err error) []Problem {
	errs, ok := OPAErrors(err)
	if !ok {
		return []Problem{{File: file, Code: CodeLoad, Msg: err.Error()}}
	}
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		out = append(out, problemOf(file, e))
	}
	return out
}

// OPAErrors is the parse or compile errors of OPA that err holds: the
// ast.Errors in its chain, else its one *ast.Error. ok is false when err
// holds neither.
func OPAErrors(err error) (errs []*ast.Error, ok bool) {
	var all ast.Errors
	if errors.As(err, &all) {
		return all, true
	}
	var one *ast.Error
	if errors.As(err, &one) {
		return []*ast.Error{one}, true
	}
	return nil, false
}

func problemOf(file string, e *ast.Error) Problem {
	p := Problem{File: file, Code: e.Code, Msg: e.Message}
	if e.Details != nil {
		p.Details = e.Details.Lines()
	}
	if e.Location != nil {
		if e.Location.File != "" {
			p.File = e.Location.File
		}
		p.Row, p.Col = e.Location.Row, e.Location.Col
	}
	return p
}
