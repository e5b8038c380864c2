#!/usr/bin/env bash
# ctest's python_distributed: mnemo.distributed on a local Ray cluster, with
# Ray (pinned in scripts/ray-venv.sh) in a virtual environment of the build
# folder. Exits 77 (skipped) when the environment cannot be made (no network
# on a first run, for example).
# Usage: run_distributed.sh VENV_DIR
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=$(bash "$here/../scripts/ray-venv.sh" "$1") || { echo "skipping: no Ray environment" >&2; exit 77; }
exec timeout 300 "$py" -m pytest -q -p no:cacheprovider "$here/tests/test_distributed.py" "$here/tests/test_merge.py"
