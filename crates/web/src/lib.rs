#![doc = include_str!("../README.md")]

mod assets;
mod config;
mod connect;
mod dashboard;
mod embed;
mod error;
mod explore;
mod explore_panels;
mod form;
pub mod fuzzing;
mod home;
mod html;
mod images;
mod login;
mod privacy;
mod registry;
mod share_link;
mod takedown;
mod web;

pub use config::{HomePage, RELEASE_ASSETS_DIR, WebConfig, default_assets_dir};
pub use embed::EmbedStyle;
pub use error::WebError;
pub use images::{EmbedImage, EmbedImages, StoreImages, ThumbUrl};
pub use registry::Registry;
pub use web::{Page, Web};
