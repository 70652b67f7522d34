//! An HTTP server whose every request passes svc's tower layer, in-process.
//!
//!   cargo run --example tower_server -- 127.0.0.1:8080
//!   curl -i localhost:8080/orders -H 'Authorization: Bearer anything'
//!
//! It listens with the standard library's TcpListener and needs no crate
//! beyond `svc`, `http` and `tower`, so it builds offline from Debian's
//! Rust packages. It reads one request per connection and answers them in
//! turn: enough to put the layer on a real socket; a production server
//! drives the same layered service with hyper or axum.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

use http::{Method, Request, Response};
use svc::tower::{AuthLayer, AuthService, User};
use tower::{Layer, Service};

/// The protected service: answers with the caller the layer admitted.
#[derive(Clone)]
pub struct Orders;

impl Service<Request<String>> for Orders {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<String>) -> Self::Future {
        let user = req.extensions().get::<User>().expect("set by AuthLayer");
        let body = serde_json::json!({"hello": user.subject, "tenant": user.tenant_id, "reason": user.reason});
        ready(Ok(Response::new(body.to_string())))
    }
}

/// Orders behind the layer: GET needs orders:read, DELETE orders:delete.
pub fn protected(engine: svc::Engine) -> AuthService<Orders, String> {
    AuthLayer::new(engine)
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
        })
        .layer(Orders)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".to_string());
    // ./svc.toml when present, then SVC_* variables: as svc-sidecar.
    let mut service = protected(svc::Engine::from_env()?);

    let listener = TcpListener::bind(&addr)?;
    println!("listening on {}", listener.local_addr()?);
    for stream in listener.incoming() {
        let mut stream = stream?;
        let resp = match read_request(&mut stream) {
            Ok(req) => {
                let answer = block_on(async {
                    std::future::poll_fn(|cx| service.poll_ready(cx)).await?;
                    service.call(req).await
                });
                match answer {
                    Ok(resp) => resp,
                    Err(never) => match never {},
                }
            }
            Err(e) => Response::builder().status(400).body(format!("{e}\n"))?,
        };
        // A client that went away is its own problem, not the server's.
        let _ = write_response(&mut stream, &resp);
    }
    Ok(())
}

/// Reads an HTTP/1.1 request head and its Content-Length body.
fn read_request(stream: &mut TcpStream) -> Result<Request<String>, Box<dyn std::error::Error>> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, target) = match (parts.next(), parts.next()) {
        (Some(m), Some(t)) => (m.to_string(), t.to_string()),
        _ => return Err("malformed request line".into()),
    };
    let mut req = Request::builder().method(method.as_str()).uri(target.as_str());
    let mut length = 0usize;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Err("connection closed in the request head".into());
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').ok_or("malformed header line")?;
        if name.eq_ignore_ascii_case("content-length") {
            length = value.trim().parse()?;
        }
        req = req.header(name.trim(), value.trim());
    }
    let mut body = vec![0; length.min(1 << 20)];
    reader.read_exact(&mut body)?;
    Ok(req.body(String::from_utf8(body)?)?)
}

fn write_response(stream: &mut TcpStream, resp: &Response<String>) -> std::io::Result<()> {
    let status = resp.status();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    for (name, value) in resp.headers() {
        head.push_str(&format!("{}: {}\r\n", name, value.to_str().unwrap_or("")));
    }
    head.push_str(&format!(
        "content-length: {}\r\nconnection: close\r\n\r\n",
        resp.body().len()
    ));
    stream.write_all(head.as_bytes())?;
    stream.write_all(resp.body().as_bytes())
}

/// Runs a future on this thread, parking it while the future waits.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => thread::park(),
        }
    }
}
