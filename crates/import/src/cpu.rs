//! The process's one pool for CPU work: decoding and encoding pictures, blurring, and waiting
//! on `ffmpeg` while it decodes a video. The import pipeline (`streetlevel import`, the
//! server's upload workers, however many), `reblur` and reconstruction run it here, so that
//! they compete in one place and never run more of it at once than the pool has threads
//! (`cpu_threads`, by default the number of cores).
//!
//! Work a person waits for (`POST /blur/`, a blur edit applied) has a lane of its own
//! ([`run_interactive`]): a few threads of their own (a quarter of the pool's, at least one),
//! so it is never queued behind the batch pool's pictures, however many an upload queued, and
//! the operating system shares the cores between the two. Its pictures also go first when the
//! process's picture memory is short (`budgets.rs`).
//!
//! The pool's threads run at a lower priority (nice [`NICE`]) than the rest of the process,
//! and so do the `ffmpeg` children they start (a child inherits its thread's nice value): when
//! the cores are busy, the async workers answering requests get them first, so the API keeps
//! answering while the queue works.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::iter::{IndexedParallelIterator, IntoParallelIterator, ParallelIterator};

/// The nice value of the pool's threads: below the request path's 0, so a core the queue
/// and a request both want goes to the request most of the time.
pub const NICE: i32 = 10;

/// The pool's size once made; 0 until then: the number of cores.
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// The pool, made at its first use; `None` when no thread could be started (then work runs
/// on the caller's thread).
static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();

/// The interactive lane, made at its first use; `None` when no thread could be started (then
/// its work runs on the caller's thread).
static INTERACTIVE: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();

std::thread_local! {
    /// Whether this thread is one of the interactive lane's.
    static ON_INTERACTIVE_LANE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sets how many threads the CPU pool has (the server's `cpu_threads`; at least 1). The pool
/// is made at its first use: a call after that changes nothing and returns `false`.
pub fn set_cpu_threads(threads: usize) -> bool {
    if POOL.get().is_some() {
        return false;
    }
    THREADS.store(threads.max(1), Ordering::Relaxed);
    true
}

/// How many threads the pool has (or will have).
pub fn cpu_threads() -> usize {
    match POOL.get() {
        Some(Some(pool)) => pool.current_num_threads(),
        Some(None) => 1,
        None => match THREADS.load(Ordering::Relaxed) {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            threads => threads,
        },
    }
}

/// How many threads the interactive lane has: a quarter of the pool's, at least one.
pub fn interactive_threads() -> usize {
    cpu_threads().div_ceil(4)
}

fn pool() -> Option<&'static rayon::ThreadPool> {
    POOL.get_or_init(|| {
        let built = rayon::ThreadPoolBuilder::new()
            .num_threads(cpu_threads())
            .thread_name(|index| format!("cpu {index}"))
            .start_handler(|_| lower_priority())
            .build();
        match built {
            Ok(pool) => Some(pool),
            Err(error) => {
                tracing::error!(%error, "cannot start the CPU pool: its work runs on the callers");
                None
            }
        }
    })
    .as_ref()
}

fn interactive_pool() -> Option<&'static rayon::ThreadPool> {
    INTERACTIVE
        .get_or_init(|| {
            let built = rayon::ThreadPoolBuilder::new()
                .num_threads(interactive_threads())
                .thread_name(|index| format!("cpu interactive {index}"))
                .start_handler(|_| {
                    ON_INTERACTIVE_LANE.with(|lane| lane.set(true));
                    lower_priority();
                })
                .build();
            match built {
                Ok(pool) => Some(pool),
                Err(error) => {
                    tracing::error!(
                        %error,
                        "cannot start the CPU pool's interactive lane: its work runs on the callers"
                    );
                    None
                }
            }
        })
        .as_ref()
}

/// Whether the calling thread is one of the interactive lane's.
pub(crate) fn on_interactive_lane() -> bool {
    ON_INTERACTIVE_LANE.with(std::cell::Cell::get)
}

/// Lowers the calling thread's priority to [`NICE`] (Linux sets nice values per thread). A
/// refusal leaves it as it is: the work is the same, only its share of a busy machine.
fn lower_priority() {
    let thread = rustix::thread::gettid();
    if let Err(error) = rustix::process::setpriority_process(Some(thread), NICE) {
        tracing::debug!(%error, "cannot lower a CPU pool thread's priority");
    }
}

/// Runs `work` on the pool and waits for it; run from a thread of the pool, it runs at once.
pub fn run<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    match pool() {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// Runs `work`, which a person waits for, on the interactive lane and waits for it: behind
/// other interactive work at most, never behind the pool's batch work.
pub fn run_interactive<T: Send>(work: impl FnOnce() -> T + Send) -> T {
    match interactive_pool() {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// `work(0..count)` on the pool, one index at a time per thread, results in index order.
pub(crate) fn map<T: Send>(count: usize, work: impl Fn(usize) -> T + Sync + Send) -> Vec<T> {
    run(|| {
        (0..count)
            .into_par_iter()
            .with_max_len(1)
            .map(work)
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_keeps_order_and_runs_on_the_pool_at_a_lower_priority() {
        let squares = map(100, |index| index * index);
        assert_eq!(
            squares,
            (0..100).map(|index| index * index).collect::<Vec<_>>()
        );
        assert!(map(0, |index| index).is_empty());
        // Every call ran on a pool thread, whose nice value is NICE.
        let threads = map(8, |_| {
            let name = std::thread::current().name().map(str::to_owned);
            let nice = rustix::process::getpriority_process(Some(rustix::thread::gettid()));
            (name, nice.ok())
        });
        for (name, nice) in threads {
            assert!(name.is_some_and(|name| name.starts_with("cpu ")));
            assert_eq!(nice, Some(NICE));
        }
        // A pool made already keeps its size.
        assert!(!set_cpu_threads(1));
        assert!(cpu_threads() >= 1);
    }

    /// With every thread of the pool busy until interactive work is done, that work still
    /// runs (on its own lane, at the pool's priority): batch work cannot starve it. Were it
    /// queued behind the batch work, the batch work would give up waiting first and the test
    /// fails.
    #[test]
    fn interactive_work_runs_while_batch_work_holds_every_pool_thread() {
        use std::sync::{Arc, Condvar, Mutex};
        use std::time::Duration;

        let threads = cpu_threads();
        // (batch tasks started, interactive work done)
        let state = Arc::new((Mutex::new((0_usize, false)), Condvar::new()));
        let batch_state = Arc::clone(&state);
        let batch = std::thread::spawn(move || {
            map(threads, |_| {
                let (lock, changed) = &*batch_state;
                let mut guard = lock.lock().unwrap();
                guard.0 += 1;
                changed.notify_all();
                let (guard, waited) = changed
                    .wait_timeout_while(guard, Duration::from_secs(60), |(_, done)| !*done)
                    .unwrap();
                // Whether the interactive work was done while this task held its thread.
                guard.1 && !waited.timed_out()
            })
        });
        {
            let (lock, changed) = &*state;
            let guard = lock.lock().unwrap();
            let (guard, waited) = changed
                .wait_timeout_while(guard, Duration::from_secs(60), |(started, _)| {
                    *started < threads
                })
                .unwrap();
            assert!(
                !waited.timed_out(),
                "{} of {threads} batch tasks started",
                guard.0
            );
        }
        let (name, nice) = run_interactive(|| {
            let nice = rustix::process::getpriority_process(Some(rustix::thread::gettid()));
            (std::thread::current().name().map(str::to_owned), nice.ok())
        });
        assert!(
            name.as_deref()
                .is_some_and(|name| name.starts_with("cpu interactive ")),
            "{name:?}"
        );
        assert_eq!(nice, Some(NICE));
        assert!(!on_interactive_lane());
        assert!(run_interactive(on_interactive_lane));
        {
            let (lock, changed) = &*state;
            lock.lock().unwrap().1 = true;
            changed.notify_all();
        }
        let held = batch.join().unwrap();
        assert_eq!(
            held,
            vec![true; threads],
            "every batch task held its thread throughout"
        );
    }
}
