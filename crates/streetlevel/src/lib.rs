#![doc = include_str!("../README.md")]

pub use streetlevel_auth as auth;
pub use streetlevel_detection as detection;
pub use streetlevel_fixtures as fixtures;
pub use streetlevel_import as import;
pub use streetlevel_ingest as ingest;
pub use streetlevel_model as model;
pub use streetlevel_mvt as mvt;
pub use streetlevel_ratelimit as ratelimit;
pub use streetlevel_server as server;
pub use streetlevel_store as store;
pub use streetlevel_web as web;
