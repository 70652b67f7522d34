//! svc's decision engine in-process: bearer JWT verification against a
//! cached, rotating JWKS and svc.authz policy evaluation, the same Go
//! engine that svc-sidecar runs, linked into the program through a C ABI.
//!
//! ```no_run
//! let engine = svc::Engine::from_env()?; // ./svc.toml when present, then SVC_* variables
//! let d = engine.validate_token("eyJ...")?;
//! if d.allowed {
//!     println!("{:?} {}", d.subject, d.claims);
//! }
//! let p = engine.authorize("eyJ...", &serde_json::json!({"action": "orders:read"}))?;
//! println!("{} {:?} {}", p.allowed, p.deny_reasons, p.decision_id);
//! # Ok::<(), svc::Error>(())
//! ```
//!
//! [`Engine`] is `Send + Sync` and cheap to clone (an `Arc`); the engine is
//! stopped (JWKS refresh and every other background task) when the last
//! clone is dropped. [`tower::AuthLayer`] protects a tower service.

mod error;
mod ffi;
pub mod tower;

use std::collections::HashMap;
use std::os::raw::c_char;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

pub use error::Error;

/// The answer of [`Engine::validate_token`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TokenDecision {
    /// True when the token verified (or in development mode).
    pub allowed: bool,
    /// A stable code: `ok`, `dev-anonymous` or the failure
    /// (`token-expired`, `signature-invalid`, ...).
    pub reason: String,
    /// The sub claim, or `anonymous` in development mode.
    #[serde(default)]
    pub subject: Option<String>,
    /// The tenant_id claim.
    #[serde(default)]
    pub tenant_id: Option<String>,
    /// The verified claim set; `null` in development mode and on failure.
    #[serde(default)]
    pub claims: serde_json::Value,
    /// Explains a failure; never token or key material.
    #[serde(default)]
    pub message: Option<String>,
}

/// The answer of [`Engine::authorize`].
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyDecision {
    /// True when the token verified and the policy allowed.
    pub allowed: bool,
    /// The policy's deny reasons, sorted; empty when allowed.
    pub deny_reasons: Vec<String>,
    /// `policy-allow`, `policy-deny`, `policy-dry-run`, `rate-limited` or
    /// the token failure when the policy was not reached.
    pub reason: String,
    /// Identifies the decision in logs, traces and the audit log.
    pub decision_id: String,
    /// The token decision the policy decision started from.
    pub token: TokenDecision,
}

#[derive(Deserialize)]
struct RawDecision {
    allow: bool,
    #[serde(default)]
    deny_reasons: Vec<String>,
    reason: String,
    #[serde(default)]
    decision_id: String,
}

#[derive(Deserialize)]
struct RawResult {
    token: TokenDecision,
    decision: RawDecision,
}

/// An engine: verifies tokens and evaluates policies, from any number of
/// threads. Clones share one engine, released when the last is dropped.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Handle>,
}

struct Handle(u64, ClaimsCache);

impl Drop for Handle {
    fn drop(&mut self) {
        // Stops the engine's goroutines, flushes its audit log and
        // telemetry, and forgets the handle.
        unsafe { ffi::svc_engine_close(self.0) }
    }
}

/// Bounds the claim sets an engine keeps parsed.
const MAX_PARSED_CLAIMS: usize = 1024;

/// The claim sets already parsed, by their JSON: a cached token's claims
/// come back as the same bytes on every call, and cloning their Value
/// costs a third of parsing it.
#[derive(Default)]
struct ClaimsCache(Mutex<HashMap<Vec<u8>, Arc<serde_json::Value>>>);

impl ClaimsCache {
    fn parse(&self, json: &[u8]) -> Result<serde_json::Value, Error> {
        if json == b"null" {
            return Ok(serde_json::Value::Null);
        }
        let hit = self.0.lock().unwrap_or_else(|e| e.into_inner()).get(json).cloned();
        if let Some(v) = hit {
            return Ok((*v).clone());
        }
        let v: serde_json::Value =
            serde_json::from_slice(json).map_err(|e| Error::new("engine-failed", format!("unreadable claims: {e}")))?;
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= MAX_PARSED_CLAIMS {
            m.clear();
        }
        m.insert(json.to_vec(), Arc::new(v.clone()));
        Ok(v)
    }
}

/// A token decision without its claims: the answer of validate_token up
/// to its last key, `"claims"`.
#[derive(Deserialize)]
struct DecisionHead {
    allowed: bool,
    reason: String,
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    tenant_id: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

const CLAIMS_KEY: &[u8] = b",\"claims\":";

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("handle", &self.inner.0).finish()
    }
}

impl Engine {
    /// Starts an engine configured as svc-sidecar is without `--config`:
    /// `svc.toml` in the working directory when present, then the `SVC_*`
    /// environment variables. Without either, the engine runs in
    /// development mode (every token accepted as `anonymous`).
    pub fn from_env() -> Result<Engine, Error> {
        Self::open("", true)
    }

    /// Starts an engine configured by the file at `path` (`.toml`, `.yaml`
    /// or `.yml`), then the `SVC_*` environment variables.
    pub fn from_config_file(path: impl AsRef<Path>) -> Result<Engine, Error> {
        let path = path.as_ref();
        let s = path
            .to_str()
            .ok_or_else(|| Error::new("config-invalid", format!("{}: the path is not UTF-8", path.display())))?;
        if s.is_empty() {
            return Err(Error::new("config-invalid", "no configuration file named"));
        }
        Self::open(s, false)
    }

    fn open(path: &str, from_env: bool) -> Result<Engine, Error> {
        let mut err: *mut c_char = std::ptr::null_mut();
        let h = unsafe { ffi::svc_engine_open(path.as_ptr().cast(), path.len(), from_env as i32, &mut err) };
        if h == 0 {
            let doc = unsafe { ffi::take(err) };
            return Err(match doc {
                Some(b) => parse_error(&b),
                None => Error::new("engine-start-failed", "the engine did not start"),
            });
        }
        Ok(Engine {
            inner: Arc::new(Handle(h, ClaimsCache::default())),
        })
    }

    /// Verifies a bearer token (without the `Bearer ` prefix): signature
    /// against the JWKS, expiry, issuer, audience, tenant and the tenant's
    /// rate limit. A refused token is `Ok` with `allowed` false; `Err` is
    /// for an engine that could not answer.
    pub fn validate_token(&self, token: &str) -> Result<TokenDecision, Error> {
        let h = self.inner.0;
        let mut b = unsafe {
            ffi::call(|buf, cap, big| ffi::svc_validate_token(h, token.as_ptr().cast(), token.len(), buf, cap, big))
        };
        if b.starts_with(b"{\"error\":") {
            return Err(parse_error(&b));
        }
        // The claims are the last key (sdk/rust/capi writes them so); the
        // key cannot occur inside a string, where quotes are escaped.
        let at = b
            .windows(CLAIMS_KEY.len())
            .position(|w| w == CLAIMS_KEY)
            .filter(|_| b.last() == Some(&b'}'))
            .ok_or_else(|| Error::new("engine-failed", "unreadable answer: no claims"))?;
        let claims = self.inner.1.parse(&b[at + CLAIMS_KEY.len()..b.len() - 1])?;
        b[at] = b'}';
        let head: DecisionHead = parse(&b[..=at])?;
        Ok(TokenDecision {
            allowed: head.allowed,
            reason: head.reason,
            subject: head.subject,
            tenant_id: head.tenant_id,
            claims,
            message: head.message,
        })
    }

    /// Verifies the token, fills `input.user` from its claims and
    /// `input.tenant` from the configuration, then evaluates the policy.
    /// `input` is the policy input document: `action`, `resource`,
    /// `request` (see the README's policy input).
    pub fn authorize<T: Serialize + ?Sized>(&self, token: &str, input: &T) -> Result<PolicyDecision, Error> {
        let input = serde_json::to_vec(input)
            .map_err(|e| Error::new("input-invalid", format!("the policy input cannot be encoded: {e}")))?;
        let h = self.inner.0;
        let b = unsafe {
            ffi::call(|buf, cap, big| {
                ffi::svc_authorize(
                    h,
                    token.as_ptr().cast(),
                    token.len(),
                    input.as_ptr().cast(),
                    input.len(),
                    buf,
                    cap,
                    big,
                )
            })
        };
        let r: RawResult = parse(&b)?;
        Ok(PolicyDecision {
            allowed: r.token.allowed && r.decision.allow,
            deny_reasons: r.decision.deny_reasons,
            reason: r.decision.reason,
            decision_id: r.decision.decision_id,
            token: r.token,
        })
    }
}

fn parse<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Result<T, Error> {
    if b.starts_with(b"{\"error\":") {
        return Err(parse_error(b));
    }
    serde_json::from_slice(b).map_err(|e| Error::new("engine-failed", format!("unreadable answer: {e}")))
}

fn parse_error(b: &[u8]) -> Error {
    match serde_json::from_slice::<error::ErrorDoc>(b) {
        Ok(d) => d.error,
        Err(e) => Error::new("engine-failed", format!("unreadable error: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn engine_is_send_sync() {
        assert_send_sync::<Engine>();
    }

    #[test]
    fn error_documents_are_errors() {
        let e = parse::<TokenDecision>(br#"{"error":{"reason":"engine-closed","message":"the engine is closed"}}"#)
            .unwrap_err();
        assert_eq!(e.reason(), "engine-closed");
        assert_eq!(e.to_string(), "engine-closed: the engine is closed");
        let e = parse::<TokenDecision>(b"{\"allowed\":").unwrap_err();
        assert_eq!(e.reason(), "engine-failed");
    }

    #[test]
    fn development_mode_from_a_file() {
        let dir = std::env::temp_dir().join(format!("svc-rs-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("svc.toml");
        std::fs::write(
            &path,
            "[sdk]\ntenant_id = \"acme\"\nfail_mode = \"open\"\n[log]\nlevel = \"error\"\n",
        )
        .unwrap();
        let e = Engine::from_config_file(&path).unwrap();
        let d = e.validate_token("any-token").unwrap();
        assert!(d.allowed);
        assert_eq!(d.reason, "dev-anonymous");
        assert_eq!(d.subject.as_deref(), Some("anonymous"));
        assert!(d.claims.is_null());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_configuration_is_config_invalid() {
        let e = Engine::from_config_file("/nonexistent/svc.toml").unwrap_err();
        assert_eq!(e.reason(), "config-invalid", "{e}");
        let e = Engine::from_config_file("svc.ini").unwrap_err();
        assert_eq!(e.reason(), "config-invalid", "{e}");
        let _: &dyn std::error::Error = &e;
    }
}
