//! The engine's archive is rebuilt when a Go package it links changes:
//! build.rs watches go.mod, go.sum and the directory of every package of
//! the module that sdk/rust/capi links, as `go list -deps` names them.

mod common;

use std::path::{Path, PathBuf};

/// The paths the build script told cargo to watch, read from the output
/// cargo kept of its last run (beside OUT_DIR).
fn watched() -> Vec<PathBuf> {
    let output = Path::new(env!("OUT_DIR")).parent().unwrap().join("output");
    let text = std::fs::read_to_string(&output).unwrap_or_else(|e| panic!("{}: {e}", output.display()));
    text.lines()
        .filter_map(|l| l.strip_prefix("cargo:rerun-if-changed="))
        .map(PathBuf::from)
        .collect()
}

#[test]
fn watches_every_linked_package() {
    let root = common::repo_root();
    let watched = watched();
    for p in [
        "go.mod",
        "go.sum",
        "sdk/rust/capi",
        "reason",
        "wire",
        "engine/telemetry",
        "engine/config",
    ] {
        assert!(watched.contains(&root.join(p)), "{p} is not watched: {watched:#?}");
    }
    // The archive links no daemon package (docs/design.md, package
    // dependencies), so none is watched.
    assert!(
        !watched.iter().any(|p| p.starts_with(root.join("sidecar"))),
        "a sidecar package is watched: {watched:#?}"
    );
    // Only the module's own sources: nothing from the module cache, and not
    // the root, whose scan would take in cargo's target/ and rebuild always.
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    for p in &watched {
        assert!(
            p.starts_with(&root) && p != &root,
            "{} is outside the module",
            p.display()
        );
        assert!(!target.starts_with(p), "{} holds cargo's target/", p.display());
        assert!(p.exists(), "{} does not exist", p.display());
    }
}
