#![doc = include_str!("../README.md")]

mod rules;
mod takedown;
mod target;

pub use rules::{Refusal, Role, decide};
pub use takedown::{Action, Caller, Done, Moderation, ModerationError};
pub use target::{Names, Target};

#[cfg(test)]
mod tests;
