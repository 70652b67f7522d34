//! The functions sdk/rust/capi exports (its `//export` lines), declared
//! once: the crate calls them through `ffi`, and tests/abi.rs includes
//! this file to call them as a C host program does. Each calls only some
//! of them.

#![allow(dead_code)]

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
    pub fn svc_validate_token_fields(
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
    pub fn svc_plan_resources(
        handle: u64,
        token: *const c_char,
        token_len: usize,
        action: *const c_char,
        action_len: usize,
        resource_type: *const c_char,
        resource_type_len: usize,
        dialect: *const c_char,
        dialect_len: usize,
        buf: *mut c_char,
        cap: usize,
        big: *mut *mut c_char,
    ) -> usize;
    pub fn svc_free(p: *mut c_char);
}
