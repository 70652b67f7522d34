package main

/*
#include <stdint.h>
#include <stdlib.h>
*/
import "C"

import "unsafe"

// The functions below call the exported C ABI the way a C caller does:
// C strings in, C strings out, freed with svc_free. They serve this
// package's tests (a _test.go file cannot use cgo).

func abiOpen(path string, fromEnv bool) (uint64, string) {
	p := C.CString(path)
	defer C.free(unsafe.Pointer(p))
	env := C.int(0)
	if fromEnv {
		env = 1
	}
	var errOut *C.char
	h := svc_engine_open(p, C.size_t(len(path)), env, &errOut)
	return uint64(h), abiTake(errOut)
}

// abiBufSize is the caller's buffer of these helpers, small enough that
// the tests see both ways of answering.
const abiBufSize = 256

func abiValidate(h uint64, token string) string {
	t := C.CString(token)
	defer C.free(unsafe.Pointer(t))
	buf := (*C.char)(C.malloc(abiBufSize))
	defer C.free(unsafe.Pointer(buf))
	var big *C.char
	n := svc_validate_token(C.uint64_t(h), t, C.size_t(len(token)), buf, abiBufSize, &big)
	return abiAnswer(n, buf, big)
}

// abiValidateFields calls svc_validate_token_fields and returns its
// answer's bytes.
func abiValidateFields(h uint64, token string) []byte {
	t := C.CString(token)
	defer C.free(unsafe.Pointer(t))
	buf := (*C.char)(C.malloc(abiBufSize))
	defer C.free(unsafe.Pointer(buf))
	var big *C.char
	n := svc_validate_token_fields(C.uint64_t(h), t, C.size_t(len(token)), buf, abiBufSize, &big)
	if n <= abiBufSize {
		if big != nil {
			panic("an answer that fits was malloc'd")
		}
		return C.GoBytes(unsafe.Pointer(buf), C.int(n))
	}
	if big == nil {
		panic("an answer that does not fit was not malloc'd")
	}
	defer svc_free(big)
	return C.GoBytes(unsafe.Pointer(big), C.int(n))
}

func abiAuthorize(h uint64, token, input string) string {
	t, in := C.CString(token), C.CString(input)
	defer C.free(unsafe.Pointer(t))
	defer C.free(unsafe.Pointer(in))
	buf := (*C.char)(C.malloc(abiBufSize))
	defer C.free(unsafe.Pointer(buf))
	var big *C.char
	n := svc_authorize(C.uint64_t(h), t, C.size_t(len(token)), in, C.size_t(len(input)), buf, abiBufSize, &big)
	return abiAnswer(n, buf, big)
}

func abiAnswer(n C.size_t, buf, big *C.char) string {
	if n <= abiBufSize {
		if big != nil {
			panic("an answer that fits was malloc'd")
		}
		return C.GoStringN(buf, C.int(n))
	}
	if big == nil {
		panic("an answer that does not fit was not malloc'd")
	}
	return abiTake(big)
}

func abiClose(h uint64) { svc_engine_close(C.uint64_t(h)) }

func abiTake(p *C.char) string {
	if p == nil {
		return ""
	}
	defer svc_free(p)
	return C.GoString(p)
}

// abiCallClaiming calls svc_validate_token (input == "") or svc_authorize
// with the token's and input's lengths claimed as tokenLen and inputLen,
// as a caller with a bad length would: the interface must refuse what is
// too long without reading past the bytes it is allowed to read.
func abiCallClaiming(h uint64, token string, tokenLen uint64, input string, inputLen uint64) string {
	t := (*C.char)(C.CBytes([]byte(token)))
	defer C.free(unsafe.Pointer(t))
	buf := (*C.char)(C.malloc(abiBufSize))
	defer C.free(unsafe.Pointer(buf))
	var big *C.char
	if input == "" {
		return abiAnswer(svc_validate_token(C.uint64_t(h), t, C.size_t(tokenLen), buf, abiBufSize, &big), buf, big)
	}
	in := (*C.char)(C.CBytes([]byte(input)))
	defer C.free(unsafe.Pointer(in))
	return abiAnswer(svc_authorize(C.uint64_t(h), t, C.size_t(tokenLen), in, C.size_t(inputLen), buf, abiBufSize, &big), buf, big)
}

// abiOpenClaiming calls svc_engine_open with the path's length claimed as
// pathLen.
func abiOpenClaiming(path string, pathLen uint64) (uint64, string) {
	p := (*C.char)(C.CBytes([]byte(path)))
	defer C.free(unsafe.Pointer(p))
	var errOut *C.char
	h := svc_engine_open(p, C.size_t(pathLen), 0, &errOut)
	return uint64(h), abiTake(errOut)
}

func abiPlan(h uint64, token, action, resourceType, dialect string) string {
	cs := make([]*C.char, 4)
	for i, s := range []string{token, action, resourceType, dialect} {
		cs[i] = C.CString(s)
		defer C.free(unsafe.Pointer(cs[i]))
	}
	buf := (*C.char)(C.malloc(abiBufSize))
	defer C.free(unsafe.Pointer(buf))
	var big *C.char
	n := svc_plan_resources(C.uint64_t(h), cs[0], C.size_t(len(token)), cs[1], C.size_t(len(action)),
		cs[2], C.size_t(len(resourceType)), cs[3], C.size_t(len(dialect)), buf, abiBufSize, &big)
	return abiAnswer(n, buf, big)
}
