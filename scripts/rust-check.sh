#!/usr/bin/env bash
# The Rust half of `make test`: formatting, lints, every test (unit,
# integration, doc) and the docs of the `mnemo` crate, against an
# already-built library.
#
# Usage: scripts/rust-check.sh [BUILD_DIR]
#   BUILD_DIR  a CMake build folder holding the built `mnemo` target
#              (default: $MNEMO_LIB_DIR). Cargo output goes to BUILD_DIR/cargo
#              unless CARGO_TARGET_DIR is set.
#   MNEMO_LIB_DIR  folder of libmnemo.so (default: BUILD_DIR; build.rs also
#              looks in its lib/ subfolder).
#   MNEMO_TEST_CUDA=1  fail, rather than skip, the CUDA cases when no
#              CUDA backend can be created (for GPU machines).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${MNEMO_LIB_DIR:-}}
if [ -z "$build" ]; then
  echo "rust-check: pass the CMake build folder as \$1 or set MNEMO_LIB_DIR" >&2
  exit 2
fi
if [ ! -d "$build" ]; then
  echo "rust-check: $build is not a folder; build the library first (cmake --build <dir> --target mnemo)" >&2
  exit 2
fi
build=$(cd "$build" && pwd)
export MNEMO_LIB_DIR=${MNEMO_LIB_DIR:-$build}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$build/cargo}
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}

if ! command -v cargo >/dev/null 2>&1; then
  echo "rust-check: cargo is not installed; install a Rust toolchain (https://rustup.rs or Debian: apt-get install cargo)" >&2
  exit 1
fi

# clippy and rustfmt are rustup components; try to add them once if missing.
missing=()
cargo fmt --version >/dev/null 2>&1 || missing+=(rustfmt)
cargo clippy --version >/dev/null 2>&1 || missing+=(clippy)
if [ ${#missing[@]} -gt 0 ]; then
  echo "rust-check: missing cargo components: ${missing[*]}; trying: rustup component add ${missing[*]}" >&2
  if ! command -v rustup >/dev/null 2>&1 || ! rustup component add "${missing[@]}"; then
    echo "rust-check: could not install ${missing[*]} (offline, or no rustup)." >&2
    echo "rust-check: install them with 'rustup component add ${missing[*]}' (Debian: apt-get install rustfmt rust-clippy) and rerun." >&2
    exit 1
  fi
fi

cd "$root"
step() {
  echo "== $*"
  "$@"
}
step cargo fmt --check
step cargo clippy --all-targets -- -D warnings
step cargo test
export RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -Dwarnings"
step cargo doc --no-deps
echo "rust-check: all Rust checks passed (MNEMO_LIB_DIR=$MNEMO_LIB_DIR)"
