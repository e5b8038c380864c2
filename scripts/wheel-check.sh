#!/usr/bin/env bash
# The Python install as a new user does it: a fresh virtual environment,
# `pip install` of a clean copy of the tree (the files git tracks or would
# track, as they are in the working tree; no build folders), `import mnemo`
# with no MNEMO_* variable set, a one-line search, `pip uninstall -y mnemo`.
#
# Usage: scripts/wheel-check.sh WORK_DIR [PYTHON]
#   WORK_DIR  scratch folder (emptied first), e.g. build/wheel-check
#   PYTHON    interpreter for the venv (default: python3)
#   MNEMO_WHEEL_CUDA  MNEMO_CUDA for the wheel build (default OFF: the check
#             is about packaging, and compiling the CUDA module takes minutes
#             on a small machine; set AUTO to build it where nvcc is found).
# pip needs PyPI (or a configured index) for scikit-build-core and numpy; its
# cache makes later runs fast. ccache, when installed, is used for the C++
# compiles: WORK_DIR keeps the same paths from run to run, so it hits.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:?usage: scripts/wheel-check.sh WORK_DIR [PYTHON]}
python=${2:-python3}
cuda=${MNEMO_WHEEL_CUDA:-OFF}
start=$(date +%s)

rm -rf "$work"
mkdir -p "$work/src"
work=$(cd "$work" && pwd)

echo "== clean copy of the tree in $work/src"
if ! git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  echo "wheel-check: $root is not a git checkout; cannot tell tracked files from build output" >&2
  exit 1
fi
# Tracked and untracked-but-not-ignored files that exist (a deleted tracked
# file stays out).
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf -) | tar -xf - -C "$work/src"

echo "== fresh venv ($("$python" --version))"
"$python" -m venv "$work/venv"
py=$work/venv/bin/python

echo "== pip install $work/src  (MNEMO_CUDA=$cuda)"
settings=(-C "cmake.define.MNEMO_CUDA=$cuda")
if command -v ccache >/dev/null 2>&1; then
  settings+=(-C cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache -C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# A fixed build folder (not pip's random temporary one) keeps ccache's view
# of the compile commands the same from run to run; it is emptied above.
settings+=(-C "build-dir=$work/skbuild")
build_start=$(date +%s)
(cd "$work" && "$py" -m pip install -q "${settings[@]}" "$work/src")
echo "   built and installed in $(($(date +%s) - build_start)) s"

echo "== import mnemo and search, no MNEMO_* variable set"
(cd "$work" && env -u MNEMO_LIBRARY -u MNEMO_LIB_DIR -u MNEMO_BACKEND_DIR "$py" -c '
import os, sys, numpy as np, mnemo, mnemo._lib as lib
site = os.path.dirname(os.path.abspath(mnemo.__file__))
assert site.startswith(sys.prefix), f"mnemo imported from {site}, not the venv {sys.prefix}"
assert os.path.dirname(lib.LIBRARY_PATH) == site, f"libmnemo loaded from {lib.LIBRARY_PATH}, not {site}"
x = mnemo.aligned_array(np.random.default_rng(7).standard_normal((1001, 37)), np.float32)
store = mnemo.Store(mnemo.Runtime(backend="cpu"), dim=37, metric="cosine")
store.add(np.arange(1001, dtype=np.uint64), x)
ids, scores = store.search(x[[5, 999]], k=3)
assert ids[:, 0].tolist() == [5, 999] and abs(float(scores[0, 0]) - 1) < 1e-5, (ids, scores)
print("   libmnemo from", lib.LIBRARY_PATH, "- top hits", ids[:, 0].tolist())
')

echo "== pip uninstall -y mnemo"
"$py" -m pip uninstall -q -y mnemo
if (cd "$work" && "$py" -c 'import mnemo' 2>/dev/null); then
  echo "wheel-check: mnemo still importable after pip uninstall" >&2
  exit 1
fi
leftover=$(find "$work/venv" -name 'libmnemo*' | head -1)
if [ -n "$leftover" ]; then
  echo "wheel-check: pip uninstall left $leftover behind" >&2
  exit 1
fi
echo "wheel-check: passed in $(($(date +%s) - start)) s"
