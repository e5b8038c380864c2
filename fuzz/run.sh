#!/usr/bin/env bash
# Runs libFuzzer targets for a set time each and prints, per target, the
# executions, executions per second, coverage (cov: edges, ft: features),
# corpus size and findings.
#
#   fuzz/run.sh BIN_DIR WORK_DIR SECONDS TARGET...
#
# BIN_DIR holds fuzz_<target>; the committed seeds (fuzz/corpus/<target>) are
# read, new inputs go to WORK_DIR/corpus/<target>, findings (crash-, leak-,
# timeout-, oom- files) to WORK_DIR/findings/<target>/ and each log to
# WORK_DIR/<target>.log. Extra libFuzzer flags come from FUZZ_FLAGS
# (e.g. FUZZ_FLAGS="-fork=1 -ignore_crashes=1" to go on after a finding).
# FUZZ_JOBS targets run at a time (default 1; each is one process, so up to
# one a core), each still for SECONDS. Exit status 1 when any target has a
# finding.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 work=$2 seconds=$3
shift 3
jobs=${FUZZ_JOBS:-1}
mkdir -p "$work"
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for t in "$@"; do
  [ -x "$bin/fuzz_$t" ] || { echo "missing $bin/fuzz_$t" >&2; exit 2; }
done

# One target's run; its exit status goes to WORK_DIR/<target>.rc.
run_target() {
  local t=$1
  local corpus="$work/corpus/$t" findings="$work/findings/$t"
  mkdir -p "$corpus" "$findings"
  local seeds=() extra=()
  [ -d "$here/corpus/$t" ] && seeds+=("$here/corpus/$t")
  [ -d "$here/regressions/$t" ] && seeds+=("$here/regressions/$t")
  # fuzz_precision needs inputs of a few hundred bytes to build its rows:
  # start at full length instead of growing it slowly.
  [ "$t" = precision ] && extra=(-len_control=0 -max_len=1024)
  # shellcheck disable=SC2086
  "$bin/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=30 -rss_limit_mb=4096 -max_len=4096 \
    -artifact_prefix="$findings/" "${extra[@]}" ${FUZZ_FLAGS:-} "$corpus" "${seeds[@]}" >"$work/$t.log" 2>&1
  echo $? >"$work/$t.rc"
}

running=0
for t in "$@"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  echo "== fuzz_$t for ${seconds} s"
  run_target "$t" &
  running=$((running + 1))
done
wait

found=0
rows=()
for t in "$@"; do
  findings="$work/findings/$t" log="$work/$t.log"
  rc=$(cat "$work/$t.rc")
  execs=$(awk -F: '/stat::number_of_executed_units/ { gsub(/ /, "", $2); s += $2 } END { print s + 0 }' "$log")
  eps=$(awk -F: '/stat::average_exec_per_sec/ { gsub(/ /, "", $2); print $2 }' "$log" | tail -n1)
  # Fork mode prints no final stats of its own: take the last status line.
  last=$(grep -E '^#[0-9]+' "$log" | tail -n1)
  [ "$execs" = 0 ] && execs=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")
  [ -z "$eps" ] && eps=$(grep -oE 'exec/s: [0-9]+' <<<"$last" | awk '{ print $2 }')
  cov=$(grep -oE 'cov: [0-9]+' <<<"$last" | awk '{ print $2 }')
  ft=$(grep -oE 'ft: [0-9]+' <<<"$last" | awk '{ print $2 }')
  corp=$(grep -oE 'corp: [0-9]+/[0-9]+[a-zA-Z]*' <<<"$last" | awk '{ print $2 }')
  # slow-unit- files are inputs that took over 10 s (libFuzzer's report
  # threshold), which a loaded machine can cause: named, not counted; a
  # hang is a timeout- file (-timeout=30).
  n=$(find "$findings" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  slow=$(find "$findings" -type f -name 'slow-unit-*' | wc -l)
  [ "$slow" -gt 0 ] && echo "   fuzz_$t: $slow input(s) slower than 10 s, kept in $findings (not findings)"
  [ "$n" -gt 0 ] && found=1
  [ "$rc" -ne 0 ] && [ "$n" -eq 0 ] && { found=1; n="rc=$rc"; }
  rows+=("$(printf '%-12s %10s %8s %7s %7s %12s %s' "$t" "${execs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$n")")
  if [ "$n" != 0 ]; then
    echo "   findings of fuzz_$t (log $log):"
    find "$findings" -type f ! -name 'slow-unit-*' | sed 's/^/     /'
    grep -m3 -E 'mnemo fuzz:|ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error' "$log" | sed 's/^/     /'
  fi
done
echo
printf '%-12s %10s %8s %7s %7s %12s %s\n' target execs exec/s cov ft corpus findings
printf '%s\n' "${rows[@]}"
exit $found
