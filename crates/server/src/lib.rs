#![doc = include_str!("../README.md")]

mod app;
mod auth;
pub mod blur;
mod client_address;
mod config;
mod endpoints;
mod error;
pub mod media;
mod media_reply;
pub mod metrics;
pub mod openapi;
mod privacy;
pub mod query;
pub mod reply;
mod route;
mod server;
mod takedown;
pub mod tilejson;
pub mod tiles;
mod upload;

pub use app::{App, Authenticator, Caller, Services, UploadLogin};
pub use client_address::{parse_trusted_proxies, parse_trusted_proxy};
pub use config::{Config, PublicUrls};
pub use error::Error;
pub use media::{DirectoryMedia, MediaSource};
pub use route::Route;
pub use server::Server;
pub use upload::{BODY_IDLE_TIMEOUT, job_json};
