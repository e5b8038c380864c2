#!/usr/bin/env bash
# Builds the Python package's compiled extension mnemo._mnemo_ext for this
# machine's python3 (or $PYTHON) into OUT, next to a libmnemo, from the source
# tree and without network access when nanobind is installed (the GPU machine
# has it), then imports it and runs one search as a check.
#
# Usage: scripts/py-ext-build.sh OUT
#   Default: builds libmnemo CPU-only (MNEMO_CUDA=OFF; it loads the CUDA module
#     libmnemo_cuda.so at run time from MNEMO_BACKEND_DIR) and the extension,
#     into OUT/build/lib.
#   MNEMO_LIB_DIR=DIR: builds only the extension, linked with the libmnemo.so.1
#     in DIR (e.g. .device/lib of scripts/device-test.sh's bundle), into
#     OUT/lib beside links to that library: seconds instead of minutes.
#   NANOBIND_WHEEL=FILE: a nanobind wheel to install into OUT when this Python
#     has no nanobind (offline machines); with neither, CMake pip-installs
#     nanobind from PyPI.
#   JOBS: build jobs (default: all cores).
# Prints the variables that point Python at the result.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/py-ext-build.sh OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
python=$(command -v "${PYTHON:-python3}")
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
start=$(date +%s)

gen=()
command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
nb=()
if ! "$python" -m nanobind --cmake_dir >/dev/null 2>&1 && [ -n "${NANOBIND_WHEEL:-}" ]; then
  PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --quiet --disable-pip-version-check --no-index \
    --no-deps --target "$out/python-deps" "$NANOBIND_WHEEL"
  nb=("-Dnanobind_DIR=$out/python-deps/nanobind/cmake")
fi

if [ -n "${MNEMO_LIB_DIR:-}" ]; then
  libdir=$(cd "$MNEMO_LIB_DIR" && pwd)
  cmake -S "$root/python/ext" -B "$out/build-ext" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    "-DMNEMO_LIB_DIR=$libdir" "-DPython_EXECUTABLE=$python" "${nb[@]}" >"$out/configure.log"
  cmake --build "$out/build-ext" -j"$jobs" --target _mnemo_ext
  # The extension is looked for next to the library Python loads: links to
  # the library's files beside it.
  lib=$out/lib
  mkdir -p "$lib"
  cp -f "$out"/build-ext/lib/_mnemo_ext*.so "$lib/"
  for f in "$libdir"/libmnemo.so*; do
    ln -sfn "$(readlink -f "$f")" "$lib/$(basename "$f")"
  done
  backend_dir=$libdir
else
  cmake -S "$root" -B "$out/build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DMNEMO_CUDA=OFF \
    -DMNEMO_BUILD_TESTS=OFF -DMNEMO_PYTHON_EXT=ON "-DPython_EXECUTABLE=$python" "${nb[@]}" >"$out/configure.log"
  cmake --build "$out/build" -j"$jobs" --target mnemo _mnemo_ext
  lib=$out/build/lib
  backend_dir="<folder of libmnemo_cuda.so, e.g. $root/.device/lib>"
fi

# The check: the extension loads with this library and searches.
MNEMO_LIBRARY="$lib/libmnemo.so.1" PYTHONPATH="$root/python" "$python" - <<'PY'
import numpy as np
import mnemo
from mnemo import _native
assert _native.AVAILABLE, _native.MISSING
store = mnemo.Store(mnemo.Runtime(backend="cpu"), 3, metric="dot")
store.add([7, 9], [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
ids, scores = store.search(np.array([0.0, 1.0, 0.0], np.float32), 1)
assert ids.tolist() == [9] and scores.tolist() == [2.0], (ids, scores)
print(f"mnemo {mnemo.version()} with {_native.ext.__file__}: search ok")
PY
echo "built in $(($(date +%s) - start)) s. To use it:"
echo "  export MNEMO_LIBRARY=$lib/libmnemo.so.1 PYTHONPATH=$root/python"
echo "  export MNEMO_BACKEND_DIR=$backend_dir   # for CUDA runtimes"
