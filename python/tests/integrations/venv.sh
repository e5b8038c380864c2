#!/usr/bin/env bash
# The integration suites' environment: the pinned requirements.txt in a
# venv of the build folder, made once and remade when that file changes.
# Prints the venv's python. Usage: venv.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: venv.sh BUILD_DIR}" && pwd)
venv=$build/integrations-venv
want=$(sha256sum "$here/requirements.txt" | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  echo "$want" > "$venv/.requirements.sha256"
fi
echo "$venv/bin/python"
