#!/usr/bin/env bash
# The Python package as a new user gets it: a fresh virtual environment,
# `pip install .` from the repository root (scikit-build-core builds libmnemo
# and puts it inside the package), `import mnemo` with no MNEMO_* variable
# set, a one-line search, `pip uninstall`.
#
# CI time: the CMake build folder is kept in $MNEMO_WHEEL_BUILD_DIR
# (default build-wheel, git-ignored) and reused by later runs, so only the
# first run compiles; the CUDA module, built when nvcc is found, is limited
# to $MNEMO_WHEEL_CUDA_ARCHS (default 90-real; MNEMO_WHEEL_CUDA=OFF skips it).
# pip fetches scikit-build-core (pinned in pyproject.toml) and numpy.
# What is installed is a copy of the files git tracks (or would track), as
# they are in the working tree, at a fixed path ($build_dir-src, so the kept
# build folder stays valid; tar keeps the times, so unchanged files are not
# rebuilt): build folders and stray files in the checkout are not swept in.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${MNEMO_WHEEL_BUILD_DIR:-$root/build-wheel}
python=${PYTHON:-python3}
venv=$(mktemp -d)
trap 'rm -rf "$venv"' EXIT
unset MNEMO_LIBRARY MNEMO_LIB_DIR PYTHONPATH

start=$(date +%s)
src=$build_dir-src
rm -rf "$src"
mkdir -p "$src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do if [ -f "$f" ]; then printf '%s\0' "$f"; fi; done |
  tar --null -T - -cf -) | tar -xf - -C "$src"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$src" \
  -C build-dir="$build_dir" \
  -C cmake.define.MNEMO_CUDA="${MNEMO_WHEEL_CUDA:-AUTO}" \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES="${MNEMO_WHEEL_CUDA_ARCHS:-90-real}"
# Run outside the source tree, so the installed package is the one imported.
(cd "$venv" && "$venv/bin/python" - <<'PY'
import os
import mnemo
# The library inside the package, found with no MNEMO_* variable.
assert os.path.dirname(mnemo.library_path()) == os.path.dirname(mnemo.__file__), mnemo.library_path()
# The compiled extension beside it, linked with that library.
from mnemo import _native
assert _native.AVAILABLE, _native.MISSING
assert os.path.dirname(_native.ext.__file__) == os.path.dirname(mnemo.__file__), _native.ext.__file__
store = mnemo.Store(mnemo.Runtime(backend="cpu"), 3, metric="dot")
store.add([7, 9], [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
ids, scores = store.search([0.0, 1.0, 0.0], 1)
assert ids.tolist() == [9] and scores.tolist() == [2.0], (ids, scores)
print("installed mnemo", mnemo.__version__, "from", mnemo.library_path(), "search ok")
PY
)
"$venv/bin/python" -m pip uninstall --quiet --yes mnemo
if "$venv/bin/python" -c 'import mnemo' 2>/dev/null; then
  echo "mnemo still importable after pip uninstall" >&2
  exit 1
fi
echo "wheel test passed in $(( $(date +%s) - start )) s"
