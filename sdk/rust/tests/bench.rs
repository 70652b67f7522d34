//! The cost of a cached validate_token across the C boundary:
//! cargo test --release --test bench -- --ignored --nocapture

mod common;

use std::time::Instant;

/// The best of five runs of n calls of f, in ns per call.
fn best_of_five(n: u32, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..n {
            f();
        }
        best = best.min(start.elapsed().as_nanos() as f64 / f64::from(n));
    }
    best
}

#[test]
#[ignore]
fn cached_validate_token() {
    // As the Go benchmark's engine: no audit log (engine.Deps.Audit is
    // nil there), so both sides do the same work per call.
    let e = svc::Engine::from_config_file(common::config_file_audit("bench", common::UNLIMITED, Some("off")))
        .expect("engine");
    let tok = common::idp().token("user-1", "acme", &["viewer"]);
    let d = e.validate_token(&tok).unwrap();
    assert!(d.allowed);
    let n = 200_000;
    let ns = best_of_five(n, || {
        assert!(e.validate_token(std::hint::black_box(&tok)).unwrap().allowed)
    });
    println!("rust cached validate_token: {ns:.0} ns/op (best of 5 x {n})");
    // What the API itself asks of the Rust side: a claim set of its own
    // for every answer.
    let ns = best_of_five(n, || {
        drop(std::hint::black_box(std::hint::black_box(&d.claims).clone()))
    });
    println!("rust clone of its claims: {ns:.0} ns/op (best of 5 x {n})");
}
