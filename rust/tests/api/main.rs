//! Behaviour of the safe API and of the library under it: errors and their
//! messages, alignment checks, store persistence and updates, threads,
//! runtime reports and the aligned buffer.

#[path = "../common/mod.rs"]
mod common;

mod aligned_vec;
mod alignment;
mod durable;
mod errors;
mod runtime;
mod store;
mod threads;
