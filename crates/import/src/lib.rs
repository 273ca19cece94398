#![doc = include_str!("../README.md")]

mod blurring;
mod budgets;
mod cpu;
mod erase;
mod error;
mod files;
pub mod fuzzing;
mod jobs;
mod media;
mod notes;
mod picture_write;
mod pipeline;
mod privacy;
mod reblur;
mod session_bytes;
mod sessions;
mod tables;
mod video;

pub use blurring::{Blurring, SOURCE_DETECTOR};
pub use budgets::{
    DEFAULT_DECODE_MEMORY_BYTES, PicturePermit, PictureWork, picture_memory, picture_permit,
    set_decode_memory_limit,
};
pub use cpu::{
    NICE as CPU_POOL_NICE, cpu_threads, interactive_threads, run as run_on_cpu_pool,
    run_interactive, set_cpu_threads,
};
pub use erase::{Erasure, erase_images};
pub use error::ImportError;
pub use files::{ImportOptions, import_paths};
pub use jobs::{FileType, Job, JobState};
pub use media::{media_store, set_media_store};
pub use notes::ReadNotes;
pub use pipeline::{FileOutcome, Outcome, Owner, Progress, Report};
pub use privacy::{
    APPLY_ATTEMPTS, BlurEdit, BlurRegion, EditKind, EditState, MAX_CONTACT_CHARS,
    MAX_OPEN_REQUESTS, MAX_PENDING_EDITS, MAX_REASON_CHARS, NewRequest, Privacy, PrivacyRefusal,
    PrivacyRequest, RequestKind, RequestState, SOURCE_EDIT, Shares, StoredBox, remove_cached_media,
};
pub use reblur::{
    BlurStatus, REBLUR_ATTEMPTS, ReblurProgress, ReblurReport, Selection, Source, blur_status,
    reblur,
};
pub use sessions::{Appender, UPLOADS_DIR, UploadLimits, UploaderGeneration, Uploads};
pub use video::VideoOptions;
