#!/bin/sh
# Checks the dynamic symbol table of libmnemo.so against the public header:
# every defined symbol is a mnemo_ symbol, every function the header
# declares is exported, and nothing else carries the mnemo_ prefix.
# Usage: check_exports.sh <path/to/libmnemo.so> <path/to/mnemo.h>
set -eu

lib=$1
header=$2
[ -f "$lib" ] || { echo "no library at $lib"; exit 1; }
[ -f "$header" ] || { echo "no header at $header"; exit 1; }

# Defined dynamic symbols without their version suffix (name@@NODE). Type A
# entries are version-script nodes (e.g. MNEMO_1), not code or data.
exported=$(nm -D --defined-only "$lib" | awk 'NF >= 3 && $2 != "A" { print $3 }' | sed 's/@.*$//' | sort -u)
[ -n "$exported" ] || { echo "no defined dynamic symbols in $lib"; exit 1; }

# Function names declared with MNEMO_API, e.g. "MNEMO_API mnemo_status mnemo_x(".
declared=$(grep -v '^[[:space:]]*#' "$header" | grep -o 'MNEMO_API[^(;]*(' | sed 's/($//; s/.*[^A-Za-z0-9_]//' | sort -u)
[ -n "$declared" ] || { echo "no MNEMO_API declarations found in $header"; exit 1; }

status=0
foreign=$(printf '%s\n' "$exported" | grep -v '^mnemo_' || true)
if [ -n "$foreign" ]; then
  echo "symbols exported without the mnemo_ prefix:"
  printf '  %s\n' $foreign
  status=1
fi
missing=$(printf '%s\n' "$declared" | while read -r f; do
  printf '%s\n' "$exported" | grep -qx "$f" || echo "$f"
done)
if [ -n "$missing" ]; then
  echo "declared in mnemo.h but not exported:"
  printf '  %s\n' $missing
  status=1
fi
extra=$(printf '%s\n' "$exported" | grep '^mnemo_' | while read -r f; do
  printf '%s\n' "$declared" | grep -qx "$f" || echo "$f"
done)
if [ -n "$extra" ]; then
  echo "exported but not declared in mnemo.h:"
  printf '  %s\n' $extra
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "$(printf '%s\n' "$declared" | wc -l) declared functions, all exported; no other symbols"
fi
exit "$status"
