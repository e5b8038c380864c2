#!/usr/bin/env bash
# make test's framework suites (python/tests/integrations) in their pinned
# environment (venv.sh), against the library just built, with network
# sockets refused (the suites run offline). A suite that cannot run fails:
# nothing here exits "skipped".
# Usage: run.sh BUILD_DIR [pytest arguments]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [pytest args]}" && pwd)
shift
py=$(bash "$here/venv.sh" "$build")
export MNEMO_LIBRARY=$build/lib/libmnemo.so MNEMO_INTEGRATIONS=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH=$root/python
[ -f "$MNEMO_LIBRARY" ] || { echo "run.sh: no $MNEMO_LIBRARY (build first)" >&2; exit 1; }
start=$(date +%s)
timeout 900 "$py" -m pytest -c "$here/pytest.ini" -q -p no:cacheprovider \
  --disable-socket --allow-unix-socket "$here" "$@"
echo "integration suites passed in $(( $(date +%s) - start )) s"
