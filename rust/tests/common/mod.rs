//! Helpers shared by the integration tests. Each test crate uses a different
//! subset, hence the dead-code allowance.
#![allow(dead_code)]

pub mod backends;
pub mod bounds;
pub mod prng;
pub mod reference;
