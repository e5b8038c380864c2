#!/bin/sh
# The mnemo tool end to end on a small generated set: build, search (.tsv and
# .ivecs), eval with recall 1.0 for exact search, and clean failures (status
# 1 with a message, never a signal) for malformed and mismatched inputs.
# Usage: cli_flow.sh <path/to/mnemo>
set -eu
mnemo=$1
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
"$mnemo" info > "$d/info.txt"
grep -q "ABI" "$d/info.txt"
"$mnemo" gen --base "$d/b.fvecs" --queries "$d/q.fvecs" --truth "$d/t.ivecs" --n 3000 --nq 40 --dim 24 --k 20 > /dev/null
"$mnemo" build --input "$d/b.fvecs" --out "$d/s.mnemo" > /dev/null
"$mnemo" search --store "$d/s.mnemo" --queries "$d/q.fvecs" --k 5 --out "$d/r.tsv" 2> /dev/null
[ "$(wc -l < "$d/r.tsv")" -eq 201 ] || { echo "expected 200 result lines"; exit 1; }
"$mnemo" search --store "$d/s.mnemo" --queries "$d/q.fvecs" --k 20 --out "$d/r.ivecs" 2> /dev/null
cmp -s "$d/r.ivecs" "$d/t.ivecs" || { echo "search ids differ from the brute-force truth"; exit 1; }
"$mnemo" eval --base "$d/b.fvecs" --queries "$d/q.fvecs" --truth "$d/t.ivecs" --k 10 > "$d/eval.txt" 2> /dev/null
grep -q "^recall@10 = 1.0000$" "$d/eval.txt" || { cat "$d/eval.txt"; exit 1; }
"$mnemo" build --input "$d/b.fvecs" --out "$d/durable.mnemo" --durable > /dev/null
"$mnemo" search --store "$d/durable.mnemo" --durable --queries "$d/q.fvecs" --k 3 > /dev/null 2>&1

# Failures: status 1 and a message naming the problem.
fails() {  # fails <pattern> <command...>
  pattern=$1
  shift
  set +e
  "$@" > "$d/out.txt" 2> "$d/err.txt"
  st=$?
  set -e
  [ "$st" -eq 1 ] || { echo "status $st (want 1): $*"; cat "$d/err.txt"; exit 1; }
  grep -q "$pattern" "$d/err.txt" || { echo "no '$pattern' in:"; cat "$d/err.txt"; exit 1; }
}
head -c 1050 "$d/b.fvecs" > "$d/cut.fvecs"
fails "whole number of rows" "$mnemo" build --input "$d/cut.fvecs" --out "$d/x.mnemo"
head -c 50 "$d/s.mnemo" > "$d/cut.mnemo"
fails "MNEMO_E_CORRUPT" "$mnemo" search --store "$d/cut.mnemo" --queries "$d/q.fvecs" --k 3
"$mnemo" gen --base "$d/b2.fvecs" --queries "$d/q2.fvecs" --truth "$d/t2.ivecs" --n 100 --nq 4 --dim 8 --k 5 > /dev/null
fails "has dimension 8 but the store has 24" "$mnemo" search --store "$d/s.mnemo" --queries "$d/q2.fvecs" --k 3
fails "fewer than k" "$mnemo" eval --base "$d/b.fvecs" --queries "$d/q.fvecs" --truth "$d/t.ivecs" --k 30
echo "cli flow: all steps passed"
