#![doc = include_str!("../README.md")]

mod blurrer;
pub mod client;
pub mod protocol;

pub use blurrer::regions;
pub use client::{Answer, ServiceClient, ServiceConfig, ServiceError, jpeg_size};
pub use protocol::{Annotation, Found, Metadata, Semantic};
