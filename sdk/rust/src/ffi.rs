//! The C ABI of sdk/rust/capi (the Go engine built as a C archive).

use std::os::raw::{c_char, c_int};

extern "C" {
    pub fn svc_engine_open(path: *const c_char, path_len: usize, from_env: c_int, err: *mut *mut c_char) -> u64;
    pub fn svc_engine_close(handle: u64);
    pub fn svc_validate_token(handle: u64, token: *const c_char, token_len: usize) -> *mut c_char;
    pub fn svc_authorize(
        handle: u64,
        token: *const c_char,
        token_len: usize,
        input: *const c_char,
        input_len: usize,
    ) -> *mut c_char;
    pub fn svc_free(p: *mut c_char);
}

/// Takes a JSON answer of the engine: its bytes, then the C memory freed.
///
/// # Safety
/// p is NULL or a string returned by the engine, not yet freed.
pub unsafe fn take(p: *mut c_char) -> Option<Vec<u8>> {
    if p.is_null() {
        return None;
    }
    let bytes = std::ffi::CStr::from_ptr(p).to_bytes().to_vec();
    svc_free(p);
    Some(bytes)
}
