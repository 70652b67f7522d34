//go:build cgo

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/svc-dev/svc/engine/token"
	"github.com/svc-dev/svc/internal/idptest"
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
		{"token one past the bound", uint64(token.MaxTokenSize) + 1, 0, "", `"reason":"token-malformed"`},
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
