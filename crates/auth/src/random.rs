//! Where the crate gets randomness: injected, so tests and fixtures are deterministic.

use std::sync::{Mutex, PoisonError};

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

/// A cryptographically secure source of random bytes.
pub trait RandomSource: Send + Sync {
    /// Fills `buffer` with random bytes.
    fn fill(&self, buffer: &mut [u8]);
}

/// Randomness from the operating system (through `rand`'s thread-local generator, a CSPRNG
/// seeded and periodically reseeded from the OS), for production.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsRandom;

impl RandomSource for OsRandom {
    fn fill(&self, buffer: &mut [u8]) {
        rand::rng().fill_bytes(buffer);
    }
}

/// A deterministic generator seeded from a number, for tests and fixtures.
/// Never use it in production: anyone knowing the seed knows every token.
#[derive(Debug)]
pub struct SeededRandom {
    rng: Mutex<StdRng>,
}

impl SeededRandom {
    /// A generator that always yields the same bytes for the same seed.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }
}

impl RandomSource for SeededRandom {
    fn fill(&self, buffer: &mut [u8]) {
        self.rng
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .fill_bytes(buffer);
    }
}
