//! Where log lines go: a buffer that one thread writes to standard error in batches, so that
//! logging a request costs the request the copy of its line and nothing else.
//!
//! `tracing-appender`'s non-blocking writer, used before, sent each line through a channel
//! as a new allocation and woke its thread for almost every line: on entity requests at
//! INFO that thread spun, yielded and was woken (futex) for 8 % of the server's CPU time,
//! and one `write` went out per line or few. Here lines are appended to one growing buffer;
//! the thread is woken only when it waits for lines, and after writing a batch it lets the
//! next one gather for [`GATHER`] before it looks again. A lone line is written at once.
//! The buffer is bounded: a logger that finds it full waits until the thread has taken it,
//! so a stalled standard error slows requests down but no line is lost.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// Bytes of lines waiting to be written at most, about 20,000 request lines.
const MAX_PENDING_BYTES: usize = 4 * 1024 * 1024;

/// How long the thread lets lines gather after writing a batch: under load it writes at
/// most this often, one `write` for every line logged meanwhile.
const GATHER: Duration = Duration::from_millis(2);

/// The lines waiting to be written, shared by the loggers and the thread.
#[derive(Debug, Default)]
struct Shared {
    pending: Mutex<Pending>,
    /// Signalled when lines arrive while the thread waits, and when closing.
    ready: Condvar,
    /// Signalled when the thread has taken the pending lines.
    room: Condvar,
}

#[derive(Debug, Default)]
struct Pending {
    lines: Vec<u8>,
    /// Whether the thread waits for `ready`.
    waiting: bool,
    /// Whether the thread is to write what is left and end.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn push(&self, line: &[u8]) {
        let mut pending = self.lock();
        while pending.lines.len() >= MAX_PENDING_BYTES && !pending.closed {
            pending = self
                .room
                .wait(pending)
                .unwrap_or_else(PoisonError::into_inner);
        }
        pending.lines.extend_from_slice(line);
        if pending.waiting {
            pending.waiting = false;
            self.ready.notify_one();
        }
    }

    /// Writes batches to `output` until closed and empty.
    fn run(&self, output: &mut dyn Write) {
        let mut batch = Vec::new();
        loop {
            {
                let mut pending = self.lock();
                while pending.lines.is_empty() && !pending.closed {
                    pending.waiting = true;
                    pending = self
                        .ready
                        .wait(pending)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                pending.waiting = false;
                if pending.lines.is_empty() {
                    // Closed, and everything written.
                    return;
                }
                std::mem::swap(&mut pending.lines, &mut batch);
            }
            self.room.notify_all();
            // Standard error gone: nothing better to do with the lines than to drop them.
            let _ = output.write_all(&batch).and_then(|()| output.flush());
            batch.clear();
            if batch.capacity() > MAX_PENDING_BYTES {
                batch.shrink_to(MAX_PENDING_BYTES);
            }
            std::thread::sleep(GATHER);
        }
    }
}

/// What the `tracing` subscriber writes lines to: clones share one buffer and thread.
#[derive(Debug, Clone)]
pub struct LogWriter {
    shared: Arc<Shared>,
}

/// Ends the writing thread when dropped, after it has written every line logged before.
#[derive(Debug)]
pub struct LogWriterGuard {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// A writer whose lines a new thread writes to `output` (standard error), and the guard that
/// ends that thread.
pub fn spawn(mut output: impl Write + Send + 'static) -> (LogWriter, LogWriterGuard) {
    let shared = Arc::new(Shared::default());
    let for_thread = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name(String::from("log-writer"))
        .spawn(move || for_thread.run(&mut output))
        .ok();
    if thread.is_none() {
        // No thread, no one to take lines: let loggers find the writer closed rather than
        // wait for room forever.
        shared.lock().closed = true;
    }
    (
        LogWriter {
            shared: Arc::clone(&shared),
        },
        LogWriterGuard { shared, thread },
    )
}

impl Drop for LogWriterGuard {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.ready.notify_one();
        self.shared.room.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One line (or part of one) on its way into the buffer.
#[derive(Debug)]
pub struct LineWriter<'a> {
    shared: &'a Shared,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.shared.push(bytes);
        Ok(bytes.len())
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.shared.push(bytes);
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            shared: &self.shared,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use super::*;

    /// An output the test can read while the thread writes to it.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn every_line_of_every_thread_is_written_whole_once_the_guard_is_dropped() {
        let output = Captured::default();
        let (writer, guard) = spawn(output.clone());
        let threads = 4;
        let lines_each = 20_000;
        let start = Arc::new(Barrier::new(threads));
        let loggers: Vec<_> = (0..threads)
            .map(|thread| {
                let writer = writer.clone();
                let start = Arc::clone(&start);
                std::thread::spawn(move || {
                    start.wait();
                    for line in 0..lines_each {
                        let text = format!("thread {thread} line {line} {}\n", "x".repeat(150));
                        writer.make_writer().write_all(text.as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for logger in loggers {
            logger.join().unwrap();
        }
        drop(guard);
        let written = String::from_utf8(output.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = written.lines().collect();
        assert_eq!(lines.len(), threads * lines_each);
        // Each thread's lines whole and in its order.
        for thread in 0..threads {
            let prefix = format!("thread {thread} line ");
            let numbers: Vec<usize> = lines
                .iter()
                .filter_map(|line| line.strip_prefix(&prefix))
                .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
                .collect();
            assert_eq!(numbers, (0..lines_each).collect::<Vec<_>>());
        }
    }

    /// An output that takes nothing until told to.
    struct Stalled {
        open: Arc<(Mutex<bool>, Condvar)>,
        written: Arc<Mutex<usize>>,
    }

    impl Write for Stalled {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let (open, opened) = &*self.open;
            let mut is_open = open.lock().unwrap();
            while !*is_open {
                is_open = opened.wait(is_open).unwrap();
            }
            *self.written.lock().unwrap() += bytes.len();
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stalled_output_holds_loggers_at_the_bound_and_loses_nothing() {
        let open = Arc::new((Mutex::new(false), Condvar::new()));
        let written = Arc::new(Mutex::new(0));
        let (writer, guard) = spawn(Stalled {
            open: Arc::clone(&open),
            written: Arc::clone(&written),
        });
        let line = vec![b'x'; 1000];
        let lines = 3 * MAX_PENDING_BYTES / line.len();
        let logger = std::thread::spawn(move || {
            for _ in 0..lines {
                writer.make_writer().write_all(&line).unwrap();
            }
        });
        // The logger waits at the bound: the buffer holds at most the bound and one line.
        let mut most_pending = 0;
        while most_pending < MAX_PENDING_BYTES && !logger.is_finished() {
            most_pending = most_pending.max(guard.shared.lock().lines.len());
            std::thread::yield_now();
        }
        let finished_while_stalled = logger.is_finished();
        // Opened before asserting, so that a failure ends the test instead of stalling it.
        *open.0.lock().unwrap() = true;
        open.1.notify_all();
        logger.join().unwrap();
        drop(guard);
        assert!(!finished_while_stalled, "the logger was not held");
        assert!(
            most_pending <= MAX_PENDING_BYTES + 1000,
            "{most_pending} bytes pending"
        );
        assert_eq!(*written.lock().unwrap(), lines * 1000);
    }
}
