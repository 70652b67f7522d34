// Command capi exports svc's decision engine through a C ABI, for the
// Rust crate in sdk/rust, which builds it with
//
//	go build -buildmode=c-archive -o libsvcengine.a ./sdk/rust/capi
//
// and links the archive into the Rust program: the engine runs in-process,
// the same engine.New, configuration loading, telemetry and audit log as
// svc-sidecar. The functions exported are declared in svcengine.h.
//
// Strings cross the boundary as (pointer, length) pairs that Go copies
// before returning; answers are written into the caller's buffer or, when
// longer, into memory from C's malloc, which the caller releases with
// svc_free: JSON documents, or for svc_validate_token_fields a fixed
// layout of the token decision (fields.go). No Go pointer is kept by C:
// an engine is named by an integer handle.
package main

// main is never run: a c-archive's entry points are its exported
// functions. It keeps this package a valid command when cgo is disabled.
func main() {}
