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

func abiValidate(h uint64, token string) string {
	t := C.CString(token)
	defer C.free(unsafe.Pointer(t))
	return abiTake(svc_validate_token(C.uint64_t(h), t, C.size_t(len(token))))
}

func abiAuthorize(h uint64, token, input string) string {
	t, in := C.CString(token), C.CString(input)
	defer C.free(unsafe.Pointer(t))
	defer C.free(unsafe.Pointer(in))
	return abiTake(svc_authorize(C.uint64_t(h), t, C.size_t(len(token)), in, C.size_t(len(input))))
}

func abiClose(h uint64) { svc_engine_close(C.uint64_t(h)) }

func abiTake(p *C.char) string {
	if p == nil {
		return ""
	}
	defer svc_free(p)
	return C.GoString(p)
}
