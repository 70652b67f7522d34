//! The tower layer: refusals as the Go middleware answers them, claims in
//! the request's extensions.

mod common;

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::{Request, Response, StatusCode};
use serde_json::{json, Value};
use svc::tower::{AuthLayer, User};
use tower::{Layer, Service};

/// A service that answers each request with its function's response.
#[derive(Clone)]
struct Handler<F>(F);

impl<F: Fn(Request<String>) -> Response<String>> Service<Request<String>> for Handler<F> {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<String>) -> Self::Future {
        ready(Ok((self.0)(req)))
    }
}

type Answer = fn(Request<String>) -> Response<String>;

/// Answers with the admitted user's subject and department claim.
const ECHO: Handler<Answer> = Handler(|req| {
    let u = req
        .extensions()
        .get::<User>()
        .expect("the layer stores the user")
        .clone();
    Response::new(json!({"sub": u.subject, "dept": u.claims["department"], "reason": u.reason}).to_string())
});

/// Runs a future that never waits (the layer and ECHO answer at once).
fn now<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the future waited"),
    }
}

fn send<S>(svc: &mut S, auth: Option<String>, path: &str) -> (StatusCode, http::HeaderMap, Value)
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
{
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    send_headers(svc, &headers, path)
}

fn send_headers<S>(svc: &mut S, headers: &[(&str, &str)], path: &str) -> (StatusCode, http::HeaderMap, Value)
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
{
    let mut b = Request::builder().uri(path);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    now(std::future::poll_fn(|cx| svc.poll_ready(cx))).unwrap();
    let resp = now(svc.call(b.body(String::new()).unwrap())).unwrap();
    let (parts, body) = resp.into_parts();
    (parts.status, parts.headers, serde_json::from_str(&body).unwrap())
}

/// The action of a request: orders:delete on /delete, else orders:read.
fn read_or_delete(r: &Request<String>) -> Option<String> {
    Some(
        if r.uri().path() == "/delete" {
            "orders:delete"
        } else {
            "orders:read"
        }
        .to_string(),
    )
}

#[test]
fn validate_only() {
    let e = common::engine("tower-validate");
    let mut svc = AuthLayer::new(e).with_realm("orders").layer(ECHO);
    let idp = common::idp();

    let (st, h, body) = send(&mut svc, None, "/orders");
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body,
        json!({"allow": false, "deny_reasons": [], "reason": "token-missing"})
    );
    assert_eq!(h["www-authenticate"], "Bearer realm=\"orders\"");
    assert_eq!(h["content-type"], "application/json");

    let (st, h, body) = send(&mut svc, Some("Bearer not-a-jwt".into()), "/orders");
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert_eq!(body["reason"], "token-malformed");
    assert_eq!(
        h["www-authenticate"],
        "Bearer realm=\"orders\", error=\"invalid_token\", error_description=\"token-malformed\""
    );

    let other = idp.token("user-2", "globex", &["viewer"]);
    let (st, _, body) = send(&mut svc, Some(format!("Bearer {other}")), "/orders");
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert_eq!(body["reason"], "tenant-mismatch");

    let tok = idp.token("user-1", "acme", &["viewer"]);
    let (st, _, body) = send(&mut svc, Some(format!("Bearer {tok}")), "/orders");
    assert_eq!(st, StatusCode::OK);
    assert_eq!(body, json!({"sub": "user-1", "dept": "sales", "reason": "ok"}));
}

#[test]
fn with_a_policy_action() {
    let e = common::engine("tower-authorize");
    let mut svc = AuthLayer::new(e).with_action(read_or_delete).layer(ECHO);
    let tok = common::idp().token("user-1", "acme", &["viewer"]);

    let (st, _, body) = send(&mut svc, Some(format!("Bearer {tok}")), "/read");
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["reason"], "policy-allow");

    let (st, h, body) = send(&mut svc, Some(format!("Bearer {tok}")), "/delete");
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert_eq!(body["allow"], false);
    assert_eq!(body["reason"], "policy-deny");
    assert_eq!(
        body["deny_reasons"],
        json!(["role-forbidden: viewer cannot orders:delete"])
    );
    assert!(body["decision_id"].as_str().is_some_and(|s| !s.is_empty()), "{body}");
    assert!(h.get("www-authenticate").is_none());
}

/// An engine whose tenants may make one request a minute: the second waits
/// about 60 s.
fn one_a_minute(name: &str) -> svc::Engine {
    svc::Engine::from_config_file(common::config_file(name, "\n[rate_limit]\ndefault_rpm = 1\n")).unwrap()
}

#[test]
fn rate_limited_is_429() {
    let mut svc = AuthLayer::new(one_a_minute("tower-rl")).layer(ECHO);
    let tok = common::idp().token("user-1", "acme", &["viewer"]);
    assert_eq!(send(&mut svc, Some(format!("Bearer {tok}")), "/").0, StatusCode::OK);
    let (st, h, body) = send(&mut svc, Some(format!("Bearer {tok}")), "/");
    assert_eq!(st, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["reason"], "rate-limited");
    // The token check gives no wait: 1, as the Go middleware sends.
    assert_eq!(h["retry-after"], "1");
}

#[test]
fn rate_limited_sends_the_engines_retry_after() {
    let mut svc = AuthLayer::new(one_a_minute("tower-rl-policy"))
        .with_action(|_: &Request<String>| Some("orders:read".to_string()))
        .layer(ECHO);
    let tok = common::idp().token("user-1", "acme", &["viewer"]);
    assert_eq!(send(&mut svc, Some(format!("Bearer {tok}")), "/").0, StatusCode::OK);
    let (st, h, body) = send(&mut svc, Some(format!("Bearer {tok}")), "/");
    assert_eq!(st, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(body["reason"], "rate-limited");
    assert!(body["decision_id"].as_str().is_some_and(|s| !s.is_empty()), "{body}");
    let secs: u64 = h["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(
        (50..=60).contains(&secs),
        "Retry-After: {secs}; want the engine's wait, about 60 s"
    );
}

/// A request of the api_keys table, on /read unless said, and the answer
/// the layer must give it.
struct Case<'a> {
    what: &'a str,
    path: &'a str,
    headers: Vec<(&'a str, &'a str)>,
    status: StatusCode,
    reason: &'a str,
    /// WWW-Authenticate
    challenge: Option<String>,
}

impl<'a> Case<'a> {
    /// Allowed by the policy.
    fn allowed(what: &'a str, headers: Vec<(&'a str, &'a str)>) -> Self {
        Case {
            what,
            path: "/read",
            headers,
            status: StatusCode::OK,
            reason: "policy-allow",
            challenge: None,
        }
    }

    /// Refused with 401 and this challenge.
    fn unauthorized(what: &'a str, headers: Vec<(&'a str, &'a str)>, reason: &'a str, challenge: &str) -> Self {
        Case {
            status: StatusCode::UNAUTHORIZED,
            reason,
            challenge: Some(challenge.to_string()),
            ..Case::allowed(what, headers)
        }
    }

    /// A refused API key: 401, challenged in the ApiKey scheme.
    fn bad_key(what: &'a str, headers: Vec<(&'a str, &'a str)>, reason: &'a str) -> Self {
        let challenge = format!("ApiKey realm=\"orders\", error=\"invalid_key\", error_description=\"{reason}\"");
        Case::unauthorized(what, headers, reason, &challenge)
    }

    /// Sends the request to svc and checks the status and the challenge
    /// (label names the case in a failure); returns the body.
    fn send<S>(&self, svc: &mut S, label: &str) -> Value
    where
        S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
    {
        let (st, h, body) = send_headers(svc, &self.headers, self.path);
        assert_eq!(st, self.status, "{label}: {body}");
        assert_eq!(
            h.get("www-authenticate").map(|v| v.to_str().unwrap().to_string()),
            self.challenge,
            "{label}"
        );
        body
    }
}

/// API keys are read as the sidecar's checks read them ("Authorization:
/// ApiKey", else X-Api-Key when there is no Authorization header; a bearer
/// token decides), and a refused key is challenged in the ApiKey scheme.
#[test]
fn api_keys() {
    let keys = common::ApiKeys::create("tower-api-keys");
    let tok = common::idp().token("user-1", "acme", &["viewer"]);
    let viewer_scheme = format!("ApiKey {}", keys.viewer);
    let viewer_tab = format!("apikey\t{} ", keys.viewer);
    let viewer_spaced = format!(" {} ", keys.viewer);
    let revoked_scheme = format!("ApiKey {}", keys.revoked);
    let unknown_scheme = format!("ApiKey {}", keys.unknown);
    let bearer = format!("Bearer {tok}");
    let cases = [
        Case::allowed("X-Api-Key", vec![("x-api-key", &viewer_spaced)]),
        Case::allowed("ApiKey scheme", vec![("authorization", &viewer_scheme)]),
        Case::allowed(
            "ApiKey scheme, tab",
            vec![("authorization", &viewer_tab), ("x-api-key", &keys.revoked)],
        ),
        Case {
            path: "/delete",
            status: StatusCode::FORBIDDEN,
            reason: "policy-deny",
            ..Case::allowed("viewer key deletes", vec![("x-api-key", &keys.viewer)])
        },
        Case::bad_key("revoked", vec![("x-api-key", &keys.revoked)], "api-key-revoked"),
        Case::bad_key(
            "revoked, scheme",
            vec![("authorization", &revoked_scheme)],
            "api-key-revoked",
        ),
        Case::bad_key("unknown", vec![("authorization", &unknown_scheme)], "api-key-unknown"),
        Case::bad_key("expired", vec![("x-api-key", &keys.expired)], "api-key-expired"),
        Case::bad_key("malformed", vec![("x-api-key", "svck_short")], "api-key-malformed"),
        // A bearer scheme decides: X-Api-Key beside it is not read.
        Case::unauthorized(
            "bearer beside X-Api-Key",
            vec![("authorization", "Bearer junk"), ("x-api-key", &keys.viewer)],
            "token-malformed",
            "Bearer realm=\"orders\", error=\"invalid_token\", error_description=\"token-malformed\"",
        ),
        Case::unauthorized(
            "another scheme beside X-Api-Key",
            vec![("authorization", "Basic YTpi"), ("x-api-key", &keys.viewer)],
            "token-missing",
            "Bearer realm=\"orders\"",
        ),
        Case::allowed(
            "token beside a revoked X-Api-Key",
            vec![("authorization", &bearer), ("x-api-key", &keys.revoked)],
        ),
    ];
    let e = keys.engine("tower-api-keys");
    let mut with_action = AuthLayer::new(e.clone())
        .with_realm("orders")
        .with_action(read_or_delete)
        .layer(ECHO);
    let mut validate_only = AuthLayer::new(e).with_realm("orders").layer(ECHO);
    for c in &cases {
        let what = c.what;
        let body = c.send(&mut with_action, what);
        assert_eq!(body["reason"], c.reason, "{what}: {body}");
        if c.status == StatusCode::OK {
            let sub = if what.starts_with("token") {
                "user-1"
            } else {
                "reporting"
            };
            assert_eq!(body["sub"], sub, "{what}: {body}");
        }
        if c.path == "/delete" {
            continue;
        }
        // Without an action: the token check alone answers the same.
        let label = format!("{what}, validate only");
        let body = c.send(&mut validate_only, &label);
        let want = if c.reason == "policy-allow" { "ok" } else { c.reason };
        assert_eq!(body["reason"], want, "{label}: {body}");
    }
}

/// Serves the method an override header names, as Rails-, Express- or
/// Spring-style method override does, and answers with the method served.
const OVERRIDING: Handler<Answer> = Handler(|req| {
    let served = req
        .headers()
        .get("x-http-method-override")
        .map_or(req.method().to_string(), |v| v.to_str().unwrap().trim().to_uppercase());
    Response::new(json!({ "served": served }).to_string())
});

/// A method override header naming another method than the request's is
/// refused: the action was chosen by the request's method, and the
/// service behind would serve the other one.
#[test]
fn method_override_names_the_method() {
    let e = common::engine("tower-override");
    let by_method = |r: &Request<String>| {
        Some(
            if r.method() == http::Method::DELETE {
                "orders:delete"
            } else {
                "orders:read"
            }
            .to_string(),
        )
    };
    let mut svc = AuthLayer::new(e).with_action(by_method).layer(OVERRIDING);
    let tok = common::idp().token("user-1", "acme", &["viewer"]);
    let auth = format!("Bearer {tok}");
    let call = |svc: &mut _, method: &str, header: Option<(&str, &str)>| {
        let mut b = Request::builder()
            .method(method)
            .uri("/orders/1")
            .header("authorization", auth.as_str());
        if let Some((k, v)) = header {
            b = b.header(k, v);
        }
        let svc: &mut svc::tower::AuthService<Handler<Answer>, String> = svc;
        now(std::future::poll_fn(|cx| svc.poll_ready(cx))).unwrap();
        let resp = now(svc.call(b.body(String::new()).unwrap())).unwrap();
        let (parts, body) = resp.into_parts();
        (parts.status, serde_json::from_str::<Value>(&body).unwrap())
    };
    let (st, body) = call(&mut svc, "GET", None);
    assert_eq!((st, &body["served"]), (StatusCode::OK, &json!("GET")), "{body}");
    let (st, body) = call(&mut svc, "GET", Some(("x-http-method-override", " get ")));
    assert_eq!(st, StatusCode::OK, "{body}");
    for (k, v) in [
        ("x-http-method-override", "DELETE"),
        ("x-http-method", "DELETE"),
        ("x-method-override", "delete"),
    ] {
        let (st, body) = call(&mut svc, "GET", Some((k, v)));
        assert_eq!(st, StatusCode::BAD_REQUEST, "{k}: {v}: {body}");
        assert_eq!(
            body,
            json!({"allow": false, "deny_reasons": [], "reason": "input-invalid"})
        );
    }
    let (st, body) = call(&mut svc, "DELETE", Some(("x-http-method-override", "GET")));
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    let (st, body) = call(&mut svc, "DELETE", None);
    assert_eq!(
        (st, &body["reason"]),
        (StatusCode::FORBIDDEN, &json!("policy-deny")),
        "{body}"
    );
}
