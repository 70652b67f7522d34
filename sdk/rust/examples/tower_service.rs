//! A tower service protected by svc's engine, in-process.
//!
//!   cargo run --example tower_service -- 'Bearer <token>' [path]
//!
//! The engine is configured as svc-sidecar is: ./svc.toml when present,
//! then SVC_* variables (with neither: development mode). GET /orders
//! needs orders:read, DELETE needs orders:delete; the answer is printed.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::{Method, Request, Response};
use svc::tower::{AuthLayer, User};
use tower::{Layer, Service};

/// The protected service: answers with the caller it was given.
#[derive(Clone)]
struct Orders;

impl Service<Request<String>> for Orders {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<String>) -> Self::Future {
        let user = req.extensions().get::<User>().expect("set by AuthLayer");
        let body = serde_json::json!({"hello": user.subject, "tenant": user.tenant_id, "claims": user.claims});
        ready(Ok(Response::new(body.to_string())))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let auth = args.next().unwrap_or_default();
    let method = if args.next().as_deref() == Some("delete") {
        Method::DELETE
    } else {
        Method::GET
    };

    let engine = svc::Engine::from_env()?;
    let layer = AuthLayer::new(engine)
        .with_realm("orders")
        .with_action(|r: &Request<String>| {
            Some(
                if r.method() == Method::DELETE {
                    "orders:delete"
                } else {
                    "orders:read"
                }
                .to_string(),
            )
        });
    let mut svc = layer.layer(Orders);

    let mut req = Request::builder().method(method).uri("/orders");
    if !auth.is_empty() {
        req = req.header("authorization", auth);
    }
    // Orders and the layer answer at once; a server (hyper, axum) would
    // drive this future on its runtime.
    let fut = svc.call(req.body(String::new())?);
    let resp = match pin!(fut).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(r) => r?,
        Poll::Pending => unreachable!("Orders never waits"),
    };
    println!("{} {}", resp.status(), resp.body());
    Ok(())
}
