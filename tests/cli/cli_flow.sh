#!/bin/sh
# The mnemo tool end to end on a small generated set: build, search (.tsv and
# .ivecs), eval with recall 1.0 for exact search, the inverted-file index
# (build --index ivf, eval --nprobe, search --nprobe), and clean failures (status
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

# Activation: times and importances at build, rankings by recency and by
# importance, a touch that lasts (the store is saved back), bad values.
awk 'BEGIN { for (i = 0; i < 3000; i++) print 1000 + i }' > "$d/times.txt"
awk 'BEGIN { for (i = 0; i < 3000; i++) print i % 7 }' > "$d/imp.txt"
"$mnemo" build --input "$d/b.fvecs" --out "$d/act.mnemo" --times "$d/times.txt" --importance "$d/imp.txt" > /dev/null
top1() {  # top1 <search options...>: the best id of query 0
  "$mnemo" search --store "$d/act.mnemo" --queries "$d/q.fvecs" --k 1 "$@" 2> /dev/null | awk -F'\t' '$1 == 0 { print $3 }'
}
[ "$(top1 --recency-half-life 10 --now 4000 --w-rel 0)" = 2999 ] || { echo "recency top-1 is not the newest"; exit 1; }
[ "$(top1 --now 4000 --w-rel 0 --w-rec 0 --w-imp 1)" = 6 ] || { echo "importance top-1 is not id 6"; exit 1; }
plain=$(top1)
[ "$(top1 --w-rel 1 --w-rec 0 --now 4000)" = "$plain" ] || { echo "relevance-only activation differs from plain"; exit 1; }
top1 --now 5000 --w-rel 0 --w-rec 0 --w-imp 1 --touch > /dev/null
[ "$(top1 --recency-half-life 10 --now 5000 --w-rel 0)" = 6 ] || { echo "the touch of id 6 did not last"; exit 1; }
[ "$(top1 --recency-half-life 10 --now 5000 --w-rel 0 --normalize)" = 6 ] || { echo "normalised recency top-1"; exit 1; }
usage_fails() {  # usage_fails <pattern> <command...>: status 2 and the message
  pattern=$1
  shift
  set +e
  "$@" > "$d/out.txt" 2> "$d/err.txt"
  st=$?
  set -e
  [ "$st" -eq 2 ] || { echo "status $st (want 2): $*"; cat "$d/err.txt"; exit 1; }
  grep -q -- "$pattern" "$d/err.txt" || { echo "no '$pattern' in:"; cat "$d/err.txt"; exit 1; }
}
usage_fails "recency-half-life must be > 0" "$mnemo" search --store "$d/act.mnemo" --queries "$d/q.fvecs" --k 1 --recency-half-life -5
usage_fails "now must be a finite number" "$mnemo" search --store "$d/act.mnemo" --queries "$d/q.fvecs" --k 1 --now nan
usage_fails "w-imp must be a finite number" "$mnemo" search --store "$d/act.mnemo" --queries "$d/q.fvecs" --k 1 --w-imp x
head -n 10 "$d/times.txt" > "$d/short.txt"
fails "holds 10 numbers for 3000 rows" "$mnemo" build --input "$d/b.fvecs" --out "$d/y.mnemo" --times "$d/short.txt"
echo nan > "$d/nan.txt"
fails "not a finite number" "$mnemo" build --input "$d/b.fvecs" --out "$d/y.mnemo" --importance "$d/nan.txt"

# The inverted-file index: built and saved with the store (plain and
# durable), evaluated at several nprobe against the truth and against the
# exact scan; nprobe = nlist is the exact search; bad options.
"$mnemo" build --input "$d/b.fvecs" --out "$d/ivf.mnemo" --index ivf --nlist 16 > "$d/build-ivf.txt"
grep -q "^index: ivf, 16 lists" "$d/build-ivf.txt" || { cat "$d/build-ivf.txt"; exit 1; }
"$mnemo" eval --store "$d/ivf.mnemo" --queries "$d/q.fvecs" --truth "$d/t.ivecs" --k 10 --nprobe 1,4,16 \
  > "$d/eval-ivf.txt" 2> /dev/null
grep -q "^recall@10 = 1.0000$" "$d/eval-ivf.txt" || { cat "$d/eval-ivf.txt"; exit 1; }
grep -q "^nprobe 16: recall@10 = 1.0000, batch of 40: .* queries/s" "$d/eval-ivf.txt" || { cat "$d/eval-ivf.txt"; exit 1; }
[ "$(grep -c "^nprobe [0-9]*: recall@10 = " "$d/eval-ivf.txt")" -eq 3 ] || { cat "$d/eval-ivf.txt"; exit 1; }
"$mnemo" eval --base "$d/b.fvecs" --queries "$d/q.fvecs" --k 10 --nprobe 2,16 --nlist 16 > "$d/eval-ivf2.txt" 2> /dev/null
grep -q "against the exact scan" "$d/eval-ivf2.txt" || { cat "$d/eval-ivf2.txt"; exit 1; }
grep -q "^nprobe 16: recall@10 = 1.0000, " "$d/eval-ivf2.txt" || { cat "$d/eval-ivf2.txt"; exit 1; }
"$mnemo" search --store "$d/ivf.mnemo" --queries "$d/q.fvecs" --k 20 --nprobe 16 --out "$d/r-ivf.ivecs" 2> /dev/null
cmp -s "$d/r-ivf.ivecs" "$d/t.ivecs" || { echo "search at nprobe = nlist differs from the truth"; exit 1; }
"$mnemo" search --store "$d/ivf.mnemo" --queries "$d/q.fvecs" --k 5 --nprobe 1 --out "$d/r-ivf1.tsv" 2> /dev/null
[ "$(wc -l < "$d/r-ivf1.tsv")" -eq 201 ] || { echo "expected 200 result lines at nprobe 1"; exit 1; }
"$mnemo" build --input "$d/b.fvecs" --out "$d/dur-ivf.mnemo" --durable --index ivf --nlist 8 > /dev/null
"$mnemo" eval --store "$d/dur-ivf.mnemo" --durable --queries "$d/q.fvecs" --truth "$d/t.ivecs" --k 10 --nprobe 8 \
  > "$d/eval-dur.txt" 2> /dev/null
grep -q "^index: ivf, 8 lists" "$d/eval-dur.txt" || { cat "$d/eval-dur.txt"; exit 1; }
grep -q "^nprobe 8: recall@10 = 1.0000, " "$d/eval-dur.txt" || { cat "$d/eval-dur.txt"; exit 1; }
usage_fails "index must be ivf or none" "$mnemo" build --input "$d/b.fvecs" --out "$d/z.mnemo" --index hnsw
usage_fails "nlist needs --index ivf" "$mnemo" build --input "$d/b.fvecs" --out "$d/z.mnemo" --nlist 8
usage_fails "nprobe wants whole numbers" "$mnemo" eval --store "$d/ivf.mnemo" --queries "$d/q.fvecs" --k 10 --nprobe 1,x
usage_fails "nprobe wants whole numbers" "$mnemo" eval --store "$d/ivf.mnemo" --queries "$d/q.fvecs" --k 10 --nprobe 0
usage_fails "truth FILE is needed" "$mnemo" eval --store "$d/ivf.mnemo" --queries "$d/q.fvecs" --k 10
fails "has no index for --nprobe" "$mnemo" eval --store "$d/s.mnemo" --queries "$d/q.fvecs" --truth "$d/t.ivecs" --k 10 --nprobe 4
echo "cli flow: all steps passed"
