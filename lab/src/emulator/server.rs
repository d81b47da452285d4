//! The transport: TLS (tokio-rustls) and HTTP/1.1 (hyper) around an axum router whose
//! only handler turns the request into a [`Request`] value (with the verified client
//! certificate's common name, when the emulator asks for certificates), asks the
//! emulator's [`Service`], and turns the [`Outcome`] back into HTTP.
//!
//! The `down` fault is carried out here: the handler marks its answer, and the
//! connection's service turns a marked answer into an error, on which hyper closes the
//! connection without writing anything. The client sees a transport error, as with a
//! server that has gone away. A latency fault is a sleep before answering.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::{Extension, Router};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::{Outcome, Request, Response};

/// How long a client gets to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// An emulator as the transport sees it.
pub(crate) trait Service: Clone + Send + Sync + 'static {
    /// Request bodies larger than this are refused.
    const BODY_LIMIT: usize;

    /// Answers one request. Synchronous, since it may write the state file; the server
    /// runs it off the async workers.
    fn answer(&self, request: Request) -> Outcome;

    /// What a request gets when [`Service::answer`] panicked, in the emulator's error
    /// shape.
    fn internal_error() -> Response;
}

/// The common name of the connection's verified client certificate.
#[derive(Debug, Clone)]
struct ClientCn(Option<String>);

/// Marks an answer whose connection is to be dropped instead.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("connection dropped: the emulator is down (fault)")]
struct DropConnection;

/// The router: everything goes to one handler, which asks `service`.
pub(crate) fn router<S: Service>(service: S) -> Router {
    Router::new()
        .fallback(handler::<S>)
        .layer(DefaultBodyLimit::max(S::BODY_LIMIT))
        .with_state(service)
}

async fn handler<S: Service>(
    State(service): State<S>,
    cn: Option<Extension<ClientCn>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let cookies: Vec<&str> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let req = Request {
        method: method.as_str().to_owned(),
        path: uri.path().to_owned(),
        query: uri.query().unwrap_or_default().to_owned(),
        cookie: (!cookies.is_empty()).then(|| cookies.join("; ")),
        client_cn: cn.and_then(|Extension(ClientCn(cn))| cn),
        body: body.to_vec(),
    };
    let line = format!("{} {}", req.method, req.path);
    // The handler is synchronous and writes the state file: keep it off the async
    // workers.
    let outcome = tokio::task::spawn_blocking(move || service.answer(req)).await;
    let response = match outcome {
        Ok(Outcome::Reply(r)) => r,
        Ok(Outcome::Drop) => {
            tracing::debug!("{line} -> dropped (down)");
            let mut r = axum::response::Response::new(Body::empty());
            r.extensions_mut().insert(DropConnection);
            return r;
        }
        Err(e) => {
            tracing::error!("{line}: the handler failed: {e}");
            S::internal_error()
        }
    };
    if !response.delay.is_zero() {
        tokio::time::sleep(response.delay).await;
    }
    tracing::debug!("{line} -> {}", response.status);
    let mut out = axum::response::Response::new(Body::from(response.body.to_string()));
    *out.status_mut() =
        StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json; charset=utf-8"),
    );
    if let Some(c) = response.set_cookie
        && let Ok(v) = HeaderValue::from_str(&c)
    {
        out.headers_mut().insert(header::SET_COOKIE, v);
    }
    out
}

/// Accepts connections until `stop` changes (or its sender goes away), then aborts the
/// open ones.
pub(crate) async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    router: Router,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _peer)) => {
                    conns.spawn(connection(tcp, acceptor.clone(), router.clone()));
                }
                Err(e) => {
                    // Typically out of file descriptors: back off instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.shutdown().await;
}

async fn connection(tcp: TcpStream, acceptor: TlsAcceptor, router: Router) {
    let _ = tcp.set_nodelay(true);
    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!("TLS handshake failed: {e}");
            return;
        }
        Err(_) => return,
    };
    // No certificate when the emulator does not ask for one (or the client sent none).
    let cn = ClientCn(
        tls.get_ref()
            .1
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|der| super::tls::common_name(der)),
    );
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        let router = router.clone();
        req.extensions_mut().insert(cn.clone());
        async move {
            let response = router
                .oneshot(req.map(Body::new))
                .await
                .unwrap_or_else(|e: Infallible| match e {});
            if response.extensions().get::<DropConnection>().is_some() {
                Err(DropConnection)
            } else {
                Ok(response)
            }
        }
    });
    if let Err(e) = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .await
    {
        tracing::debug!("connection ended: {e}");
    }
}
