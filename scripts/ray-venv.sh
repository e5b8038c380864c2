#!/usr/bin/env bash
# A virtual environment with Ray for the mnemo.distributed tests, made once
# per build folder: the system Python (numpy, pytest from Debian) plus Ray
# from PyPI at a pinned version. Prints the environment's python.
# Usage: scripts/ray-venv.sh DIR
set -euo pipefail
RAY_VERSION=2.40.0
dir=${1:?usage: ray-venv.sh DIR}
py=$dir/bin/python
if [ -x "$py" ] && "$py" -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
  echo "$py"
  exit 0
fi
/usr/bin/python3 -m venv --system-site-packages "$dir" >&2
"$py" -m pip install --quiet --disable-pip-version-check "ray==$RAY_VERSION" >&2
echo "$py"
