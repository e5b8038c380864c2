//! Safe Rust bindings to mnemo, an embedding memory runtime for CPU and GPU:
//! similarity matrices, top-k recall from a store, pair scoring, trajectory
//! resampling and row normalisation, behind the stable C ABI of `mnemo.h`.
//!
//! * [`Runtime`] picks the backend (CPU, CUDA or AUTO) and runs the store-less
//!   operations: [`Runtime::similarity`], [`Runtime::score_pairs`],
//!   [`Runtime::resample`], [`Runtime::normalize_rows`],
//!   [`Runtime::layer_norm`].
//! * [`Store`] holds vectors under `u64` ids and answers [`Store::search`];
//!   each memory also carries a last-access time and an importance, which
//!   [`Activation`] ranking weighs with the similarity.
//! * [`Store::build_index`] gives a large store an inverted-file index;
//!   searches with [`SearchOptions::nprobe`] then read only the lists
//!   nearest each query (plus every memory written since the build).
//! * Memories may carry a key, a namespace, tags, typed attributes and a
//!   payload ([`Fields`], [`Store::add_with_fields`], [`Store::read`]);
//!   a [`Where`] expression over them scopes a search
//!   ([`SearchOptions::where_`]) or selects ids ([`Store::select`]).
//! * [`topk_merge`] merges search results of several parts (shards, hosts)
//!   the way sharded stores do.
//! * Every buffer handed to the library must be 16-byte aligned; allocate
//!   inputs and outputs with [`AlignedVec`]. A misaligned slice is refused with
//!   [`Status::Misaligned`] before the library is called.
//! * Failures are [`Error`]s carrying the library's [`Status`] and message.
//!
//! ```
//! use mnemo::{AlignedVec, Metric, Runtime, Store};
//!
//! let rt = Runtime::new()?; // AUTO: the GPU for large work when present
//! let store = Store::<f32>::new(&rt, 3, Metric::Cosine)?;
//! let ids = AlignedVec::from_slice(&[1u64, 2, 3]);
//! let vectors = AlignedVec::from_slice(&[
//!     1.0, 0.0, 0.0, //
//!     0.0, 1.0, 0.0, //
//!     0.7, 0.7, 0.0, //
//! ]);
//! store.add(&ids, &vectors)?;
//! let hits = store.search(&AlignedVec::from_slice(&[1.0, 0.1, 0.0]), 2)?;
//! assert_eq!(hits[0][0].id, 1);
//! assert_eq!(hits[0][1].id, 3);
//! # Ok::<(), mnemo::Error>(())
//! ```
//!
//! The crate links `libmnemo.so`: set `MNEMO_LIB_DIR` to a built library, or
//! leave it unset and the build script compiles the bundled C++ (and CUDA,
//! when nvcc is present) sources with CMake.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod aligned;
mod dtype;
mod durable;
mod error;
mod fields;
mod filter;
mod index;
mod merge;
mod ops;
mod runtime;
mod store;

/// Raw declarations generated from `mnemo.h` by `rust/gen-sys.sh`; prefer
/// the safe API.
///
/// ```
/// // SAFETY: takes no arguments and returns the library's ABI version.
/// let abi = unsafe { mnemo::sys::mnemo_abi_version() };
/// assert_eq!(abi, mnemo::sys::MNEMO_ABI_VERSION);
/// ```
#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    missing_docs,
    clippy::all,
    clippy::undocumented_unsafe_blocks
)]
pub mod sys;

pub use aligned::{AlignedVec, ALIGNMENT};
pub use dtype::{Bf16, DType, Element, Index, Storage, Time, F16};
pub use durable::{DurableOptions, StoreStats, SyncPolicy};
pub use error::{Error, Result, Status};
pub use fields::{Fields, Memory, NamespaceUse, Selection, Value};
pub use filter::{Attr, Where};
pub use index::{IndexInfo, IndexOptions};
pub use merge::topk_merge;
pub use ops::{LayerNormParams, Metric, ResampleLengths, ResampleShape};
pub use runtime::{abi_version, build_info, status_name, version, Backend, Precision};
pub use runtime::{Runtime, RuntimeBuilder, RuntimeInfo};
pub use store::{Activation, Filter, Hit, MemoryMeta, SearchOptions, Store, NO_ID};
