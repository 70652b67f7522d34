//! Builds the Go engine (sdk/rust/capi, in the repository's Go module) as
//! a C archive and links it: the crate runs the same engine as svc-sidecar.
//! `go` is looked up on PATH; set SVC_GO to use another.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../..").canonicalize().expect("repository root");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let go = env::var("SVC_GO").unwrap_or_else(|_| "go".to_string());

    let status = Command::new(&go)
        .current_dir(&root)
        .env("CGO_ENABLED", "1")
        .args(["build", "-trimpath", "-buildmode=c-archive", "-o"])
        .arg(out.join("libsvcengine.a"))
        .arg("./sdk/rust/capi")
        .status()
        .unwrap_or_else(|e| panic!("running {go}: {e}: the crate needs Go (set SVC_GO to its path)"));
    if !status.success() {
        panic!("go build -buildmode=c-archive ./sdk/rust/capi failed: {status}");
    }

    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=svcengine");
    for lib in ["pthread", "dl", "m", "resolv"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    println!("cargo:rerun-if-env-changed=SVC_GO");
    // The engine's Go sources: a directory is scanned for any change.
    for p in [
        "go.mod",
        "go.sum",
        "engine",
        "sidecar",
        "policies",
        "internal",
        "sdk/rust/capi",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
}
