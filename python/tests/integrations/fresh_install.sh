#!/usr/bin/env bash
# The extras as a new user gets them: a fresh venv, pip install
# ".[langchain,langgraph,llama-index,mem0]" from the committed tree (git
# archive HEAD; scikit-build-core builds libmnemo, the CUDA module left out),
# then every example under examples/{langchain,langgraph,llama_index,mem0}
# with no MNEMO_* variable set, from a folder outside the tree.
# The CMake build folder is kept in $MNEMO_EXTRAS_BUILD_DIR (default
# build-extras, git-ignored), so only the first run compiles.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
build_dir=${MNEMO_EXTRAS_BUILD_DIR:-$root/build-extras}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset MNEMO_LIBRARY MNEMO_LIB_DIR PYTHONPATH
start=$(date +%s)
mkdir "$work/src"
(cd "$root" && git archive HEAD) | tar -x -C "$work/src"
/usr/bin/python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "$work/src[langchain,langgraph,llama-index,mem0]" \
  --config-settings=build-dir="$build_dir" --config-settings=cmake.define.MNEMO_CUDA=OFF
cd "$work"
for ex in "$root"/examples/langchain/*.py "$root"/examples/langgraph/*.py \
          "$root"/examples/llama_index/*.py "$root"/examples/mem0/*.py; do
  MEM0_DIR="$work/mem0" MEM0_TELEMETRY=False "$work/venv/bin/python" "$ex" > "$work/out.txt" 2>&1 ||
    { cat "$work/out.txt" >&2; echo "fresh_install.sh: $ex failed" >&2; exit 1; }
  echo "ran ${ex#"$root"/}"
done
echo "fresh install with the four extras and the examples: $(( $(date +%s) - start )) s"
