//! A round-robin TCP balancer for tests: each accepted connection is forwarded, bytes as they
//! are, to the next backend in turn; a backend that refuses the connection (a killed replica)
//! is skipped for the next one, so clients see a failure only when every backend is down.
//!
//! It is a few threads on `std::net`, not haproxy or nginx: the replica tests must kill a
//! backend and see it skipped at once, with no health-check interval to wait for, and a
//! Rust type gives them the per-backend counts to check that both replicas took traffic.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the balancer waits for a backend to accept before trying the next one. A killed
/// local process refuses at once; this only bounds a backend that hangs.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The balancer, listening on `127.0.0.1:0` until dropped.
#[derive(Debug)]
pub struct Balancer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct Shared {
    backends: Mutex<Vec<SocketAddr>>,
    /// Connections forwarded to each backend, in the order of `backends`.
    forwarded: Mutex<Vec<usize>>,
    /// Connections no backend accepted (closed without a byte).
    unserved: AtomicUsize,
    next: AtomicUsize,
    stop: AtomicBool,
}

impl Balancer {
    /// Binds `127.0.0.1:0` and starts accepting. Until [`Balancer::set_backends`] names the
    /// backends, connections are closed at once: binding first lets the backends be told the
    /// balancer's address (their public URL) before they start.
    pub fn bind() -> Balancer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the balancer");
        let addr = listener.local_addr().expect("the balancer's address");
        let shared = Arc::new(Shared::default());
        let accept = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(String::from("balancer"))
                .spawn(move || accept_loop(&listener, &shared))
                .expect("start the balancer thread")
        };
        Balancer {
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// A balancer over `backends`.
    pub fn start(backends: &[SocketAddr]) -> Balancer {
        let balancer = Balancer::bind();
        balancer.set_backends(backends);
        balancer
    }

    /// Replaces the backends (and resets the counts).
    pub fn set_backends(&self, backends: &[SocketAddr]) {
        let mut list = lock(&self.shared.backends);
        let mut forwarded = lock(&self.shared.forwarded);
        *list = backends.to_vec();
        *forwarded = vec![0; backends.len()];
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many connections went to each backend so far, in the order given.
    pub fn forwarded(&self) -> Vec<usize> {
        lock(&self.shared.forwarded).clone()
    }

    /// How many connections found no backend that accepted.
    pub fn unserved(&self) -> usize {
        self.shared.unserved.load(Ordering::Relaxed)
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Wake the blocking accept so that the thread sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for client in listener.incoming() {
        if shared.stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(client) = client else {
            continue;
        };
        let shared = Arc::clone(shared);
        let _ = std::thread::Builder::new()
            .name(String::from("balancer connection"))
            .spawn(move || forward(client, &shared));
    }
}

/// Connects to the next backend that accepts, counting it, and copies both ways until each
/// side has closed its half.
fn forward(client: TcpStream, shared: &Shared) {
    let Some(backend) = connect_next(shared) else {
        shared.unserved.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = backend.set_nodelay(true);
    let (Ok(client_reader), Ok(backend_writer)) = (client.try_clone(), backend.try_clone()) else {
        return;
    };
    let upstream = std::thread::Builder::new()
        .name(String::from("balancer upstream"))
        .spawn(move || pipe(client_reader, backend_writer));
    pipe(backend, client);
    if let Ok(upstream) = upstream {
        let _ = upstream.join();
    }
}

fn connect_next(shared: &Shared) -> Option<TcpStream> {
    let backends = lock(&shared.backends).clone();
    if backends.is_empty() {
        return None;
    }
    let first = shared.next.fetch_add(1, Ordering::Relaxed);
    for attempt in 0..backends.len() {
        let index = (first + attempt) % backends.len();
        if let Ok(stream) = TcpStream::connect_timeout(&backends[index], CONNECT_TIMEOUT) {
            if let Some(count) = lock(&shared.forwarded).get_mut(index) {
                *count += 1;
            }
            return Some(stream);
        }
    }
    None
}

/// Copies `from` to `to` until `from` ends (or fails), then ends `to`'s writing half so the
/// other side sees the end too. A reset on either side ends the copy: a killed backend's
/// clients see their connection fail, as they would behind a real balancer.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let mut buffer = [0_u8; 16 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(read) => {
                if to.write_all(&buffer[..read]).is_err() {
                    let _ = from.shutdown(Shutdown::Both);
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend that answers every connection with its own name and closes.
    fn named_backend(name: &'static str) -> (SocketAddr, JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming().take(2) {
                let mut stream = stream.unwrap();
                let mut request = [0_u8; 5];
                stream.read_exact(&mut request).unwrap();
                stream.write_all(name.as_bytes()).unwrap();
                stream.write_all(&request).unwrap();
            }
        });
        (addr, thread)
    }

    fn ask(addr: SocketAddr) -> String {
        let mut stream = TcpStream::connect(addr).unwrap();
        stream.write_all(b"hello").unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    }

    /// A port nothing listens on (bound, then closed).
    fn closed_port() -> SocketAddr {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }

    #[test]
    fn connections_go_round_robin_and_a_refusing_backend_is_skipped() {
        let (a, a_thread) = named_backend("a:");
        let (b, b_thread) = named_backend("b:");
        let dead = closed_port();
        let balancer = Balancer::start(&[a, dead, b]);
        let answers: Vec<String> = (0..4).map(|_| ask(balancer.addr())).collect();
        assert_eq!(answers, ["a:hello", "b:hello", "b:hello", "a:hello"]);
        assert_eq!(balancer.forwarded(), [2, 0, 2]);
        assert_eq!(balancer.unserved(), 0);
        a_thread.join().unwrap();
        b_thread.join().unwrap();
    }

    #[test]
    fn with_every_backend_down_the_connection_is_closed_unanswered() {
        let balancer = Balancer::start(&[closed_port()]);
        let mut stream = TcpStream::connect(balancer.addr()).unwrap();
        let mut answer = Vec::new();
        // Closed or reset: either way nothing arrives.
        let _ = stream.read_to_end(&mut answer);
        assert!(answer.is_empty());
        assert_eq!(balancer.unserved(), 1);
    }
}
