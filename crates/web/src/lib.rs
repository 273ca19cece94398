#![doc = include_str!("../README.md")]
// IDs cross into the database only through `streetlevel_db::id_to_sql` and `id_from_sql`:
// a sign-changing cast here is a mistake.
#![warn(clippy::cast_possible_wrap, clippy::cast_sign_loss)]

mod assets;
mod config;
mod connect;
mod dashboard;
mod embed;
mod error;
mod form;
pub mod fuzzing;
mod home;
mod html;
mod images;
mod login;
mod privacy;
mod registry;
mod takedown;
mod web;

pub use config::{RELEASE_ASSETS_DIR, WebConfig, default_assets_dir};
pub use embed::EmbedStyle;
pub use error::WebError;
pub use images::{EmbedImage, EmbedImages, StoreImages, ThumbUrl};
pub use registry::Registry;
pub use takedown::Takedowns;
pub use web::{Page, Web};
