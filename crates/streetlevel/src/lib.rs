#![doc = include_str!("../README.md")]

pub use streetlevel_model as model;
