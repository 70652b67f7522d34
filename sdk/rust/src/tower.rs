//! A tower layer that protects an HTTP service with the engine, answering
//! as svc's Go middleware (authz.Middleware) does:
//!
//! | request                              | answer                                         |
//! |--------------------------------------|------------------------------------------------|
//! | no bearer token or API key           | 401 `token-missing`, `WWW-Authenticate: Bearer` |
//! | invalid token                        | 401, `Bearer error="invalid_token"`            |
//! | invalid API key                      | 401, `ApiKey error="invalid_key"`              |
//! | token of another tenant              | 403 `tenant-mismatch`                          |
//! | policy denies (with an action)       | 403 with the deny reasons and decision id      |
//! | tenant rate-limited                  | 429 `rate-limited`, `Retry-After`              |
//! | method override, another method      | 400 `input-invalid` (with an action)           |
//! | keys unavailable, policy error       | 503                                            |
//!
//! An API key is read as the sidecar's checks read it: the credential of
//! `Authorization: ApiKey <key>`, else, only when the request has no
//! Authorization header, `X-Api-Key`; a bearer token decides. It is
//! passed to the engine where a token is (a key starts `svck_`).
//!
//! Refusals carry the JSON body `{"allow": false, "deny_reasons": [...],
//! "reason": "...", "decision_id": "..."}`. An admitted request carries a
//! [`User`] (subject, tenant, claims) in its extensions. `Retry-After` is
//! the engine's wait until the tenant's budget allows a request, in whole
//! seconds rounded up; 1 on a route without an action, whose token check
//! gives no wait (as the Go middleware).
//!
//! The check runs in `call`, synchronously: a cached token costs about a
//! microsecond; a token signed by a key not yet in the cache makes the
//! engine fetch the JWKS (bounded by `jwt.jwks_fetch_timeout`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderValue, Request, Response, StatusCode};
use serde::Serialize;

use crate::Engine;

/// The caller of an admitted request, in the request's extensions.
#[derive(Debug, Clone, PartialEq)]
pub struct User {
    /// The sub claim, or `anonymous` in development mode.
    pub subject: String,
    /// The tenant_id claim.
    pub tenant_id: Option<String>,
    /// The verified claim set; `null` in development mode.
    pub claims: serde_json::Value,
    /// How the caller was admitted: `ok`, `policy-allow`, `dev-anonymous`...
    pub reason: String,
    /// The policy decision's id when the route has an action.
    pub decision_id: Option<String>,
}

/// The JSON body of every refused request.
#[derive(Debug, Serialize)]
struct DenyBody<'a> {
    allow: bool,
    deny_reasons: &'a [String],
    reason: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    decision_id: &'a str,
}

type ActionFn<B> = Arc<dyn Fn(&Request<B>) -> Option<String> + Send + Sync>;

/// A [`tower::Layer`](::tower::Layer) that verifies the bearer token or
/// API key of each request and, when the route has an action, evaluates
/// the policy.
pub struct AuthLayer<B> {
    engine: Engine,
    action: Option<ActionFn<B>>,
    realm: Option<String>,
}

impl<B> Clone for AuthLayer<B> {
    fn clone(&self) -> Self {
        AuthLayer {
            engine: self.engine.clone(),
            action: self.action.clone(),
            realm: self.realm.clone(),
        }
    }
}

impl<B> AuthLayer<B> {
    /// Verifies tokens only (no policy).
    pub fn new(engine: Engine) -> Self {
        AuthLayer {
            engine,
            action: None,
            realm: None,
        }
    }

    /// Evaluates the policy with the action this function returns for a
    /// request (e.g. `orders:read`); `None` verifies the token only.
    pub fn with_action(mut self, f: impl Fn(&Request<B>) -> Option<String> + Send + Sync + 'static) -> Self {
        self.action = Some(Arc::new(f));
        self
    }

    /// Announces a realm in WWW-Authenticate.
    pub fn with_realm(mut self, realm: impl Into<String>) -> Self {
        self.realm = Some(realm.into());
        self
    }
}

impl<S, B> ::tower::Layer<S> for AuthLayer<B> {
    type Service = AuthService<S, B>;

    fn layer(&self, inner: S) -> Self::Service {
        AuthService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service of [`AuthLayer`].
pub struct AuthService<S, B> {
    inner: S,
    layer: AuthLayer<B>,
}

impl<S: Clone, B> Clone for AuthService<S, B> {
    fn clone(&self) -> Self {
        AuthService {
            inner: self.inner.clone(),
            layer: self.layer.clone(),
        }
    }
}

impl<S, B, ResBody> ::tower::Service<Request<B>> for AuthService<S, B>
where
    S: ::tower::Service<Request<B>, Response = Response<ResBody>> + Clone,
    S::Future: Send + 'static,
    ResBody: From<String>,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        match self.check(&req) {
            Ok(user) => {
                req.extensions_mut().insert(user);
                // The clone is the one that was not made ready: swap so
                // that the ready one serves this request.
                let clone = self.inner.clone();
                let mut ready = std::mem::replace(&mut self.inner, clone);
                ResponseFuture {
                    state: State::Inner(Box::pin(ready.call(req))),
                }
            }
            Err(resp) => ResponseFuture {
                state: State::Refused(Some(resp)),
            },
        }
    }
}

/// A refusal: status, reason, deny reasons, decision id.
struct Refusal {
    status: StatusCode,
    reason: String,
    deny_reasons: Vec<String>,
    decision_id: String,
    challenge: Option<String>,
    /// The engine's wait before a retry, sent as Retry-After.
    retry_after: Option<Duration>,
}

impl<S, B> AuthService<S, B> {
    fn check<ResBody: From<String>>(&self, req: &Request<B>) -> Result<User, Response<ResBody>> {
        let token = match bearer_token(req).or_else(|| api_key(req)) {
            Some(t) => t,
            None => {
                return Err(self.refuse(Refusal {
                    status: StatusCode::UNAUTHORIZED,
                    reason: "token-missing".into(),
                    deny_reasons: vec![],
                    decision_id: String::new(),
                    challenge: Some(String::new()),
                    retry_after: None,
                }))
            }
        };
        let action = self
            .layer
            .action
            .as_ref()
            .and_then(|f| f(req))
            .filter(|a| !a.is_empty());
        if action.is_some() && method_overridden(req) {
            // The inner service may serve another method than the one
            // the action was chosen by: refused, as the sidecar's proxy
            // check and the Go middleware refuse it.
            return Err(self.refuse(Refusal {
                status: StatusCode::BAD_REQUEST,
                reason: "input-invalid".into(),
                deny_reasons: vec![],
                decision_id: String::new(),
                challenge: None,
                retry_after: None,
            }));
        }
        let engine = &self.layer.engine;
        match action {
            None => match engine.validate_token(token) {
                Err(e) => Err(self.refuse(error_refusal(e))),
                // ValidateToken carries no wait: Retry-After is 1, as the
                // Go middleware's.
                Ok(d) if !d.allowed => Err(self.refuse(denied(d.reason, vec![], String::new(), None))),
                Ok(d) => Ok(User {
                    subject: d.subject.unwrap_or_default(),
                    tenant_id: d.tenant_id,
                    claims: d.claims,
                    reason: d.reason,
                    decision_id: None,
                }),
            },
            Some(action) => match engine.authorize(token, &serde_json::json!({ "action": action })) {
                Err(e) => Err(self.refuse(error_refusal(e))),
                Ok(p) if !p.allowed => Err(self.refuse(denied(p.reason, p.deny_reasons, p.decision_id, p.retry_after))),
                Ok(p) => Ok(User {
                    subject: p.token.subject.unwrap_or_default(),
                    tenant_id: p.token.tenant_id,
                    claims: p.token.claims,
                    reason: p.reason,
                    decision_id: Some(p.decision_id),
                }),
            },
        }
    }

    fn refuse<ResBody: From<String>>(&self, r: Refusal) -> Response<ResBody> {
        let body = serde_json::to_string(&DenyBody {
            allow: false,
            deny_reasons: &r.deny_reasons,
            reason: &r.reason,
            decision_id: &r.decision_id,
        })
        .expect("strings encode");
        let mut resp = Response::new(ResBody::from(body));
        *resp.status_mut() = r.status;
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if r.status == StatusCode::TOO_MANY_REQUESTS || r.retry_after.is_some() {
            h.insert(RETRY_AFTER, HeaderValue::from(retry_after_seconds(r.retry_after)));
        }
        if let Some(rc) = r.challenge {
            let mut params = Vec::new();
            if let Some(realm) = &self.layer.realm {
                params.push(format!("realm={}", quote(realm)));
            }
            let mut v = "Bearer".to_string();
            if API_KEY_FAILURES.contains(&rc.as_str()) {
                // A refused API key is challenged in its own scheme.
                v = "ApiKey".to_string();
                params.push("error=\"invalid_key\"".to_string());
                params.push(format!("error_description={}", quote(&rc)));
            } else if !rc.is_empty() {
                params.push("error=\"invalid_token\"".to_string());
                params.push(format!("error_description={}", quote(&rc)));
            }
            if !params.is_empty() {
                v.push(' ');
                v.push_str(&params.join(", "));
            }
            if let Ok(v) = HeaderValue::from_str(&v) {
                h.insert(WWW_AUTHENTICATE, v);
            }
        }
        resp
    }
}

/// The reasons for which a token itself was refused: 401 with a challenge.
/// The sidecar's (reason/testdata/failures.json, which the tests compare).
const TOKEN_FAILURES: &[&str] = &[
    "token-malformed",
    "token-expired",
    "token-not-yet-valid",
    "token-issued-in-future",
    "token-bound",
    "signature-invalid",
    "unknown-kid",
    "alg-not-allowed",
    "key-too-weak",
    "tenant-missing",
    "issuer-mismatch",
    "issuer-unknown",
    "audience-mismatch",
    "typ-not-allowed",
    "token-inactive",
];

/// The reasons for which an API key was refused: 401, challenged as ApiKey.
const API_KEY_FAILURES: &[&str] = &[
    "api-key-malformed",
    "api-key-unknown",
    "api-key-revoked",
    "api-key-expired",
];

/// Retry-After in whole seconds, rounded up, at least 1: as
/// authz.Middleware writes it.
fn retry_after_seconds(d: Option<Duration>) -> u64 {
    d.map_or(0, |d| d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

/// The answer to a refused decision, as authz.Middleware's denied.
fn denied(reason: String, deny_reasons: Vec<String>, decision_id: String, retry_after: Option<Duration>) -> Refusal {
    let (status, challenge) = match reason.as_str() {
        "policy-deny" | "tenant-mismatch" => (StatusCode::FORBIDDEN, None),
        "rate-limited" => (StatusCode::TOO_MANY_REQUESTS, None),
        "jwks-unavailable" | "policy-error" | "unavailable" => (StatusCode::SERVICE_UNAVAILABLE, None),
        "token-missing" => (StatusCode::UNAUTHORIZED, Some(String::new())),
        r if TOKEN_FAILURES.contains(&r) || API_KEY_FAILURES.contains(&r) => {
            (StatusCode::UNAUTHORIZED, Some(r.to_string()))
        }
        _ => (StatusCode::FORBIDDEN, None),
    };
    Refusal {
        status,
        reason,
        deny_reasons,
        decision_id,
        challenge,
        retry_after,
    }
}

/// An engine that could not answer: never admit, 503 for a policy error,
/// 500 otherwise (as authz.Middleware's failed).
fn error_refusal(e: crate::Error) -> Refusal {
    let status = match e.reason() {
        "policy-error" => StatusCode::SERVICE_UNAVAILABLE,
        "input-invalid" => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Refusal {
        status,
        reason: e.reason,
        deny_reasons: vec![],
        decision_id: String::new(),
        challenge: None,
        retry_after: None,
    }
}

/// The bearer token of the Authorization header (scheme case-insensitive).
fn bearer_token<B>(req: &Request<B>) -> Option<&str> {
    let v = req.headers().get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, tok) = v.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let tok = tok.trim();
    (!tok.is_empty()).then_some(tok)
}

/// The API key of the request, by the rule of the sidecar's checks (Go's
/// wire.APIKeyFromHeaders): the credential of an Authorization header of
/// the ApiKey scheme (case-insensitive, then a space or tab), else, when
/// the request has no Authorization header at all, X-Api-Key; trimmed.
fn api_key<B>(req: &Request<B>) -> Option<&str> {
    let key = match req.headers().get(AUTHORIZATION) {
        None => req.headers().get("x-api-key")?.to_str().ok()?.trim(),
        Some(v) => {
            let v = v.to_str().ok()?.trim();
            let (scheme, rest) = (v.get(..6)?, &v[6..]);
            if !scheme.eq_ignore_ascii_case("apikey") || !rest.starts_with([' ', '\t']) {
                return None;
            }
            rest.trim()
        }
    };
    (!key.is_empty()).then_some(key)
}

/// The headers that make Rails, Express (method-override), Spring and
/// other frameworks serve a request as the method they name.
const METHOD_OVERRIDE_HEADERS: &[&str] = &["x-http-method-override", "x-http-method", "x-method-override"];

/// Whether a method override header of the request names another method
/// than its own (or is not text): a service honoring it would serve
/// `GET /orders/1` with `X-HTTP-Method-Override: DELETE` as the DELETE
/// while the action was chosen by the GET. An override applied before the
/// layer, which leaves the request's method the one served, passes.
fn method_overridden<B>(req: &Request<B>) -> bool {
    METHOD_OVERRIDE_HEADERS.iter().any(|h| {
        req.headers().get_all(*h).iter().any(|v| match v.to_str() {
            Ok(v) => !v.trim().eq_ignore_ascii_case(req.method().as_str()),
            Err(_) => true,
        })
    })
}

/// A quoted-string as Go's strconv.Quote writes one for ASCII.
fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// The future of [`AuthService`]: the inner service's, or a refusal.
pub struct ResponseFuture<F, ResBody> {
    state: State<F, ResBody>,
}

enum State<F, ResBody> {
    Inner(Pin<Box<F>>),
    Refused(Option<Response<ResBody>>),
}

impl<F, ResBody, E> Future for ResponseFuture<F, ResBody>
where
    F: Future<Output = Result<Response<ResBody>, E>>,
{
    type Output = Result<Response<ResBody>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Every field is Unpin (the inner future is boxed).
        let this = unsafe { self.get_unchecked_mut() };
        match &mut this.state {
            State::Inner(f) => f.as_mut().poll(cx),
            State::Refused(r) => Poll::Ready(Ok(r.take().expect("polled after completion"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lists of credential failures are the sidecar's, as the Go
    /// reason package writes them.
    #[test]
    fn failures_are_the_sidecars() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../reason/testdata/failures.json");
        let golden: std::collections::BTreeMap<String, Vec<String>> =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let sorted = |l: &[&str]| {
            let mut v: Vec<String> = l.iter().map(|s| s.to_string()).collect();
            v.sort();
            v
        };
        let mut want = golden["token_failures"].clone();
        want.sort();
        assert_eq!(sorted(TOKEN_FAILURES), want);
        let mut want = golden["api_key_failures"].clone();
        want.sort();
        assert_eq!(sorted(API_KEY_FAILURES), want);
    }

    #[test]
    fn bearer_tokens() {
        let req = |v: &str| Request::builder().header(AUTHORIZATION, v).body(()).unwrap();
        assert_eq!(bearer_token(&req("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&req("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(&req("Basic abc")), None);
        assert_eq!(bearer_token(&req("Bearer ")), None);
        assert_eq!(bearer_token(&Request::new(())), None);
    }

    #[test]
    fn api_keys() {
        let req = |auth: Option<&str>, key: Option<&str>| {
            let mut b = Request::builder();
            if let Some(a) = auth {
                b = b.header(AUTHORIZATION, a);
            }
            if let Some(k) = key {
                b = b.header("x-api-key", k);
            }
            b.body(()).unwrap()
        };
        assert_eq!(api_key(&req(None, None)), None);
        assert_eq!(api_key(&req(None, Some(" svck_a_b "))), Some("svck_a_b"));
        assert_eq!(api_key(&req(Some("ApiKey svck_a_b"), None)), Some("svck_a_b"));
        assert_eq!(
            api_key(&req(Some("apikey\tsvck_a_b "), Some("svck_other"))),
            Some("svck_a_b")
        );
        assert_eq!(api_key(&req(Some(" APIKEY  svck_a_b"), None)), Some("svck_a_b"));
        assert_eq!(api_key(&req(Some("Bearer x"), Some("svck_a_b"))), None);
        assert_eq!(api_key(&req(Some(""), Some("svck_a_b"))), None);
        assert_eq!(api_key(&req(Some("ApiKey"), None)), None);
        assert_eq!(api_key(&req(Some("ApiKeyx y"), None)), None);
        assert_eq!(api_key(&req(Some("ApiKey "), Some("svck_a_b"))), None);
        assert_eq!(api_key(&req(Some("Api\u{e9}ey x"), None)), None);
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        let s = |ms: u64| retry_after_seconds(Some(Duration::from_millis(ms)));
        assert_eq!(retry_after_seconds(None), 1);
        assert_eq!(s(0), 1);
        assert_eq!(s(1), 1);
        assert_eq!(s(1000), 1);
        assert_eq!(s(1001), 2);
        assert_eq!(s(59_990), 60);
    }

    #[test]
    fn statuses_follow_the_go_middleware() {
        let s = |r: &str| denied(r.into(), vec![], String::new(), None).status;
        assert_eq!(s("policy-deny"), StatusCode::FORBIDDEN);
        assert_eq!(s("tenant-mismatch"), StatusCode::FORBIDDEN);
        assert_eq!(s("token-expired"), StatusCode::UNAUTHORIZED);
        assert_eq!(s("rate-limited"), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(s("jwks-unavailable"), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            denied("signature-invalid".into(), vec![], String::new(), None)
                .challenge
                .as_deref(),
            Some("signature-invalid")
        );
    }
}
