//! Differential tests: every operation on the CPU backend, on the CUDA
//! backend when a GPU is present, and on AUTO, on identical random inputs,
//! each compared with a float64 reference and with the others under the
//! bounds of mnemo.h.

#[path = "../common/mod.rs"]
mod common;

mod filters;
mod normalize;
mod pairs;
mod resample;
mod search;
mod similarity;
