//! A tower service protected by svc's engine, in-process.
//!
//!   cargo run --example tower_service -- 'Bearer <token>' [delete]
//!
//! The engine is configured as svc-sidecar is: ./svc.toml when present,
//! then SVC_* variables (with neither: development mode). The service and
//! its layer are tower_server's (GET /orders needs orders:read, DELETE
//! needs orders:delete); one request is sent, without a server, and the
//! answer printed.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use http::{Method, Request};
use tower::Service;

// tower_server.rs stays a whole program that can be copied as a project's
// main.rs; only its service and layer are used here.
#[path = "tower_server.rs"]
#[allow(dead_code)]
mod tower_server;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let auth = args.next().unwrap_or_default();
    let method = if args.next().as_deref() == Some("delete") {
        Method::DELETE
    } else {
        Method::GET
    };

    let mut svc = tower_server::protected(svc::Engine::from_env()?);
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
