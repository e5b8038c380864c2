#!/usr/bin/env bash
# The Rust crate as crates.io would get it: `cargo package --offline` packs
# and builds it, then its tests run from the unpacked package alone (the
# bundled C++ sources built by build.rs; no MNEMO_LIB_DIR), so a file missing
# from the include list fails here. CUDA off (the crate's default) to keep
# CI short.
# Usage: scripts/rust-package-check.sh [TARGET_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export CARGO_TARGET_DIR=${1:-$root/build/cargo-package}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
unset MNEMO_LIB_DIR MNEMO_INCLUDE_DIR
cd "$root"
# The crate built from the checkout first, in the same target folder: the
# packaged copy must then get a CMake build folder of its own (one per source
# tree), not the checkout's. Timed: the CPU-only crate build of a fresh
# checkout (no `cuda` feature).
t0=$SECONDS
cargo build --offline
echo "cargo build (bundled C++, CPU only): $((SECONDS - t0)) s"
cargo package --offline --allow-dirty
pkg=$(ls -d "$CARGO_TARGET_DIR"/package/mnemo-*/ | head -n1)
(cd "$pkg" && cargo test --offline --test api --test sys_fresh)
echo "cargo package: the packed crate builds and passes its tests"
