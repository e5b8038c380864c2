#!/bin/sh
# make demo: the mnemo tool on a generated clustered data set (no download):
# build a store, search it, evaluate recall against brute-force truth, build
# an inverted-file index and evaluate it at several nprobe, then the C API
# example. Usage: run.sh <build folder>
set -eu
build=$1
mnemo=$build/bin/mnemo
data=$build/demo-data
mkdir -p "$data"
step() { printf '\n== %s\n' "$*"; }

step "mnemo info"
"$mnemo" info
step "mnemo gen: 50000 x 96 vectors in 64 clusters, 500 queries, exact top-100"
"$mnemo" gen --base "$data/base.fvecs" --queries "$data/queries.fvecs" --truth "$data/truth.ivecs" \
  --n 50000 --nq 500 --dim 96 --clusters 64 --k 100 --seed 42
step "mnemo build"
"$mnemo" build --input "$data/base.fvecs" --out "$data/demo.mnemo" --metric l2
step "mnemo search (first results)"
"$mnemo" search --store "$data/demo.mnemo" --queries "$data/queries.fvecs" --k 10 --out "$data/results.tsv"
head -n 6 "$data/results.tsv"
step "mnemo eval (exact search against brute-force truth)"
"$mnemo" eval --base "$data/base.fvecs" --queries "$data/queries.fvecs" --truth "$data/truth.ivecs" --k 10 \
  | tee "$data/eval.txt"
grep -q "^recall@10 = 1.0000$" "$data/eval.txt" || { echo "demo: exact search did not reach recall 1.0" >&2; exit 1; }
step "mnemo build --index ivf (k-means lists, saved with the store)"
"$mnemo" build --input "$data/base.fvecs" --out "$data/demo-ivf.mnemo" --metric l2 --index ivf
step "mnemo eval --nprobe 1,4,16,64 (the index against brute-force truth, beside the exact scan)"
"$mnemo" eval --store "$data/demo-ivf.mnemo" --queries "$data/queries.fvecs" --truth "$data/truth.ivecs" --k 10 \
  --nprobe 1,4,16,64 --latency-queries 100 | tee "$data/eval-ivf.txt"
grep -q "^recall@10 = 1.0000$" "$data/eval-ivf.txt" || { echo "demo: exact search of the indexed store did not reach recall 1.0" >&2; exit 1; }
ivf_recall=$(sed -n 's/^nprobe 64: recall@10 = \([0-9.]*\),.*/\1/p' "$data/eval-ivf.txt")
if [ -z "$ivf_recall" ] || ! awk -v r="$ivf_recall" 'BEGIN { exit !(r >= 0.9) }'; then
  echo "demo: recall@10 at nprobe 64 is ${ivf_recall:-missing}, below 0.9" >&2
  exit 1
fi
step "C API example"
(cd "$build" && ./bin/mnemo_demo)
printf '\ndemo: store %s, results %s, recall@10 = 1.0; indexed store %s, recall@10 at nprobe 64 = %s\n' \
  "$data/demo.mnemo" "$data/results.tsv" "$data/demo-ivf.mnemo" "$ivf_recall"
