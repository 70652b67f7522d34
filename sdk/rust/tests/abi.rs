//! The C ABI as a C host program calls it, with the lengths a buggy or
//! hostile caller passes: sizes are size_t end to end, a length the
//! engine cannot take is refused before anything is read, and no call
//! ends the host program.

mod common;

use std::os::raw::c_char;

use common::{config_file, idp};

// The crate's own declarations of the C ABI: this test calls the engine
// through them as a C host program would.
#[path = "../src/ffi/exports.rs"]
mod exports;
use exports::*;

/// Calls f with a 64 KiB answer buffer and returns the answer as text.
fn answer(f: impl FnOnce(*mut c_char, usize, *mut *mut c_char) -> usize) -> String {
    let mut buf = vec![0u8; 64 << 10];
    let mut big: *mut c_char = std::ptr::null_mut();
    let n = f(buf.as_mut_ptr().cast(), buf.len(), &mut big);
    if n <= buf.len() {
        return String::from_utf8_lossy(&buf[..n]).into_owned();
    }
    assert!(!big.is_null(), "an answer of {n} bytes with no memory");
    let s = unsafe { String::from_utf8_lossy(std::slice::from_raw_parts(big.cast::<u8>(), n)).into_owned() };
    unsafe { svc_free(big) };
    s
}

fn open() -> u64 {
    let path = config_file("abi", "");
    let path = path.to_str().unwrap();
    let mut err: *mut c_char = std::ptr::null_mut();
    let h = unsafe { svc_engine_open(path.as_ptr().cast(), path.len(), 0, &mut err) };
    assert_ne!(h, 0, "open failed");
    h
}

const TWO_GIB: usize = 1 << 31;
const FOUR_GIB: usize = 1 << 32;

#[test]
fn oversize_lengths_are_refused_not_misread() {
    let h = open();
    let tok = idp().token("user-1", "acme", &["viewer"]);
    // What may be read of a token (one byte past the engine's 32 KiB
    // bound) is there to read; nothing past it is.
    let mut padded = tok.clone().into_bytes();
    padded.resize(tok.len() + (32 << 10) + 1, b'A');
    let input = br#"{"action":"orders:read"}"#;

    let ok = answer(|b, c, g| unsafe { svc_validate_token(h, padded.as_ptr().cast(), tok.len(), b, c, g) });
    assert!(ok.starts_with(r#"{"allowed":true"#), "{ok}");

    // 4 GiB + len(token) was once read as len(token): a valid token.
    for n in [FOUR_GIB + tok.len(), TWO_GIB, (32 << 10) + 1] {
        let got = answer(|b, c, g| unsafe { svc_validate_token(h, padded.as_ptr().cast(), n, b, c, g) });
        assert!(
            got.contains(r#""reason":"token-malformed""#),
            "token of {n} bytes: {got}"
        );
    }
    for n in [FOUR_GIB + input.len(), TWO_GIB, (1 << 20) + 1] {
        let got = answer(|b, c, g| unsafe {
            svc_authorize(h, padded.as_ptr().cast(), tok.len(), input.as_ptr().cast(), n, b, c, g)
        });
        assert!(
            got.starts_with(r#"{"error":{"reason":"input-too-large""#),
            "input of {n} bytes: {got}"
        );
    }
    let got = answer(|b, c, g| unsafe {
        svc_authorize(
            h,
            padded.as_ptr().cast(),
            tok.len(),
            input.as_ptr().cast(),
            input.len(),
            b,
            c,
            g,
        )
    });
    assert!(got.contains(r#""decision":{"#), "{got}");

    // svc_plan_resources: each of its three names (action, resource
    // type, dialect), then its token, at the same lengths.
    let names: [&[u8]; 3] = [b"orders:read", b"orders", b"sqlite"];
    let plan = |lens: [usize; 4]| {
        answer(|b, c, g| unsafe {
            svc_plan_resources(
                h,
                padded.as_ptr().cast(),
                lens[0],
                names[0].as_ptr().cast(),
                lens[1],
                names[1].as_ptr().cast(),
                lens[2],
                names[2].as_ptr().cast(),
                lens[3],
                b,
                c,
                g,
            )
        })
    };
    let exact = [tok.len(), names[0].len(), names[1].len(), names[2].len()];
    let got = plan(exact);
    assert!(got.contains(r#""kind":"conditional""#), "{got}");
    for (i, arg) in ["action", "resource type", "dialect"].into_iter().enumerate() {
        for n in [FOUR_GIB + names[i].len(), TWO_GIB, 1024 + 1] {
            let mut lens = exact;
            lens[i + 1] = n;
            let got = plan(lens);
            assert!(
                got.starts_with(r#"{"error":{"reason":"input-too-large""#),
                "plan with {arg} of {n} bytes: {got}"
            );
        }
    }
    for n in [FOUR_GIB + tok.len(), TWO_GIB, (32 << 10) + 1] {
        let mut lens = exact;
        lens[0] = n;
        let got = plan(lens);
        assert!(
            got.contains(r#""kind":"always_denied""#) && got.contains(r#""reason":"token-malformed""#),
            "plan with a token of {n} bytes: {got}"
        );
    }

    let path = b"svc.toml";
    for n in [FOUR_GIB + path.len(), TWO_GIB] {
        let mut err: *mut c_char = std::ptr::null_mut();
        let h = unsafe { svc_engine_open(path.as_ptr().cast(), n, 0, &mut err) };
        assert_eq!(h, 0);
        let doc = unsafe { std::ffi::CStr::from_ptr(err).to_string_lossy().into_owned() };
        unsafe { svc_free(err) };
        assert!(
            doc.contains(r#""reason":"input-too-large""#),
            "open with a path of {n} bytes: {doc}"
        );
    }
    unsafe { svc_engine_close(h) };
}
