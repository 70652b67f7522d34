//! The cost of a cached validate_token across the C boundary, beside the
//! Go engine's BenchmarkValidateToken (engine/bench_test.go): `make
//! bench-rust`, or with an engine of your own configuration
//!
//!   cargo run --release --example bench -- svc.toml '<token>' [calls]

use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        return Err("usage: bench <config file> <token> [calls]".into());
    }
    let e = svc::Engine::from_config_file(&args[0])?;
    let n: u32 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(200_000);
    let d = e.validate_token(&args[1])?;
    if !d.allowed {
        return Err(format!("the token is refused: {}", d.reason).into());
    }
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        for _ in 0..n {
            std::hint::black_box(e.validate_token(std::hint::black_box(&args[1]))?);
        }
        best = best.min(start.elapsed().as_nanos() as f64 / f64::from(n));
    }
    println!("rust cached validate_token: {best:.0} ns/op (best of 5 x {n})");
    Ok(())
}
