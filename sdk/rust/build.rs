//! Builds the Go engine (sdk/rust/capi, in the repository's Go module) as
//! a C archive and links it: the crate runs the same engine as svc-sidecar.
//! `go` is looked up on PATH; set SVC_GO to use another.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const CAPI: &str = "./sdk/rust/capi";

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
        .arg(CAPI)
        .status()
        .unwrap_or_else(|e| panic!("running {go}: {e}: the crate needs Go (set SVC_GO to its path)"));
    if !status.success() {
        panic!("go build -buildmode=c-archive {CAPI} failed: {status}");
    }

    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=svcengine");
    for lib in ["pthread", "dl", "m", "resolv"] {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
    println!("cargo:rerun-if-env-changed=SVC_GO");
    for p in go_sources(&go, &root) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}

/// The paths whose change must rebuild the archive: go.mod, go.sum and the
/// directory of every package of the module that the archive links, as
/// `go list -deps` names them (a directory is scanned for any change).
/// Packages move and imports change, so the list is never written down.
/// When `go list` fails, every top-level directory of the module but
/// sdk/ (which holds cargo's own target/) stands in, with sdk/rust/capi.
fn go_sources(go: &str, root: &Path) -> Vec<PathBuf> {
    let mut paths = vec![root.join("go.mod"), root.join("go.sum")];
    match linked_dirs(go, root) {
        Ok(dirs) => paths.extend(dirs),
        Err(e) => {
            println!("cargo:warning=go list -deps {CAPI} failed ({e}); rebuilding on any change of the module");
            paths.extend(top_level_dirs(root));
            paths.push(root.join(CAPI));
        }
    }
    paths
}

/// The directories of the module's own packages that `CAPI` links.
fn linked_dirs(go: &str, root: &Path) -> Result<Vec<PathBuf>, String> {
    let o = Command::new(go)
        .current_dir(root)
        .env("CGO_ENABLED", "1")
        .args(["list", "-deps", "-f", "{{if not .Standard}}{{.Dir}}{{end}}", CAPI])
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!("{}: {}", o.status, String::from_utf8_lossy(&o.stderr).trim()));
    }
    let dirs = module_dirs(&String::from_utf8_lossy(&o.stdout), root);
    if dirs.is_empty() {
        return Err("no package of the module listed".into());
    }
    Ok(dirs)
}

/// The lines of `go list` output that are directories inside root (not the
/// module cache's), sorted. A package at root itself is watched by its Go
/// files: watching root would watch cargo's target/ too, and rebuild on
/// every build.
fn module_dirs(list: &str, root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for d in list.lines().map(str::trim).filter(|l| !l.is_empty()).map(PathBuf::from) {
        if d == root {
            dirs.extend(go_files(root));
        } else if d.starts_with(root) {
            dirs.push(d);
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

fn go_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "go"))
        .collect()
}

fn top_level_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.starts_with('.') && name != "sdk"
        })
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs
}
