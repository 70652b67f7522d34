package docgen

import (
	"fmt"
	"go/ast"
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
	Where   string // the package declaring it, as the reader meets it
	Meaning string // the constant's doc comment, else its group's
}

// reasonSources are the packages that declare reason codes as constants
// of a Code type, and how the reference names each.
var reasonSources = []struct{ dir, where string }{
	{"reason", "decisions (all APIs)"},
	{"sidecar", "HTTP API, status"},
	{"samlgw", "SAML gateway"},
}

// ReasonCodes reads the constants of type Code or reason.Code of the
// reason-code packages, in declaration order, with their doc comments.
func ReasonCodes(root string) ([]ReasonCode, error) {
	var out []ReasonCode
	seen := map[string]string{}
	for _, src := range reasonSources {
		files, err := parseDir(filepath.Join(root, filepath.FromSlash(src.dir)))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
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
						if prev, dup := seen[code]; dup {
							return nil, fmt.Errorf("reason code %q is declared in %s and %s", code, prev, src.dir)
						}
						seen[code] = src.dir
						if doc == "" {
							return nil, fmt.Errorf("%s: reason code %q has no doc comment to say what it means", src.dir, code)
						}
						out = append(out, ReasonCode{Code: code, Where: src.where, Meaning: doc})
					}
				}
			}
		}
	}
	return out, nil
}

func isCodeType(e ast.Expr) bool {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name == "Code"
	case *ast.SelectorExpr:
		x, ok := t.X.(*ast.Ident)
		return ok && x.Name == "reason" && t.Sel.Name == "Code"
	}
	return false
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
