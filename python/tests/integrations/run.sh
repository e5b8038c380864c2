#!/usr/bin/env bash
# make test's framework suites (python/tests/integrations): the pinned
# environment of requirements.txt in a venv of the build folder, made once
# and remade when that file changes, then pytest over this folder against
# the library just built, with network sockets refused (the suites run
# offline). A suite that cannot run fails: nothing here exits "skipped".
# Usage: run.sh BUILD_DIR [pytest arguments]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [pytest args]}" && pwd)
shift
venv=$build/integrations-venv
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
  echo "$want" > "$venv/.requirements.sha256"
fi
export MNEMO_LIBRARY=$build/lib/libmnemo.so MNEMO_INTEGRATIONS=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH=$root/python
[ -f "$MNEMO_LIBRARY" ] || { echo "run.sh: no $MNEMO_LIBRARY (build first)" >&2; exit 1; }
start=$(date +%s)
timeout 900 "$venv/bin/python" -m pytest -c "$here/pytest.ini" -q -p no:cacheprovider \
  --disable-socket --allow-unix-socket "$here" "$@"
echo "integration suites passed in $(( $(date +%s) - start )) s"
