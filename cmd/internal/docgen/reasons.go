package docgen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ReasonCode is one stable reason code declared as a constant.
type ReasonCode struct {
	Code    string // "token-expired"
	Where   string // where the reader meets it ("SAML gateway")
	Meaning string // the constant's doc comment, else its group's
}

// reasonFile is a file of package reason and how the reference names
// where its codes are met.
type reasonFile struct{ file, where string }

// reasonFiles are the files of package reason, the one home of the reason
// codes, in the order of the reference.
var reasonFiles = []reasonFile{
	{"reason.go", "decisions (all APIs)"},
	{"signin.go", "OIDC sign-in"},
	{"api.go", "HTTP API, status"},
	{"saml.go", "SAML gateway"},
	{"rustabi.go", "Rust C ABI"},
}

// ReasonCodes reads the constants of type Code of package reason, file by
// file in the order of reasonFiles and in declaration order within a file,
// with their doc comments. A file of the package that declares codes but
// is not in reasonFiles is an error, so that no code is left out.
func ReasonCodes(root string) ([]ReasonCode, error) {
	matches, err := filepath.Glob(filepath.Join(root, "reason", "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	byName := map[string]*ast.File{}
	var rest []string // the files not in reasonFiles
	for _, m := range matches {
		name := filepath.Base(m)
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, m, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		byName[name] = f
		if !slices.ContainsFunc(reasonFiles, func(r reasonFile) bool { return r.file == name }) {
			rest = append(rest, name)
		}
	}
	var out []ReasonCode
	seen := map[string]bool{}
	for _, src := range reasonFiles {
		f, ok := byName[src.file]
		if !ok {
			return nil, fmt.Errorf("reason: no file %s", src.file)
		}
		codes, err := fileCodes(f, src.file, src.where)
		if err != nil {
			return nil, err
		}
		for _, c := range codes {
			if seen[c.Code] {
				return nil, fmt.Errorf("reason code %q is declared twice", c.Code)
			}
			seen[c.Code] = true
		}
		out = append(out, codes...)
	}
	for _, name := range rest {
		codes, err := fileCodes(byName[name], name, "")
		if err != nil {
			return nil, err
		}
		if len(codes) > 0 {
			return nil, fmt.Errorf("reason/%s declares reason codes (%s, ...) but is not in docgen's reasonFiles", name, codes[0].Code)
		}
	}
	return out, nil
}

// fileCodes reads the constants of type Code of one file of package
// reason.
func fileCodes(f *ast.File, name, where string) ([]ReasonCode, error) {
	var out []ReasonCode
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			if !isCodeType(vs.Type) || len(vs.Values) != len(vs.Names) {
				continue
			}
			doc := docText(vs.Doc)
			if doc == "" {
				doc = docText(gd.Doc)
			}
			doc = stripName(doc, vs.Names[0].Name)
			for _, v := range vs.Values {
				lit, ok := v.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				code, err := strconv.Unquote(lit.Value)
				if err != nil {
					return nil, err
				}
				if doc == "" {
					return nil, fmt.Errorf("reason/%s: reason code %q has no doc comment to say what it means", name, code)
				}
				out = append(out, ReasonCode{Code: code, Where: where, Meaning: doc})
			}
		}
	}
	return out, nil
}

func isCodeType(e ast.Expr) bool {
	t, ok := e.(*ast.Ident)
	return ok && t.Name == "Code"
}

// leadNames matches the Go names a doc comment starts with: "TooLarge:",
// "CodeRevisionOlder", "SPPrivateKeyFile / SPCertificateFile".
var leadNames = regexp.MustCompile(`^([A-Z]\w*(?: / [A-Z]\w*)*):? `)

// stripName drops the Go name a doc comment starts with ("TooLarge: the
// body ..." or "CodeRevisionOlder refuses ..."), with the names of the
// fields it is documented together with ("A / B are ...").
func stripName(doc, name string) string {
	m := leadNames.FindStringSubmatch(doc)
	if m == nil || !slices.Contains(strings.Split(m[1], " / "), name) {
		return doc
	}
	return doc[len(m[0]):]
}

// ReasonTable renders the codes as the table of docs/api.md.
func ReasonTable(codes []ReasonCode) string {
	var b strings.Builder
	b.WriteString("| code | where | meaning |\n|---|---|---|\n")
	for _, c := range codes {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", Code(c.Code), c.Where, Cell(c.Meaning))
	}
	return b.String()
}
