#![doc = include_str!("../README.md")]

pub mod layout;
mod local;
mod object;
mod presign;
mod store;

pub use layout::{ImageObject, Key};
pub use local::{LocalMedia, Opened, Removal, write_atomically};
pub use object::{
    MULTIPART_BYTES, ObjectMedia, ObjectWriter, OpenError, SCHEME, StoreUnavailable, is_unavailable,
};
pub use presign::Presigner;
pub use store::{MediaStore, Stored};
