#!/bin/sh
# The mnemo tool end to end on a small generated set: build, search (.tsv and
# .ivecs), eval with recall 1.0 for exact search, the inverted-file index
# (build --index ivf, eval --nprobe, search --nprobe), fields and filters
# (build --fields, search --where / --where-json), and clean failures (status
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
# Fields and filters: build --fields (a JSON-lines file, a line a row),
# search --where and --where-json: every result matches, the two forms of
# one filter give the same results, a filter matching nothing pads, and
# malformed expressions and fields files fail with their place.
awk 'BEGIN { for (i = 0; i < 3000; i++)
  printf "{\"key\": \"k%d\", \"namespace\": \"users/%d\", \"tags\": [\"%s\"], \"attributes\": {\"year\": %d}}\n",
    i, i % 10, (i % 3 ? "misc" : "news"), 2000 + i % 25 }' > "$d/fields.jsonl"
"$mnemo" build --input "$d/b.fvecs" --out "$d/f.mnemo" --fields "$d/fields.jsonl" > /dev/null
"$mnemo" search --store "$d/f.mnemo" --queries "$d/q.fvecs" --k 10 --out "$d/rw.tsv" \
  --where 'year>=2020 and tag:news and ns:users/4/* and not key:k24' 2> "$d/rw.err"
want=$(awk 'BEGIN { for (i = 0; i < 3000; i++) n += (i % 3 == 0 && i % 25 >= 20 && i % 10 == 4 && i != 24); print n }')
grep -q "$want of 3000 memories match" "$d/rw.err" || { cat "$d/rw.err"; exit 1; }
[ "$(wc -l < "$d/rw.tsv")" -eq $((40 * 10 + 1)) ] || { echo "expected 400 scoped result lines"; exit 1; }
awk -F'\t' 'NR > 1 { i = $3; if (!(i % 3 == 0 && i % 25 >= 20 && i % 10 == 4 && i != 24)) { print "id " i " does not match"; bad = 1 } }
  END { exit bad }' "$d/rw.tsv"
"$mnemo" search --store "$d/f.mnemo" --queries "$d/q.fvecs" --k 10 --out "$d/rj.tsv" 2> /dev/null --where-json \
  '{"year": {"$gte": 2020}, "$tags": "news", "$namespace": {"$under": "users/4"}, "$not": {"$key": "k24"}}'
cmp -s "$d/rw.tsv" "$d/rj.tsv" || { echo "--where and --where-json differ"; exit 1; }
# The same search as JSON lines carries each result's fields, as the
# fields file gave them.
"$mnemo" search --store "$d/f.mnemo" --queries "$d/q.fvecs" --k 10 --out "$d/rw.jsonl" 2> /dev/null \
  --where 'year>=2020 and tag:news and ns:users/4/* and not key:k24'
python3 - "$d/rw.tsv" "$d/rw.jsonl" <<'PY' || exit 1
import json, sys
tsv = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
rows = [json.loads(l) for l in open(sys.argv[2])]
assert [(int(q), int(r), int(i)) for q, r, i, _ in tsv] == [(o["query"], o["rank"], o["id"]) for o in rows], "ids differ"
for o in rows:
    i = o["id"]
    want = {"key": f"k{i}", "namespace": ["users", str(i % 10)], "tags": ["news" if i % 3 == 0 else "misc"],
            "attributes": {"year": 2000 + i % 25}}
    got = {f: o.get(f) for f in want}
    assert got == want, (i, got, want)
    assert abs(o["score"] - float(tsv[rows.index(o)][3])) <= 1e-6 * max(1, abs(o["score"])), "score differs"
PY
# The same store laid out by namespace (build --cluster) answers alike.
"$mnemo" build --input "$d/b.fvecs" --out "$d/fc.mnemo" --fields "$d/fields.jsonl" --cluster > /dev/null
"$mnemo" search --store "$d/fc.mnemo" --queries "$d/q.fvecs" --k 10 --out "$d/rc.tsv" 2> /dev/null \
  --where 'year>=2020 and tag:news and ns:users/4/* and not key:k24'
cmp -s "$d/rw.tsv" "$d/rc.tsv" || { echo "the clustered store's scoped results differ"; exit 1; }
"$mnemo" search --store "$d/fc.mnemo" --queries "$d/q.fvecs" --k 10 --out "$d/rc4.tsv" 2> /dev/null --where 'ns:users/4'
"$mnemo" search --store "$d/f.mnemo" --queries "$d/q.fvecs" --k 10 --out "$d/rf4.tsv" 2> /dev/null --where 'ns:users/4'
cmp -s "$d/rf4.tsv" "$d/rc4.tsv" || { echo "the clustered store's namespace results differ"; exit 1; }
"$mnemo" search --store "$d/f.mnemo" --queries "$d/q.fvecs" --k 3 --where 'id:7' --out "$d/r1.tsv" 2> /dev/null
[ "$(wc -l < "$d/r1.tsv")" -eq 41 ] || { echo "expected one result a query for id:7"; exit 1; }
usage_fails "where: column 9: expected a value after '>='" \
  "$mnemo" search --store "$d/f.mnemo" --queries "$d/q.fvecs" --k 3 --where 'year >= and tag:news'
usage_fails "where-json: column 9: not JSON" "$mnemo" search --store "$d/f.mnemo" --queries "$d/q.fvecs" --k 3 --where-json '{"year":'
printf '{}\n{"tags": "news"}\n' > "$d/bad-fields.jsonl"
fails "bad-fields.jsonl:2: \"tags\" must be a list of strings" \
  "$mnemo" build --input "$d/b.fvecs" --out "$d/z.mnemo" --fields "$d/bad-fields.jsonl"

echo "cli flow: all steps passed"
