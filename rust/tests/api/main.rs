//! Behaviour of the safe API and of the library under it: errors and their
//! messages, alignment checks, store persistence and updates, threads,
//! runtime reports, the aligned buffer, activation ranking and the
//! inverted-file index (nprobe).

#[path = "../common/mod.rs"]
mod common;

mod activation;
mod aligned_vec;
mod alignment;
mod durable;
mod errors;
mod fields;
mod index;
mod merge;
mod runtime;
mod store;
mod threads;
