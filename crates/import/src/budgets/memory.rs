//! The process's picture memory: one pool of bytes that every picture worked on at once is
//! charged its whole working set against (what [`picture_memory`] says), whatever the number
//! of cores; a picture of the CPU pool's interactive lane goes first.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};

use super::{DEFAULT_DECODE_MEMORY_BYTES, PictureWork, picture_memory};

/// The pictures of this process and the bytes they may hold at once.
struct MemoryPool {
    limit: AtomicU64,
    /// The bytes held, and how many pictures of the interactive lane wait for theirs.
    in_use: Mutex<InUse>,
    released: Condvar,
}

struct InUse {
    bytes: u64,
    interactive_waiting: usize,
}

static PICTURES: MemoryPool = MemoryPool {
    limit: AtomicU64::new(DEFAULT_DECODE_MEMORY_BYTES),
    in_use: Mutex::new(InUse {
        bytes: 0,
        interactive_waiting: 0,
    }),
    released: Condvar::new(),
};

/// Sets how many bytes the pictures this process works on may hold at once (the server's
/// `decode_memory_bytes`): each picture's whole working set, from its decode to its last
/// thumbnail or tile. A picture that would exceed it waits for others to end, and one that
/// alone needs more is refused.
pub fn set_decode_memory_limit(bytes: u64) {
    PICTURES.limit.store(bytes, Ordering::Relaxed);
    PICTURES.released.notify_all();
}

/// A picture of at least this many bytes (its own working set, without the blurrer's) is a
/// large one: once the process has no picture left to work on after one, the blurrer gives
/// back what it keeps between pictures.
const LARGE_PICTURE_BYTES: u64 = 256 << 20;

/// Whether a large picture was worked on since the blurrer last gave its memory back.
static LARGE_SINCE_RELEASE: AtomicBool = AtomicBool::new(false);

/// A share of the process's picture memory, given back when dropped.
pub struct PicturePermit {
    bytes: u64,
    /// The blurrer whose sessions go when the process's pictures are done after a large one.
    blurrer: Option<std::sync::Arc<dyn streetlevel_blur::Blurrer>>,
}

impl std::fmt::Debug for PicturePermit {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("PicturePermit")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl PicturePermit {
    /// The bytes this permit holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The same permit, which asks `blurrer` to give back what it keeps between pictures
    /// (its models' sessions, hundreds of megabytes each) when it is the last one held after
    /// a large picture, so that the process returns to its idle size.
    #[must_use]
    pub fn releasing(mut self, blurrer: std::sync::Arc<dyn streetlevel_blur::Blurrer>) -> Self {
        self.blurrer = Some(blurrer);
        self
    }
}

impl Drop for PicturePermit {
    fn drop(&mut self) {
        let idle = {
            let mut in_use = PICTURES
                .in_use
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            in_use.bytes = in_use.bytes.saturating_sub(self.bytes);
            in_use.bytes == 0
        };
        PICTURES.released.notify_all();
        if idle
            && let Some(blurrer) = &self.blurrer
            && LARGE_SINCE_RELEASE.swap(false, Ordering::Relaxed)
        {
            blurrer.release_memory();
        }
    }
}

/// Waits until the working set of `work` on `jpeg` fits in the process's picture memory
/// and takes its share; refuses a file that needs more than all of it, or whose layout
/// cannot be read (the decoder would refuse it too). A picture of the CPU pool's interactive
/// lane goes first: while one waits, no other picture takes memory before it.
pub fn picture_permit(jpeg: &[u8], work: PictureWork) -> Result<PicturePermit, String> {
    let bytes = picture_memory(jpeg, work).ok_or("not a readable jpeg")?;
    let limit = PICTURES.limit.load(Ordering::Relaxed);
    if bytes > limit {
        return Err(format!(
            "working on it needs about {} MB, more than this server's picture memory of {} MB \
             (decode_memory_bytes)",
            bytes >> 20,
            limit >> 20
        ));
    }
    let interactive = crate::cpu::on_interactive_lane();
    let mut in_use = PICTURES
        .in_use
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if interactive {
        in_use.interactive_waiting += 1;
    }
    while in_use.bytes + bytes > PICTURES.limit.load(Ordering::Relaxed)
        || (!interactive && in_use.interactive_waiting > 0)
    {
        in_use = PICTURES
            .released
            .wait(in_use)
            .unwrap_or_else(PoisonError::into_inner);
    }
    in_use.bytes += bytes;
    if interactive {
        in_use.interactive_waiting -= 1;
        // The pictures that let it go first may take memory now.
        PICTURES.released.notify_all();
    }
    let own = match work {
        PictureWork::Blur { detection, .. } => bytes.saturating_sub(detection),
        _ => bytes,
    };
    if own >= LARGE_PICTURE_BYTES {
        LARGE_SINCE_RELEASE.store(true, Ordering::Relaxed);
    }
    Ok(PicturePermit {
        bytes,
        blurrer: None,
    })
}
