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
//! // Which orders may the caller read? A WHERE clause with bind parameters.
//! let plan = engine.plan_resources("eyJ...", "orders:read", "orders", svc::Dialect::Sqlite)?;
//! let sql = format!("SELECT id FROM orders WHERE {}", plan.r#where); // bind plan.params
//! # Ok::<(), svc::Error>(())
//! ```
//!
//! [`Engine`] is `Send + Sync` and cheap to clone (an `Arc`); the engine is
//! stopped (JWKS refresh and every other background task) when the last
//! clone is dropped. [`tower::AuthLayer`] protects a tower service.

mod error;
mod ffi;
pub mod plan;
pub mod tower;

use std::collections::HashMap;
use std::os::raw::c_char;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use error::Error;
pub use plan::{Condition, Dialect, Plan, PlanKind};

/// The answer of [`Engine::validate_token`].
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TokenDecision {
    /// True when the token verified (or in development mode).
    pub allowed: bool,
    /// A stable code: `ok`, `dev-anonymous` or the failure
    /// (`token-expired`, `signature-invalid`, ..., and for an API key
    /// `api-key-malformed`, `api-key-unknown`, `api-key-revoked`,
    /// `api-key-expired`).
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
    /// Identifies the answer in the audit and decision logs.
    #[serde(default)]
    pub decision_id: Option<String>,
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
    /// When the tenant's rate limit refused (`rate-limited`): how long
    /// until its budget allows a request again.
    pub retry_after: Option<Duration>,
}

#[derive(Deserialize)]
struct RawDecision {
    allow: bool,
    #[serde(default)]
    deny_reasons: Vec<String>,
    reason: String,
    #[serde(default)]
    decision_id: String,
    /// Nanoseconds (Go's time.Duration); absent when zero.
    #[serde(default)]
    retry_after: u64,
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

/// The claim sets already parsed, by the id the engine gives each claim
/// set it answers (sdk/rust/capi, fields.go): a cached token's claims come
/// back with the same id on every call, and cloning their Value costs a
/// fraction of parsing it.
#[derive(Default)]
struct ClaimsCache(Mutex<HashMap<u64, Arc<serde_json::Value>>>);

impl ClaimsCache {
    fn get(&self, id: u64, json: &[u8]) -> Result<serde_json::Value, Error> {
        if id == 0 {
            return parse_claims(json);
        }
        let hit = self.0.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned();
        if let Some(v) = hit {
            return Ok((*v).clone());
        }
        let v = parse_claims(json)?;
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= MAX_PARSED_CLAIMS {
            m.clear();
        }
        m.insert(id, Arc::new(v.clone()));
        Ok(v)
    }
}

fn parse_claims(json: &[u8]) -> Result<serde_json::Value, Error> {
    if json == b"null" {
        return Ok(serde_json::Value::Null);
    }
    serde_json::from_slice(json).map_err(|e| Error::new("engine-failed", format!("unreadable claims: {e}")))
}

/// The layout of svc_validate_token_fields (sdk/rust/capi, fields.go): a
/// format byte, allowed, the claims' id, six lengths, then the parts.
const FIELDS_FORMAT: u8 = 2;
const FIELDS_HEADER: usize = 40;

/// Reads a token decision laid out as fields; an answer that starts with
/// `{` is an error document.
fn read_fields(b: &[u8], claims: &ClaimsCache) -> Result<TokenDecision, Error> {
    if b.first() == Some(&b'{') {
        return Err(parse_error(b));
    }
    let unreadable = || Error::new("engine-failed", "unreadable answer: not a token decision");
    if b.len() < FIELDS_HEADER || b[0] != FIELDS_FORMAT {
        return Err(unreadable());
    }
    let word = |at: usize| u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize;
    let mut parts: [&[u8]; 6] = [&[]; 6];
    let mut at = FIELDS_HEADER;
    for (i, part) in parts.iter_mut().enumerate() {
        let end = at.checked_add(word(16 + 4 * i)).ok_or_else(unreadable)?;
        *part = b.get(at..end).ok_or_else(unreadable)?;
        at = end;
    }
    if at != b.len() {
        return Err(unreadable());
    }
    let [reason, subject, tenant_id, message, claims_json, decision_id] = parts;
    let id = u64::from_ne_bytes(b[8..16].try_into().expect("eight bytes"));
    let text = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    let optional = |p: &[u8]| (!p.is_empty()).then(|| text(p));
    Ok(TokenDecision {
        allowed: b[1] == 1,
        reason: text(reason),
        subject: optional(subject),
        tenant_id: optional(tenant_id),
        claims: claims.get(id, claims_json)?,
        message: optional(message),
        decision_id: optional(decision_id),
    })
}

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
    /// rate limit. An API key (`svck_...`, checked against `api_keys.file`)
    /// is passed here too. A refused token is `Ok` with `allowed` false;
    /// `Err` is for an engine that could not answer.
    pub fn validate_token(&self, token: &str) -> Result<TokenDecision, Error> {
        let h = self.inner.0;
        unsafe {
            ffi::call(
                |buf, cap, big| ffi::svc_validate_token_fields(h, token.as_ptr().cast(), token.len(), buf, cap, big),
                |b| read_fields(b, &self.inner.1),
            )
        }
    }

    /// Verifies the token, fills `input.user` from its claims and
    /// `input.tenant` from the configuration, then evaluates the policy.
    /// `input` is the policy input document: `action`, `resource`,
    /// `request` (see the README's policy input).
    pub fn authorize<T: Serialize + ?Sized>(&self, token: &str, input: &T) -> Result<PolicyDecision, Error> {
        let input = serde_json::to_vec(input)
            .map_err(|e| Error::new("input-invalid", format!("the policy input cannot be encoded: {e}")))?;
        let h = self.inner.0;
        let r: RawResult = unsafe {
            ffi::call(
                |buf, cap, big| {
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
                },
                |b| parse::<RawResult>(b),
            )
        }?;
        Ok(PolicyDecision {
            allowed: r.token.allowed && r.decision.allow,
            deny_reasons: r.decision.deny_reasons,
            reason: r.decision.reason,
            decision_id: r.decision.decision_id,
            token: r.token,
            retry_after: (r.decision.retry_after > 0).then(|| Duration::from_nanos(r.decision.retry_after)),
        })
    }

    /// Which resources of type `resource_type` (the action's prefix when
    /// empty) the bearer of `token` may perform `action` on: a [`Plan`],
    /// always allowed, always denied or conditional with its condition, and
    /// as SQL for `dialect` (`plan.r#where` with bind parameters only,
    /// `plan.params`). A refused credential is `Ok` with an always denied
    /// plan whose reason is the failure code; `Err` with reason
    /// `plan-unsupported` is a policy the plan cannot express,
    /// `input-invalid` a missing action.
    pub fn plan_resources(
        &self,
        token: &str,
        action: &str,
        resource_type: &str,
        dialect: Dialect,
    ) -> Result<Plan, Error> {
        let h = self.inner.0;
        // Each argument as the pointer and length the C ABI takes.
        let [t, a, ty, d] = [token, action, resource_type, dialect.as_str()].map(|s| (s.as_ptr().cast(), s.len()));
        let r: plan::RawPlan = unsafe {
            ffi::call(
                |buf, cap, big| ffi::svc_plan_resources(h, t.0, t.1, a.0, a.1, ty.0, ty.1, d.0, d.1, buf, cap, big),
                |b| parse::<plan::RawPlan>(b),
            )
        }?;
        Ok(r.into())
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

    /// A fields answer of these parts, as capi's fields.go lays it out.
    fn fields(allowed: bool, id: u64, parts: [&str; 6]) -> Vec<u8> {
        let mut b = vec![0u8; FIELDS_HEADER];
        b[0] = FIELDS_FORMAT;
        b[1] = allowed as u8;
        b[8..16].copy_from_slice(&id.to_ne_bytes());
        for (i, p) in parts.iter().enumerate() {
            b[16 + 4 * i..20 + 4 * i].copy_from_slice(&(p.len() as u32).to_ne_bytes());
            b.extend_from_slice(p.as_bytes());
        }
        b
    }

    #[test]
    fn fields_are_read_at_their_offsets() {
        let c = ClaimsCache::default();
        let d = read_fields(
            &fields(true, 7, ["ok", "user-1", "acme", "", r#"{"sub":"user-1"}"#, "d-1"]),
            &c,
        )
        .unwrap();
        assert!(d.allowed);
        assert_eq!(d.reason, "ok");
        assert_eq!(d.subject.as_deref(), Some("user-1"));
        assert_eq!(d.tenant_id.as_deref(), Some("acme"));
        assert_eq!(d.message, None);
        assert_eq!(d.decision_id.as_deref(), Some("d-1"));
        assert_eq!(d.claims, serde_json::json!({"sub": "user-1"}));
        // The id names the claims: the parsed ones are reused.
        let again = read_fields(&fields(true, 7, ["ok", "user-1", "acme", "", "{}", "d-2"]), &c).unwrap();
        assert_eq!(again.claims, d.claims);

        let d = read_fields(&fields(false, 0, ["token-expired", "", "", "exp", "null", ""]), &c).unwrap();
        assert!(!d.allowed && d.claims.is_null() && d.subject.is_none());
        assert_eq!(d.message.as_deref(), Some("exp"));
    }

    #[test]
    fn fields_that_do_not_add_up_are_engine_failed() {
        let c = ClaimsCache::default();
        let good = fields(true, 1, ["ok", "u", "t", "", "{}", "d-3"]);
        let mut long = good.clone();
        long[16..20].copy_from_slice(&u32::MAX.to_ne_bytes());
        let mut format = good.clone();
        format[0] = 9;
        for (name, b) in [
            ("empty", &[][..]),
            ("header cut", &good[..FIELDS_HEADER - 1]),
            ("part cut", &good[..good.len() - 1]),
            ("length past the end", &long[..]),
            ("unknown format", &format[..]),
            ("trailing bytes", &[&good[..], b"x"].concat()[..]),
        ] {
            let e = read_fields(b, &c).unwrap_err();
            assert_eq!(e.reason(), "engine-failed", "{name}: {e}");
        }
        let e = read_fields(br#"{"error":{"reason":"engine-closed","message":"closed"}}"#, &c).unwrap_err();
        assert_eq!(e.reason(), "engine-closed");
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
