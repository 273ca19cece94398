//! The listener: accepts connections on hyper 1, bounds how many are served at once, reads
//! bodies with a size limit, turns panics into 500s and shuts down gracefully.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::app::App;
use crate::{Config, Error, PublicUrls, Route, Services};

/// A bound, not yet running server.
pub struct Server {
    listener: TcpListener,
    app: Arc<App>,
    local_addr: SocketAddr,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Binds `config.bind` (port 0 picks a free port) and prepares the app.
    pub async fn bind(config: Config, services: Services) -> Result<Server, Error> {
        let listener = TcpListener::bind(config.bind).await?;
        let local_addr = listener.local_addr()?;
        let app = Arc::new(App::new(config, services, local_addr)?);
        Ok(Server {
            listener,
            app,
            local_addr,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The public URLs of the surfaces.
    pub fn urls(&self) -> &PublicUrls {
        self.app.urls()
    }

    /// The app, for answering requests in process (benchmarks, tests).
    pub fn app(&self) -> Arc<App> {
        Arc::clone(&self.app)
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets requests in flight finish
    /// and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        let Server { listener, app, .. } = self;
        let connections = Arc::new(Semaphore::new(app.config().max_connections.max(1)));
        let graceful = GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                () = &mut shutdown => break,
                permit = Arc::clone(&connections).acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
            };
            let (stream, _) = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Running out of file descriptors must not end the server.
                        tracing::warn!(%error, "accept failed");
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            let app_for_connection = Arc::clone(&app);
            let service = service_fn(move |request: Request<Incoming>| {
                let app = Arc::clone(&app_for_connection);
                async move { Ok::<_, Infallible>(serve_one(app, request).await) }
            });
            let mut builder = http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(app.config().header_read_timeout)
                .keep_alive(true);
            let connection = builder.serve_connection(TokioIo::new(stream), service);
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::debug!(%error, "connection ended with an error");
                }
                drop(permit);
            });
        }
        drop(listener);
        graceful.shutdown().await;
        Ok(())
    }
}

async fn serve_one(app: Arc<App>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    if parts.method == http::Method::POST
        && let Route::Upload(key) = Route::of(parts.uri.path())
    {
        // Upload bodies go to disk as they arrive, not through the in-memory body limit.
        return app.respond_upload(parts, key, body).await.map(Full::new);
    }
    let limit = app.config().max_body_bytes;
    let body = match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) => {
            if error
                .downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(Error::PayloadTooLarge(limit))
            } else {
                Err(Error::BadBody(error.to_string()))
            }
        }
    };
    let response = app.respond_async(parts, body).await;
    response.map(Full::new)
}
