#![doc = include_str!("../README.md")]

pub mod layout;
mod local;

pub use layout::{ImageObject, Key};
pub use local::{LocalMedia, Opened, Removal, write_atomically};
