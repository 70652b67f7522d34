//! The tests' identity provider: sdk/rust/testidp (Go), built once per
//! test binary, serving a JWKS on loopback and signing RS256 tokens.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

pub struct Idp {
    pub jwks_url: String,
    io: Mutex<(ChildStdin, BufReader<std::process::ChildStdout>)>,
    _child: Child,
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The shared IdP of this test binary.
pub fn idp() -> &'static Idp {
    static IDP: OnceLock<Idp> = OnceLock::new();
    IDP.get_or_init(|| {
        let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join("testidp");
        let go = std::env::var("SVC_GO").unwrap_or_else(|_| "go".into());
        let st = Command::new(go)
            .current_dir(repo_root())
            .args(["build", "-o"])
            .arg(&bin)
            .arg("./sdk/rust/testidp")
            .status()
            .expect("go build testidp");
        assert!(st.success(), "go build ./sdk/rust/testidp: {st}");
        let mut child = Command::new(&bin)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("testidp");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).expect("testidp's first line");
        Idp {
            jwks_url: v["jwks_url"].as_str().unwrap().to_string(),
            io: Mutex::new((stdin, stdout)),
            _child: child,
        }
    })
}

impl Idp {
    /// An RS256 token of these claims.
    pub fn sign(&self, claims: &serde_json::Value) -> String {
        let mut io = self.io.lock().unwrap();
        writeln!(io.0, "{claims}").unwrap();
        io.0.flush().unwrap();
        let mut tok = String::new();
        io.1.read_line(&mut tok).unwrap();
        tok.trim().to_string()
    }

    /// A valid token of sub in tenant with roles, valid five minutes.
    pub fn token(&self, sub: &str, tenant: &str, roles: &[&str]) -> String {
        self.sign(&claims(sub, tenant, roles))
    }
}

pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

pub fn claims(sub: &str, tenant: &str, roles: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "sub": sub, "tenant_id": tenant, "roles": roles, "department": "sales",
        "iat": now(), "exp": now() + 300,
    })
}

/// Writes a production configuration (tenant acme, fail closed, the
/// IdP's JWKS, the audit log in audit.log beside it) into a fresh directory and returns the file's path.
pub fn config_file(name: &str, extra: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("svc-rs-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("svc.toml");
    std::fs::write(
        &path,
        format!(
            "[sdk]\ntenant_id = \"acme\"\nfail_mode = \"closed\"\njwks_url = \"{}\"\n\n[tenants.acme]\nplan = \"enterprise\"\n\n[log]\nlevel = \"error\"\n\n[audit]\ndestination = \"{}\"\n{extra}",
            idp().jwks_url,
            dir.join("audit.log").display()
        ),
    )
    .unwrap();
    path
}

/// Counted, never refused: as the Go benchmark of ValidateToken.
pub const UNLIMITED: &str = "\n[rate_limit]\ndefault_rpm = 1099511627776\n";

/// An engine of config_file(name) whose rate limit never refuses.
pub fn engine(name: &str) -> svc::Engine {
    svc::Engine::from_config_file(config_file(name, UNLIMITED)).expect("engine")
}

/// The resident set size of this process, in bytes.
pub fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}
