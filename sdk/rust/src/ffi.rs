//! The C ABI of sdk/rust/capi (the Go engine built as a C archive).

use std::os::raw::{c_char, c_int};

extern "C" {
    pub fn svc_engine_open(path: *const c_char, path_len: usize, from_env: c_int, err: *mut *mut c_char) -> u64;
    pub fn svc_engine_close(handle: u64);
    pub fn svc_validate_token(
        handle: u64,
        token: *const c_char,
        token_len: usize,
        buf: *mut c_char,
        cap: usize,
        big: *mut *mut c_char,
    ) -> usize;
    pub fn svc_authorize(
        handle: u64,
        token: *const c_char,
        token_len: usize,
        input: *const c_char,
        input_len: usize,
        buf: *mut c_char,
        cap: usize,
        big: *mut *mut c_char,
    ) -> usize;
    pub fn svc_free(p: *mut c_char);
    /// C's free: releases the engine's malloc'd answers without a call
    /// into Go.
    fn free(p: *mut std::ffi::c_void);
}

/// The answer buffer of a call: answers longer than this come back in
/// malloc'd memory.
pub const ANSWER_BUF: usize = 4096;

/// Calls the engine with an answer buffer and returns the answer.
///
/// # Safety
/// call must pass (buf, cap, big) to an engine function as given.
pub unsafe fn call(f: impl FnOnce(*mut c_char, usize, *mut *mut c_char) -> usize) -> Vec<u8> {
    let mut buf: Vec<u8> = Vec::with_capacity(ANSWER_BUF);
    let mut big: *mut c_char = std::ptr::null_mut();
    let n = f(buf.as_mut_ptr().cast(), ANSWER_BUF, &mut big);
    if n <= ANSWER_BUF {
        buf.set_len(n);
        return buf;
    }
    if big.is_null() {
        return Vec::new(); // out of memory: an unreadable answer
    }
    let v = std::slice::from_raw_parts(big.cast::<u8>(), n).to_vec();
    free(big.cast());
    v
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
