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
        let bin = go_build("./sdk/rust/testidp");
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
    config_file_audit(name, extra, None)
}

/// config_file with audit.destination set to audit, when given (`"off"`:
/// no audit log, as in the Go engine's benchmarks).
pub fn config_file_audit(name: &str, extra: &str, audit: Option<&str>) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("svc-rs-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("svc.toml");
    let audit = audit.map_or_else(|| dir.join("audit.log").display().to_string(), str::to_string);
    std::fs::write(
        &path,
        format!(
            "[sdk]\ntenant_id = \"acme\"\nfail_mode = \"closed\"\njwks_url = \"{}\"\n\n[tenants.acme]\nplan = \"enterprise\"\n\n[log]\nlevel = \"error\"\n\n[audit]\ndestination = \"{audit}\"\n{extra}",
            idp().jwks_url,
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

/// The core binary (cmd/core): SVC_CORE_BIN, else built once per test
/// binary.
pub fn core() -> &'static Path {
    static CORE: OnceLock<PathBuf> = OnceLock::new();
    CORE.get_or_init(|| {
        if let Some(bin) = std::env::var_os("SVC_CORE_BIN") {
            return bin.into();
        }
        go_build("./cmd/core")
    })
}

/// Builds the repository's Go package (`./cmd/core`) with SVC_GO, else
/// go, into the test binary's temporary directory under its last name;
/// returns the binary's path.
fn go_build(package: &str) -> PathBuf {
    let bin = Path::new(env!("CARGO_TARGET_TMPDIR")).join(package.rsplit('/').next().unwrap());
    let go = std::env::var("SVC_GO").unwrap_or_else(|_| "go".into());
    let st = Command::new(go)
        .current_dir(repo_root())
        .args(["build", "-o"])
        .arg(&bin)
        .arg(package)
        .status()
        .unwrap_or_else(|e| panic!("go build {package}: {e}"));
    assert!(st.success(), "go build {package}: {st}");
    bin
}

/// API keys of tenant acme in a key file made by `core api-key create`:
/// viewer (subject reporting, role viewer), revoked (by `core api-key
/// revoke`), expired (past its expiry) and unknown (the revoked key's id
/// with the viewer's secret: no entry matches).
pub struct ApiKeys {
    pub file: PathBuf,
    pub viewer: String,
    pub revoked: String,
    pub expired: String,
    pub unknown: String,
}

/// The id of an API key svck_<id>_<secret>: 12 characters.
pub fn key_id(key: &str) -> &str {
    &key["svck_".len().."svck_".len() + 12]
}

impl ApiKeys {
    /// Makes the keys in a fresh file of test name.
    pub fn create(name: &str) -> ApiKeys {
        let dir = std::env::temp_dir().join(format!("svc-rs-{name}-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("api-keys.toml");
        let run = |args: &[&str]| {
            let out = Command::new(core())
                .arg("api-key")
                .arg(args[0])
                .arg("--file")
                .arg(&file)
                .args(&args[1..])
                .output()
                .expect("core api-key");
            assert!(
                out.status.success(),
                "core api-key {}: {}",
                args[0],
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap().trim().to_string()
        };
        let create = |subject: &str, role: &str, extra: &[&str]| {
            let mut args = vec!["create", "--tenant", "acme", "--subject", subject, "--role", role];
            args.extend_from_slice(extra);
            run(&args)
        };
        let expired = create("expiring-job", "viewer", &["--expires", "1s"]);
        // The file holds the expiry in whole seconds: past it by then.
        let expired_by = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 2;
        let viewer = create("reporting", "viewer", &[]);
        let revoked = create("old-job", "admin", &[]);
        run(&["revoke", key_id(&revoked)]);
        let unknown = format!("svck_{}_{}", key_id(&revoked), &viewer["svck_".len() + 13..]);
        while SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() < expired_by {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        ApiKeys {
            file,
            viewer,
            revoked,
            expired,
            unknown,
        }
    }

    /// An engine of config_file(name) taking these keys beside the IdP's
    /// tokens, whose rate limit never refuses.
    pub fn engine(&self, name: &str) -> svc::Engine {
        let extra = format!(
            "{UNLIMITED}\n[api_keys]\nfile = {:?}\n",
            self.file.display().to_string()
        );
        svc::Engine::from_config_file(config_file(name, &extra)).expect("engine with API keys")
    }
}

/// The resident set size of this process, in bytes.
pub fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}
