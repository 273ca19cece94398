#![doc = include_str!("../README.md")]

pub mod cluster;
pub mod colmap;
mod engine;
mod error;
pub mod geo;
mod jobs;
pub mod media;
pub mod mesh;
pub mod pose;
mod reconstruct;
mod tables;
mod takedown;
pub mod validate;

pub use engine::{
    DRIVER, DriverReport, ENGINE_VERSION, Engine, EngineOptions, ModelReport, default_engine_dir,
};
pub use error::SfmError;
pub use jobs::{Job, JobState, Queue, worker_name};
pub use reconstruct::{Outcome, Pictures, Reconstructor, Settings, Thumbnail, WORK_DIR};
pub use tables::migrate;
pub use takedown::{forget_images, remove_work_files};
