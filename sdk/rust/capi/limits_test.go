//go:build cgo

package main

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	svctoken "github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/internal/testkit/idptest"
)

// TestABIRefusesOversizeLengths: a length of 2 GiB or more (negative as a
// C int) or 4 GiB or more (truncated to 32 bits) is refused with
// input-too-large, or for a token answered as the engine answers a token
// past its bound, never misread as a short argument.
func TestABIRefusesOversizeLengths(t *testing.T) {
	h, p := openTestEngine(t)
	tok := p.Token(t, idptest.Claims("user-1", "acme", "viewer"))
	// The token followed by padding, so that what may be read of a
	// token (one byte past the engine's bound) is there to read.
	padded := tok + strings.Repeat("A", tokenReadBytes)

	const (
		twoGiB  = uint64(1) << 31
		fourGiB = uint64(1) << 32
	)
	tests := []struct {
		name               string
		tokenLen, inputLen uint64
		input              string
		want               string
	}{
		// 4 GiB + len(token) used to be read as len(token): a valid token.
		{"token of 4 GiB + n", fourGiB + uint64(len(tok)), 0, "", `"reason":"token-malformed"`},
		{"token of 2 GiB", twoGiB, 0, "", `"reason":"token-malformed"`},
		{"token one past the bound", uint64(svctoken.MaxTokenSize) + 1, 0, "", `"reason":"token-malformed"`},
		{"input of 4 GiB + n", uint64(len(tok)), fourGiB + 2, "{}", `{"error":{"reason":"input-too-large"`},
		{"input of 2 GiB", uint64(len(tok)), twoGiB, "{}", `{"error":{"reason":"input-too-large"`},
		{"input one past the bound", uint64(len(tok)), maxInputBytes + 1, "{}", `{"error":{"reason":"input-too-large"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := abiCallClaiming(h, padded, tc.tokenLen, tc.input, tc.inputLen); !strings.Contains(got, tc.want) {
				t.Errorf("answer = %.300s; want it to contain %s", got, tc.want)
			}
		})
	}
	// Lengths within bounds still work.
	if got := abiCallClaiming(h, padded, uint64(len(tok)), "", 0); !strings.HasPrefix(got, `{"allowed":true`) {
		t.Errorf("validate with the exact length = %.300s", got)
	}

	for _, n := range []uint64{maxPathBytes + 1, twoGiB, fourGiB + 3} {
		h, errDoc := abiOpenClaiming("svc.toml", n)
		var doc errorDoc
		if h != 0 || json.Unmarshal([]byte(errDoc), &doc) != nil || doc.Error.Reason != InputTooLarge {
			t.Errorf("open with a path of %d bytes = %d, %s; want input-too-large", n, h, errDoc)
		}
	}

	// svc_plan_resources: each of its three names, and its token, at the
	// same lengths.
	names := [3]string{"orders:read", "orders", "sqlite"}
	exact := [4]uint64{uint64(len(tok)), uint64(len(names[0])), uint64(len(names[1])), uint64(len(names[2]))}
	for i, arg := range []string{"action", "resource type", "dialect"} {
		for _, n := range []uint64{maxNameBytes + 1, twoGiB, twoGiB + uint64(len(names[i])), fourGiB + uint64(len(names[i]))} {
			lens := exact
			lens[i+1] = n
			got := abiPlanClaiming(svc_plan_resources, svc_free, h, padded, names, lens)
			if !strings.HasPrefix(got, `{"error":{"reason":"input-too-large"`) {
				t.Errorf("plan with %s of %d bytes = %.300s; want input-too-large", arg, n, got)
			}
		}
	}
	for _, n := range []uint64{fourGiB + uint64(len(tok)), twoGiB, uint64(svctoken.MaxTokenSize) + 1} {
		lens := exact
		lens[0] = n
		var got planResult
		ans := abiPlanClaiming(svc_plan_resources, svc_free, h, padded, names, lens)
		if err := json.Unmarshal([]byte(ans), &got); err != nil || got.Kind != "always_denied" || got.Reason != "token-malformed" {
			t.Errorf("plan with a token of %d bytes = %.300s; want always_denied, token-malformed", n, ans)
		}
	}
	// Lengths within bounds still work.
	if got := abiPlanClaiming(svc_plan_resources, svc_free, h, padded, names, exact); !strings.Contains(got, `"kind":"conditional"`) {
		t.Errorf("plan with the exact lengths = %.300s; want a conditional plan", got)
	}
}

// abiPlanClaiming calls svc_plan_resources (export; free is svc_free) as
// a caller with bad lengths would: token and the names (action, resource
// type, dialect) with their lengths claimed as lens. A _test.go file
// cannot use cgo, so the C types (uint64_t, char, size_t) are the type
// parameters, inferred from the export's signature. The bytes are Go
// memory: the export reads at most what its bounds allow.
func abiPlanClaiming[H, N ~uint64, P any](export func(H, *P, N, *P, N, *P, N, *P, N, *P, N, **P) N, free func(*P),
	h uint64, token string, names [3]string, lens [4]uint64) string {
	var args [4]*P
	for i, s := range []string{token, names[0], names[1], names[2]} {
		b := []byte(s)
		args[i] = (*P)(unsafe.Pointer(&b[0]))
	}
	buf := make([]byte, 64<<10)
	var big *P
	n := export(H(h), args[0], N(lens[0]), args[1], N(lens[1]), args[2], N(lens[2]), args[3], N(lens[3]),
		(*P)(unsafe.Pointer(&buf[0])), N(len(buf)), &big)
	if uint64(n) <= uint64(len(buf)) {
		if big != nil {
			panic("an answer that fits was malloc'd")
		}
		return string(buf[:n])
	}
	if big == nil {
		panic("an answer that does not fit was not malloc'd")
	}
	defer free(big)
	return string(unsafe.Slice((*byte)(unsafe.Pointer(big)), uint64(n)))
}

// TestABIRecoversPanics: a panic inside any export is answered as an
// engine-panic error document, and the process, the host program, lives
// on. A handle whose instance has no engine panics on its first use.
func TestABIRecoversPanics(t *testing.T) {
	h := nextHandle.Add(1)
	handles.Store(h, &instance{})
	for name, call := range map[string]func() string{
		"validate":  func() string { return abiValidate(h, "x") },
		"fields":    func() string { return string(abiValidateFields(h, "x")) },
		"authorize": func() string { return abiAuthorize(h, "x", `{"action":"orders:read"}`) },
		"plan":      func() string { return abiPlan(h, "x", "orders:read", "orders", "sqlite") },
	} {
		got := call()
		var doc errorDoc
		if err := json.Unmarshal([]byte(got), &doc); err != nil || doc.Error.Reason != EnginePanic {
			t.Errorf("%s on a broken engine = %s; want an engine-panic error document", name, got)
		}
	}
	abiClose(h) // panics inside, recovered: returns
	if _, ok := lookup(h); ok {
		t.Error("the handle is still known after close")
	}
}

// TestABIOpenRecoversPanic: svc_engine_open takes no handle, so the
// broken engine of TestABIRecoversPanics cannot make it panic; a path
// whose bytes cannot be read does. The path points at a page mapped
// without access, and the test goroutine (which the export runs on: it
// is called as a Go function) has faults turned into panics
// (debug.SetPanicOnFault), so reading the path panics inside the export,
// which must answer 0 and an engine-panic error document.
func TestABIOpenRecoversPanic(t *testing.T) {
	page, err := syscall.Mmap(-1, 0, syscall.Getpagesize(), syscall.PROT_NONE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(page)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	h, errDoc := abiOpenAt(svc_engine_open, abiTake, unsafe.Pointer(&page[0]), uint64(len("svc.toml")))
	var doc errorDoc
	if h != 0 || json.Unmarshal([]byte(errDoc), &doc) != nil || doc.Error.Reason != EnginePanic {
		t.Errorf("open with an unreadable path = %d, %s; want 0 and an engine-panic error document", h, errDoc)
	}
}

// abiOpenAt calls svc_engine_open (export; take is abiTake) with the path
// at p, n bytes long, with the C types inferred as in abiPlanClaiming.
func abiOpenAt[N, H ~uint64, I ~int32, P any](export func(*P, N, I, **P) H, take func(*P) string, p unsafe.Pointer, n uint64) (uint64, string) {
	var errOut *P
	h := export((*P)(p), N(n), 0, &errOut)
	return uint64(h), take(errOut)
}

// TestABIExportsRecover: every export defers recovered, under its own
// name, before it does anything that may panic, so that an export added
// later is held to the rule too without a test of its own that makes it
// panic. svc_free, which only calls C's free, is the exception.
func TestABIExportsRecover(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Doc == nil || !exported(fn.Doc) {
				continue
			}
			name := fn.Name.Name
			seen[name] = true
			if name == "svc_free" {
				continue
			}
			if !defersRecoveredFirst(fn.Body, name) {
				t.Errorf("%s: export %s does not begin with defer recovered(%q, ...) (only func literals may be bound before it)",
					fset.Position(fn.Pos()), name, name)
			}
		}
	}
	for _, name := range []string{"svc_engine_open", "svc_engine_close", "svc_validate_token", "svc_validate_token_fields",
		"svc_authorize", "svc_plan_resources", "svc_free"} {
		if !seen[name] {
			t.Errorf("export %s not found", name)
		}
	}
}

func exported(doc *ast.CommentGroup) bool {
	for _, c := range doc.List {
		if strings.HasPrefix(c.Text, "//export ") {
			return true
		}
	}
	return false
}

// defersRecoveredFirst reports whether body's first statement that is
// not the binding of a func literal is defer recovered("<name>", ...).
func defersRecoveredFirst(body *ast.BlockStmt, name string) bool {
	for _, st := range body.List {
		if as, ok := st.(*ast.AssignStmt); ok && len(as.Rhs) == 1 {
			if _, ok := as.Rhs[0].(*ast.FuncLit); ok {
				continue
			}
		}
		ds, ok := st.(*ast.DeferStmt)
		if !ok {
			return false
		}
		if id, ok := ds.Call.Fun.(*ast.Ident); !ok || id.Name != "recovered" || len(ds.Call.Args) != 2 {
			return false
		}
		lit, ok := ds.Call.Args[0].(*ast.BasicLit)
		if !ok {
			return false
		}
		s, err := strconv.Unquote(lit.Value)
		return err == nil && s == name
	}
	return false
}
