//! The listener: accepts connections on hyper 1, speaking HTTP/1.1 and HTTP/2 without TLS
//! (h2c, prior knowledge: a client or proxy that starts with the HTTP/2 preface gets HTTP/2),
//! bounds how many are served at once, closes idle ones, reads bodies with a size limit and a
//! deadline, turns panics into 500s and shuts down gracefully.
//!
//! When every connection slot is taken, or the process runs out of file descriptors, the
//! connections that have not completed a request yet (idle, or trickling their first request)
//! are shed, so that clients whose requests complete keep being served; a connection that
//! cannot be accepted for want of descriptors is answered 503 with `Retry-After` (the error
//! body of every other refusal) through a descriptor kept in reserve, rather than reset.
//!
//! A connection the server closes lingers (as nginx's `lingering_close`): its writing half is
//! shut, and what the client still sends (the rest of a body refused before it was read) is
//! read and thrown away, for a bounded time and number of bytes, before the socket is closed,
//! so that closing over unread bytes does not reset the connection and lose the answer.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::app::App;
use crate::media_reply::{Body, full};
use crate::{Config, Error, PublicUrls, Route, Services};

/// Requests one HTTP/2 connection may have in progress at once. An HTTP/1.1 connection has
/// one, so the connection caps bound a client's concurrent requests; HTTP/2 multiplies that
/// bound by this number, which is kept small (a browser loading a map asks for a few dozen
/// tiles at once; HTTP/1.1 browsers use six connections).
const HTTP2_MAX_CONCURRENT_STREAMS: u32 = 32;

/// Connections being refused at once (each holds a descriptor for at most
/// [`REFUSAL_TIME`]); more are closed without an answer.
const MAX_REFUSALS: usize = 64;

/// How long a refused connection is given to take its 503.
const REFUSAL_TIME: Duration = Duration::from_secs(1);

/// How long a connection the server closed may linger, reading and throwing away what the
/// client still sends, at most (nginx's `lingering_time` is 30 s).
const LINGER_TIME: Duration = Duration::from_secs(10);

/// How long a lingering connection waits for the client's next bytes (nginx's
/// `lingering_timeout` is 5 s).
const LINGER_IDLE: Duration = Duration::from_secs(2);

/// The most bytes a lingering connection reads and throws away: more than a refused body of
/// the uploader's sends at once.
const LINGER_BYTES: u64 = 64 << 20;

/// `EMFILE` and `ENFILE` on Linux: the process's or the system's descriptors ran out.
const DESCRIPTORS_EXHAUSTED: [i32; 2] = [24, 23];

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
        Self::on_listener(listener, config, services)
    }

    /// Prepares the app on a listener bound by the caller (`config.bind` is not used), so
    /// that a port in use is found before anything slow, such as loading the store.
    pub fn on_listener(
        listener: TcpListener,
        config: Config,
        services: Services,
    ) -> Result<Server, Error> {
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
        let max_connections = app.config().max_connections.max(1);
        let connections = Arc::new(Semaphore::new(max_connections));
        let per_address = Arc::new(PerAddress::default());
        let max_per_address = app.config().max_connections_per_address.max(1);
        let (stop_connections, stopping) = watch::channel(false);
        let mut overload = Overload::new();
        tokio::pin!(shutdown);
        loop {
            overload.keep_a_reserve();
            let (stream, peer) = tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => {
                        overload.accept_errors.succeeded();
                        accepted
                    }
                    Err(error) => {
                        overload.accept_failed(&error, &listener, &app).await;
                        continue;
                    }
                },
            };
            let permit = if let Ok(permit) = Arc::clone(&connections).try_acquire_owned() {
                permit
            } else {
                // Every slot is taken: room is made by shedding the connections that have
                // completed no request, and this one waits for a slot (those behind it wait
                // in the listen queue), as it did before it was accepted.
                overload.slots_taken(max_connections);
                tokio::select! {
                    () = &mut shutdown => break,
                    permit = Arc::clone(&connections).acquire_owned() => match permit {
                        Ok(permit) => permit,
                        Err(_) => break,
                    },
                }
            };
            let Some(address_slot) = PerAddress::enter(&per_address, peer.ip(), max_per_address)
            else {
                // One client may not hold every slot: close at once, answer nothing.
                tracing::debug!(%peer, "too many connections from one address");
                continue;
            };
            let _ = stream.set_nodelay(true);
            let activity = Arc::new(Activity::default());
            let app_for_connection = Arc::clone(&app);
            let activity_for_service = Arc::clone(&activity);
            let service = service_fn(move |mut request: Request<Incoming>| {
                let client = crate::client_address::client_address(
                    peer,
                    request.headers(),
                    &app_for_connection.config().trusted_proxies,
                );
                request
                    .extensions_mut()
                    .insert(streetlevel_ratelimit::ClientAddr(client));
                let app = Arc::clone(&app_for_connection);
                let busy = Activity::start(&activity_for_service);
                async move {
                    let response = serve_one(app, request).await;
                    // In progress until the body is sent (hyper drops it then), so a slow
                    // reader's download is never taken for idleness.
                    Ok::<_, Infallible>(response.map(|body| Tracked { body, _busy: busy }))
                }
            });
            let limits = ConnectionLimits {
                header_read_timeout: app.config().header_read_timeout,
                send_timeout: app.config().send_timeout,
            };
            tokio::spawn(serve_connection(
                stream,
                peer,
                service,
                activity,
                limits,
                (stopping.clone(), overload.shed.subscribe()),
                (permit, address_slot),
            ));
        }
        drop(listener);
        let _ = stop_connections.send(true);
        // Every connection holds a permit until it ends: having them all means all ended.
        let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
        let _ = connections.acquire_many(all).await;
        Ok(())
    }
}

/// The timeouts of one connection.
#[derive(Clone, Copy)]
struct ConnectionLimits {
    header_read_timeout: Duration,
    send_timeout: Duration,
}

/// Serves one accepted connection until it ends, holding its slots (`held`) until then.
async fn serve_connection<S>(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    service: S,
    activity: Arc<Activity>,
    limits: ConnectionLimits,
    (mut stopping, mut shedding): (watch::Receiver<bool>, watch::Receiver<u64>),
    held: (tokio::sync::OwnedSemaphorePermit, AddressSlot),
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<Tracked>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let ConnectionLimits {
        header_read_timeout,
        send_timeout,
    } = limits;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(HTTP2_MAX_CONCURRENT_STREAMS);
    let (give_back, given_back) = tokio::sync::oneshot::channel();
    let stream = SendTimeout::new(Linger::new(stream, give_back), send_timeout);
    let mut connection = Box::pin(builder.serve_connection(TokioIo::new(stream), service));
    // HTTP/1.1's header read timeout is hyper's; it has none for HTTP/2, nor for
    // the first bytes it reads to tell the two apart, so a connection without a
    // request in progress for that long is closed here, whatever it speaks. Closing
    // is graceful first: responses under way are finished (HTTP/2: GOAWAY). A peer
    // can stall that too (HTTP/2 waits for its SETTINGS, or for the answer to the
    // PING of a graceful GOAWAY), so after a second idle period the connection is
    // dropped.
    let mut closing = false;
    let result = loop {
        tokio::select! {
            result = connection.as_mut() => break result,
            () = activity.idle_for(header_read_timeout) => {
                if closing {
                    tracing::debug!(%peer, "dropped a connection that did not close");
                    break Ok(());
                }
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            _ = stopping.wait_for(|stop| *stop), if !closing => {
                closing = true;
                connection.as_mut().graceful_shutdown();
            }
            Ok(()) = shedding.changed(), if !activity.completed.load(Ordering::SeqCst) => {
                // Out of slots or descriptors: a connection that has completed no request
                // (idle since it opened, or trickling its first request) goes first. The
                // condition above was read when this wait began: read it again.
                if activity.completed.load(Ordering::SeqCst) {
                    continue;
                }
                tracing::debug!(%peer, "shed a connection that completed no request");
                break Ok(());
            }
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "connection ended with an error");
    }
    // Dropping the connection drops its socket, which comes back here if the server shut its
    // writing half (an answer with `Connection: close`, an early refusal of a body): it then
    // lingers, still holding its slots, unless connections are being shed or the server stops.
    drop(connection);
    if let Ok(stream) = given_back.await {
        // Only a shed from now on ends the lingering.
        shedding.borrow_and_update();
        tokio::select! {
            () = linger(stream) => {}
            _ = shedding.changed() => {}
            _ = stopping.wait_for(|stop| *stop) => {}
        }
    }
    drop(held);
}

/// Reads and throws away what the client of a half-closed socket still sends, until it
/// closes its end or [`LINGER_TIME`], [`LINGER_IDLE`] or [`LINGER_BYTES`] runs out, so that the
/// socket is closed with nothing unread (closing over unread bytes sends a reset, which may
/// destroy the answer before the client has read it).
async fn linger(stream: tokio::net::TcpStream) {
    let mut rest = stream.take(LINGER_BYTES);
    let mut sink = vec![0_u8; 16 * 1024];
    let _ = tokio::time::timeout(LINGER_TIME, async {
        while let Ok(Ok(read)) = tokio::time::timeout(LINGER_IDLE, rest.read(&mut sink)).await {
            if read == 0 {
                break;
            }
        }
    })
    .await;
}

/// A connection's socket, handed back through `give_back` when it is dropped after the
/// server shut its writing half (see [`linger`]); otherwise closed at once.
struct Linger {
    stream: Option<tokio::net::TcpStream>,
    shut: bool,
    give_back: Option<tokio::sync::oneshot::Sender<tokio::net::TcpStream>>,
}

impl Linger {
    fn new(
        stream: tokio::net::TcpStream,
        give_back: tokio::sync::oneshot::Sender<tokio::net::TcpStream>,
    ) -> Self {
        Linger {
            stream: Some(stream),
            shut: false,
            give_back: Some(give_back),
        }
    }

    fn stream(&mut self) -> std::io::Result<Pin<&mut tokio::net::TcpStream>> {
        self.stream.as_mut().map(Pin::new).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the socket was handed back",
            )
        })
    }
}

impl Drop for Linger {
    fn drop(&mut self) {
        if self.shut
            && let (Some(stream), Some(give_back)) = (self.stream.take(), self.give_back.take())
        {
            let _ = give_back.send(stream);
        }
    }
}

impl AsyncRead for Linger {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.stream() {
            Ok(stream) => stream.poll_read(cx, buf),
            Err(error) => Poll::Ready(Err(error)),
        }
    }
}

impl AsyncWrite for Linger {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.stream() {
            Ok(stream) => stream.poll_write(cx, buf),
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.stream() {
            Ok(stream) => stream.poll_write_vectored(cx, bufs),
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream
            .as_ref()
            .is_some_and(tokio::net::TcpStream::is_write_vectored)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.stream() {
            Ok(stream) => stream.poll_flush(cx),
            Err(error) => Poll::Ready(Err(error)),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let result = match self.stream() {
            Ok(stream) => stream.poll_shutdown(cx),
            Err(error) => Poll::Ready(Err(error)),
        };
        if let Poll::Ready(Ok(())) = result {
            self.shut = true;
        }
        result
    }
}

/// A socket whose writes fail once the peer has taken none of our bytes for `timeout` (as
/// nginx's `send_timeout`): a client that asks and stops reading cannot hold a connection
/// slot and its response forever. The bound is between two writes, not on the whole response,
/// so a slow but reading client still gets a large download.
struct SendTimeout<T> {
    inner: T,
    timeout: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> SendTimeout<T> {
    fn new(inner: T, timeout: Duration) -> Self {
        SendTimeout {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// Called when a write would block: fails once it has blocked for the timeout.
    fn stall<R>(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<R>> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client took none of the response for the send timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<R>(
        &mut self,
        result: Poll<std::io::Result<R>>,
        cx: &mut Context<'_>,
    ) -> Poll<std::io::Result<R>> {
        match result {
            Poll::Ready(result) => {
                self.stalled = None;
                Poll::Ready(result)
            }
            Poll::Pending => self.stall(cx),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for SendTimeout<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for SendTimeout<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.progressed(result, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.progressed(result, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.progressed(result, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let result = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.progressed(result, cx)
    }
}

/// Requests in progress on one connection, to tell when it has been idle for how long.
///
/// Requests only count themselves in and out (two atomic operations and a clock reading
/// each): the watcher ([`Activity::idle_for`]) wakes once per timeout period to look, instead
/// of being woken, and re-arming a timer, at every request.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    /// Whether a response was sent on the connection: such a connection is not shed.
    completed: std::sync::atomic::AtomicBool,
    /// When the last request ended, in nanoseconds after `epoch`.
    last_end: AtomicU64,
    epoch: Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Activity {
            in_flight: AtomicUsize::new(0),
            completed: std::sync::atomic::AtomicBool::new(false),
            last_end: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

/// One request in progress on a connection; it ends when dropped.
#[derive(Debug)]
struct Busy(Arc<Activity>);

impl Activity {
    fn start(activity: &Arc<Self>) -> Busy {
        activity.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(activity))
    }

    /// When the last request ended (the epoch if none has).
    fn last_end(&self) -> Instant {
        self.epoch + Duration::from_nanos(self.last_end.load(Ordering::SeqCst))
    }

    /// Resolves once no request has been in progress for `timeout`, counted from the call at
    /// the earliest.
    async fn idle_for(&self, timeout: Duration) {
        let called = Instant::now();
        let mut deadline = called + timeout;
        loop {
            tokio::time::sleep_until(deadline.into()).await;
            let idle_since = self.last_end().max(called);
            let now = Instant::now();
            if self.in_flight.load(Ordering::SeqCst) > 0 {
                // Look again a timeout after now: the request cannot end idle before that.
                deadline = now + timeout;
            } else if idle_since + timeout <= now {
                return;
            } else {
                deadline = idle_since + timeout;
            }
        }
    }
}

/// How the accept loop makes room when connection slots or descriptors run out.
struct Overload {
    /// Bumped to shed the connections that have completed no request; each connection
    /// subscribes when it starts, so only sheds after that reach it.
    shed: watch::Sender<u64>,
    /// Given up when descriptors run out, so that one connection can still be accepted and
    /// told to come back.
    reserve: Option<std::fs::File>,
    /// The connections being answered 503.
    refusals: Arc<Semaphore>,
    accept_errors: AcceptErrors,
    /// When the last "every slot is taken" line was logged, and how many since.
    slot_reports: AcceptErrors,
}

impl Overload {
    fn new() -> Self {
        Overload {
            shed: watch::channel(0_u64).0,
            reserve: None,
            refusals: Arc::new(Semaphore::new(MAX_REFUSALS)),
            accept_errors: AcceptErrors::default(),
            slot_reports: AcceptErrors::default(),
        }
    }

    /// Opens the reserve descriptor again if it was given up (and descriptors are free).
    fn keep_a_reserve(&mut self) {
        if self.reserve.is_none() {
            self.reserve = std::fs::File::open("/dev/null").ok();
        }
    }

    fn shed(&self) {
        self.shed.send_modify(|generation| *generation += 1);
    }

    /// After a failed accept: running out of file descriptors must not end the server, nor
    /// make it spin. The connections that completed no request are shed, and the reserve
    /// descriptor is given up to take one connection and answer it 503; then the loop backs
    /// off, and logs once per interval with a count.
    async fn accept_failed(
        &mut self,
        error: &std::io::Error,
        listener: &TcpListener,
        app: &Arc<App>,
    ) {
        let exhausted = error
            .raw_os_error()
            .is_some_and(|code| DESCRIPTORS_EXHAUSTED.contains(&code));
        if exhausted {
            self.shed();
            if self.reserve.take().is_some()
                && let Ok(Ok((stream, _))) =
                    tokio::time::timeout(Duration::from_millis(10), listener.accept()).await
            {
                refuse(app, stream, &self.refusals);
            }
        }
        let (pause, report) = self.accept_errors.failed(std::time::Instant::now());
        if let Some(count) = report {
            tracing::warn!(%error, failures = count, "accept failed");
        }
        tokio::time::sleep(pause).await;
    }

    /// A connection was accepted with every slot taken: shed, and log once per interval.
    fn slots_taken(&mut self, max_connections: usize) {
        self.shed();
        if let (_, Some(count)) = self.slot_reports.failed(std::time::Instant::now()) {
            tracing::warn!(
                waited = count,
                max_connections,
                "every connection slot is taken: connections without a completed request \
                 are shed"
            );
        }
    }
}

/// Answers `stream` 503 with `Retry-After` and closes it, taking no more than
/// [`REFUSAL_TIME`]; when [`MAX_REFUSALS`] are under way already, closes it at once.
fn refuse(app: &Arc<App>, stream: tokio::net::TcpStream, refusals: &Arc<Semaphore>) {
    let Ok(permit) = Arc::clone(refusals).try_acquire_owned() else {
        return;
    };
    let response = app.overloaded_response();
    tokio::spawn(async move {
        let mut stream = stream;
        let _ = tokio::time::timeout(REFUSAL_TIME, async {
            stream.write_all(&response).await?;
            stream.shutdown().await?;
            // Read what the client sent until it closes, so that closing does not reset the
            // connection before the client has read the answer.
            linger(stream).await;
            Ok::<_, std::io::Error>(())
        })
        .await;
        drop(permit);
    });
}

/// A response body that keeps its request counted as in progress until it is dropped.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, std::io::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let activity = &self.0;
        // Saturates after 584 years of one connection.
        let since_epoch = u64::try_from(activity.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // Before the count goes down, so a watcher that sees no request in flight sees
        // this end.
        activity.last_end.fetch_max(since_epoch, Ordering::SeqCst);
        activity.completed.store(true, Ordering::SeqCst);
        activity.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve_one(app: Arc<App>, request: Request<Incoming>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    if (parts.method == http::Method::GET || parts.method == http::Method::HEAD)
        && Route::of(parts.uri.path()) == Route::Media
    {
        // Media are streamed from where they are stored, never read whole.
        return app.respond_media(parts).await;
    }
    if parts.method == http::Method::POST
        && let Route::Upload(key) = Route::of(parts.uri.path())
    {
        // Upload bodies go to disk as they arrive, not through the in-memory body limit.
        return app.respond_upload(parts, key, body).await.map(full);
    }
    if body.is_end_stream() {
        // No body (a GET, or a length of 0): nothing to read, limit or time.
        return app.respond_async(parts, Ok(Bytes::new())).await.map(full);
    }
    let limit = if Route::of(parts.uri.path()) == Route::Blur {
        crate::blur::MAX_BODY_BYTES
    } else {
        app.config().max_body_bytes
    };
    let timeout = app.config().body_read_timeout;
    let collected = tokio::time::timeout(timeout, Limited::new(body, limit).collect()).await;
    let body = match collected {
        Err(_) => {
            // A slow body gets an answer, and the connection is not kept: the rest of the
            // body would be read as the next request.
            let http1 = parts.version < http::Version::HTTP_2;
            let mut response = app
                .respond_async(parts, Err(Error::BodyTimeout(timeout.as_secs())))
                .await;
            // HTTP/2 has no such header: the stream ends, and the connection serves others.
            if http1 {
                response.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
            }
            return response.map(full);
        }
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) => {
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
    response.map(full)
}

/// Connections being served, per client address.
#[derive(Debug, Default)]
struct PerAddress {
    counts: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
}

/// One connection's place in [`PerAddress`], given back when dropped.
#[derive(Debug)]
struct AddressSlot {
    table: Arc<PerAddress>,
    address: std::net::IpAddr,
}

impl PerAddress {
    /// A slot for one more connection from `address`, unless it has `max` already.
    fn enter(table: &Arc<Self>, address: std::net::IpAddr, max: usize) -> Option<AddressSlot> {
        let mut counts = table
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = counts.entry(address).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(AddressSlot {
            table: Arc::clone(table),
            address,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut counts = self
            .table
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.address);
            }
        }
    }
}

/// What to do after failed accepts: a pause that doubles from 10 ms to 1 s while they keep
/// failing, and a log line at most every 5 s with how many failed since the last one.
#[derive(Debug, Default)]
struct AcceptErrors {
    pause: std::time::Duration,
    unreported: usize,
    last_report: Option<std::time::Instant>,
}

impl AcceptErrors {
    const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);
    const LONGEST_PAUSE: std::time::Duration = std::time::Duration::from_secs(1);
    const REPORT_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

    /// The pause before accepting again, and the count to log now, if it is time to.
    fn failed(&mut self, now: std::time::Instant) -> (std::time::Duration, Option<usize>) {
        self.pause = (self.pause * 2).clamp(Self::FIRST_PAUSE, Self::LONGEST_PAUSE);
        self.unreported += 1;
        let due = self
            .last_report
            .is_none_or(|last| now.duration_since(last) >= Self::REPORT_EVERY);
        let report = due.then(|| {
            self.last_report = Some(now);
            std::mem::take(&mut self.unreported)
        });
        (self.pause, report)
    }

    fn succeeded(&mut self) {
        self.pause = std::time::Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::time::{Duration, Instant};

    use super::*;

    #[test]
    fn one_address_gets_at_most_its_share_of_connections() {
        let table = Arc::new(PerAddress::default());
        let laptop = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let other = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        let first = PerAddress::enter(&table, laptop, 2).unwrap();
        let second = PerAddress::enter(&table, laptop, 2).unwrap();
        assert!(PerAddress::enter(&table, laptop, 2).is_none());
        assert!(PerAddress::enter(&table, other, 2).is_some());
        drop(first);
        let third = PerAddress::enter(&table, laptop, 2);
        assert!(third.is_some());
        drop((second, third));
        assert!(table.counts.lock().unwrap().is_empty());
    }

    #[test]
    fn failed_accepts_back_off_and_log_once_per_interval() {
        let mut errors = AcceptErrors::default();
        let start = Instant::now();
        let mut pauses = Vec::new();
        let mut logged = Vec::new();
        // A thousand failures in 3 s: one log line, pauses doubling up to a second.
        for step in 0..1000_u64 {
            let (pause, report) = errors.failed(start + Duration::from_millis(step * 3));
            pauses.push(pause);
            logged.extend(report);
        }
        assert_eq!(logged, [1]);
        assert_eq!(pauses[0], Duration::from_millis(10));
        assert_eq!(pauses[1], Duration::from_millis(20));
        assert_eq!(*pauses.last().unwrap(), Duration::from_secs(1));
        // After the interval, one line counts every failure since the last.
        let (_, report) = errors.failed(start + Duration::from_secs(6));
        assert_eq!(report, Some(1000));
        errors.succeeded();
        assert_eq!(
            errors.failed(start + Duration::from_secs(7)).0,
            Duration::from_millis(10)
        );
    }
}
