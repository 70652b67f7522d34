package main

/*
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"unique"
	"unsafe"

	"github.com/svc-dev/svc/engine/token"
)

// Bounds of the inputs that cross the boundary. Lengths are size_t: they
// are compared with these bounds before any byte is read or any length is
// converted, so a length of 2 GiB or more (which C.int would turn negative)
// or 4 GiB or more (which it would truncate) is refused, never misread.
const (
	// maxPathBytes bounds a configuration file's path (PATH_MAX).
	maxPathBytes = 4096
	// maxInputBytes bounds a policy input document: the bound the
	// sidecar's HTTP API puts on a request body.
	maxInputBytes = 1 << 20
	// tokenReadBytes is what is read of a token: one byte past the
	// longest token the engine accepts, so that a longer token gets the
	// engine's own answer (token-malformed) without being copied whole.
	tokenReadBytes = token.MaxTokenSize + 1
)

// goString copies n bytes at p into a Go string; p may be NULL when n is
// 0. n must be at most max, which fits in a C int.
func goString(p *C.char, n C.size_t, max int) (string, error) {
	if p == nil || n == 0 {
		return "", nil
	}
	if n > C.size_t(max) {
		return "", &apiError{InputTooLarge, fmt.Sprintf("%d bytes is more than the %d accepted", uint64(n), max)}
	}
	return C.GoStringN(p, C.int(n)), nil
}

// tokenString copies a token: at most tokenReadBytes of it, which is
// enough for the engine to refuse a longer one. The copy is unique.Make's
// canonical one: a token seen again before the next garbage collection is
// compared in place and not copied, which spares a cached call the
// allocation of its token and that allocation's share of collections.
// The canonical copy is held weakly: it is collected as soon as a plain
// copy would be.
func tokenString(p *C.char, n C.size_t) string {
	if p == nil || n == 0 {
		return ""
	}
	if n > tokenReadBytes {
		n = tokenReadBytes
	}
	// The string over C memory is not kept: Make looks it up, and stores
	// a clone when it is new.
	return unique.Make(unsafe.String((*byte)(unsafe.Pointer(p)), int(n))).Value()
}

// recovered turns a panic of the call it is deferred in into the JSON
// error document of EnginePanic, written by set; the panic and its stack
// go to standard error, never to the caller (a panic value may quote
// input). Every export defers it: a panic must not cross into the host
// program, which it would kill.
func recovered(export string, set func([]byte)) {
	v := recover()
	if v == nil {
		return
	}
	slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("svc engine: panic recovered",
		"export", export, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	set(errorJSON(EnginePanic, export+" failed on an internal error; the engine logged it to standard error"))
}

// cJSON returns b as a NUL-terminated string in C memory, owned by the
// caller, who releases it with svc_free.
func cJSON(b []byte) *C.char {
	p := (*C.char)(C.malloc(C.size_t(len(b) + 1)))
	if p == nil {
		return nil
	}
	buf := unsafe.Slice((*byte)(unsafe.Pointer(p)), len(b)+1)
	copy(buf, b)
	buf[len(b)] = 0
	return p
}

// lookupEnv reads the process environment as C sees it now. The Go
// runtime of a c-archive copies the environment when the library loads,
// so os.LookupEnv would miss variables the program set since.
func lookupEnv(key string) (string, bool) {
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	v := C.getenv(k)
	if v == nil {
		return "", false
	}
	return C.GoString(v), true
}

// svc_engine_open starts an engine. With from_env set and an empty path
// it reads ./svc.toml when present, then the SVC_* variables, as
// svc-sidecar does without --config; otherwise it reads the file at path
// (.toml, .yaml, .yml), then the variables. It returns the engine's
// handle, or 0 with *err set to a JSON error document (release with
// svc_free).
//
//export svc_engine_open
func svc_engine_open(path *C.char, pathLen C.size_t, fromEnv C.int, errOut **C.char) (handle C.uint64_t) {
	setErr := func(doc []byte) {
		handle = 0
		if errOut != nil {
			*errOut = cJSON(doc)
		}
	}
	defer recovered("svc_engine_open", setErr)
	p, err := goString(path, pathLen, maxPathBytes)
	var h uint64
	if err == nil {
		h, err = openEngine(p, fromEnv != 0, lookupEnv)
	}
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{EngineStartFailed, err.Error()}
		}
		setErr(errorJSON(ae.Reason, ae.Message))
		return 0
	}
	return C.uint64_t(h)
}

// svc_engine_close stops the engine and releases it; the handle is then
// unknown. Closing 0 or a closed handle does nothing.
//
//export svc_engine_close
func svc_engine_close(h C.uint64_t) {
	defer recovered("svc_engine_close", func([]byte) {})
	closeEngine(uint64(h))
}

// answer hands a JSON answer to the caller: into buf when it fits in cap
// bytes (no call into C: a call across the boundary is the cost that
// matters here), else into memory from malloc set in *big, which the
// caller releases with free (or svc_free). It returns the answer's length.
func answer(b []byte, buf *C.char, capacity C.size_t, big **C.char) C.size_t {
	if dst := answerBuffer(len(b), buf, capacity, big); dst != nil {
		copy(dst, b)
	}
	return C.size_t(len(b))
}

// answerBuffer is where an answer of n bytes goes: buf when it fits in
// capacity bytes, else memory from malloc (one byte longer, for a NUL)
// set in *big. It is nil when there is neither (big is NULL or malloc
// failed).
func answerBuffer(n int, buf *C.char, capacity C.size_t, big **C.char) []byte {
	if buf != nil && C.size_t(n) <= capacity {
		return unsafe.Slice((*byte)(unsafe.Pointer(buf)), n)
	}
	if big == nil {
		return nil
	}
	p := (*C.char)(C.malloc(C.size_t(n) + 1))
	if p == nil {
		return nil
	}
	*big = p
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), n+1)
	b[n] = 0
	return b[:n]
}

// svc_validate_token verifies a bearer token or an API key (svck_...)
// and answers the engine's token decision as JSON, or a JSON error
// document (see answer for buf, cap and big).
//
//export svc_validate_token
func svc_validate_token(h C.uint64_t, token *C.char, tokenLen C.size_t, buf *C.char, capacity C.size_t, big **C.char) (n C.size_t) {
	defer recovered("svc_validate_token", func(doc []byte) { n = answer(doc, buf, capacity, big) })
	return answer(validateJSON(uint64(h), tokenString(token, tokenLen)), buf, capacity, big)
}

// svc_authorize verifies a bearer token or an API key (svck_...) and
// evaluates the policy on the input document given as JSON (input_len 0
// for an empty input). It answers {"token": ..., "decision": ...} as
// JSON, or a JSON error document (see answer for buf, cap and big).
//
//export svc_authorize
func svc_authorize(h C.uint64_t, token *C.char, tokenLen C.size_t, input *C.char, inputLen C.size_t, buf *C.char, capacity C.size_t, big **C.char) (n C.size_t) {
	defer recovered("svc_authorize", func(doc []byte) { n = answer(doc, buf, capacity, big) })
	var in []byte
	if input != nil && inputLen > 0 {
		if inputLen > maxInputBytes {
			return answer(errorJSON(InputTooLarge, fmt.Sprintf("the policy input is %d bytes, more than the %d accepted", uint64(inputLen), maxInputBytes)), buf, capacity, big)
		}
		in = C.GoBytes(unsafe.Pointer(input), C.int(inputLen))
	}
	return answer(authorizeJSON(uint64(h), tokenString(token, tokenLen), in), buf, capacity, big)
}

// svc_free releases a string returned by this interface (C's free does
// too); NULL is ignored.
//
//export svc_free
func svc_free(p *C.char) {
	C.free(unsafe.Pointer(p))
}
