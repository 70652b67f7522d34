//! The C ABI of sdk/rust/capi (the Go engine built as a C archive).

use std::mem::MaybeUninit;
use std::os::raw::c_char;

mod exports;
pub use exports::*;

extern "C" {
    /// C's free: releases the engine's malloc'd answers without a call
    /// into Go.
    fn free(p: *mut std::ffi::c_void);
}

/// The answer buffer of a call: answers longer than this come back in
/// malloc'd memory.
pub const ANSWER_BUF: usize = 4096;

/// Calls the engine with an answer buffer on the stack and reads the
/// answer in place: no allocation on this side for an answer that fits.
///
/// # Safety
/// call must pass (buf, cap, big) to an engine function as given.
pub unsafe fn call<R>(
    f: impl FnOnce(*mut c_char, usize, *mut *mut c_char) -> usize,
    read: impl FnOnce(&[u8]) -> R,
) -> R {
    let mut buf = [MaybeUninit::<u8>::uninit(); ANSWER_BUF];
    let mut big: *mut c_char = std::ptr::null_mut();
    let n = f(buf.as_mut_ptr().cast(), ANSWER_BUF, &mut big);
    if n <= ANSWER_BUF {
        return read(std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n));
    }
    if big.is_null() {
        return read(&[]); // out of memory: an unreadable answer
    }
    /// Frees the malloc'd answer however read returns.
    struct Malloced(*mut c_char);
    impl Drop for Malloced {
        fn drop(&mut self) {
            unsafe { free(self.0.cast()) }
        }
    }
    let big = Malloced(big);
    read(std::slice::from_raw_parts(big.0.cast::<u8>(), n))
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
