//! The cost of a cached validate_token across the C boundary:
//! cargo test --release --test bench -- --ignored --nocapture

mod common;

use std::time::Instant;

#[test]
#[ignore]
fn cached_validate_token() {
    let e = common::engine("bench");
    let tok = common::idp().token("user-1", "acme", &["viewer"]);
    assert!(e.validate_token(&tok).unwrap().allowed);
    let n = 200_000;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..n {
            let d = e.validate_token(&tok).unwrap();
            assert!(d.allowed);
        }
        best = best.min(start.elapsed().as_nanos() as f64 / n as f64);
    }
    println!("rust cached validate_token: {best:.0} ns/op (best of 5 x {n})");
}

/// The Rust side of a call alone: parsing a cached token's answer.
#[test]
#[ignore]
fn parse_answer() {
    let e = common::engine("bench-parse");
    let tok = common::idp().token("user-1", "acme", &["viewer"]);
    let d = e.validate_token(&tok).unwrap();
    let answer = serde_json::json!({
        "allowed": d.allowed, "claims": d.claims, "reason": d.reason, "subject": d.subject, "tenant_id": d.tenant_id,
    })
    .to_string();
    let n = 200_000;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..n {
            let d: svc::TokenDecision = serde_json::from_str(std::hint::black_box(&answer)).unwrap();
            std::hint::black_box(d);
        }
        best = best.min(start.elapsed().as_nanos() as f64 / n as f64);
    }
    println!(
        "rust parse of a {}-byte answer: {best:.0} ns/op (best of 5 x {n})",
        answer.len()
    );
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..n {
            std::hint::black_box(std::hint::black_box(&d.claims).clone());
        }
        best = best.min(start.elapsed().as_nanos() as f64 / n as f64);
    }
    println!("rust clone of its claims: {best:.0} ns/op (best of 5 x {n})");
}
