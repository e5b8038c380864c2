#!/usr/bin/env bash
# The precision fuzzer against the CUDA backend on the GPU machine.
#
#   scripts/device-fuzz.sh bundle DIR           on the build machine: builds the
#       libFuzzer binary fuzz_precision (clang, ASan+UBSan, CUDA off: the CUDA
#       backend is the module libmnemo_cuda.so that scripts/device-test.sh
#       bundle puts in .device/lib) in build-fuzz/ and copies it, the
#       non-system shared libraries it needs and the seed corpus into DIR.
#   scripts/device-fuzz.sh run DIR OUT SECONDS  on the GPU machine: runs it for
#       SECONDS with MNEMO_BACKEND_DIR pointing at the CUDA module
#       (default .device/lib) and MNEMO_FUZZ_REQUIRE_CUDA=1, so a run that
#       cannot load the CUDA backend fails instead of fuzzing the CPU alone.
#       Every input goes through the CPU, CUDA EXACT and CUDA FAST runtimes,
#       each against the float64 reference and CPU against GPU. It goes on
#       after a finding (fork mode); findings land in OUT/findings/, the log
#       in OUT/precision.log; executions, exec/s, coverage and findings are
#       printed last, with the kinds of finding from a replay of each.
#   scripts/device-fuzz.sh replay DIR FILE...   on the GPU machine: runs single
#       inputs (past findings) through the bundled binary and prints what fails.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

bundle() {
  set -e
  local dir=$1
  if [ ! -f build-fuzz/CMakeCache.txt ]; then
    CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMNEMO_BUILD_TESTS=OFF \
      -DMNEMO_BUILD_FUZZ=ON -DMNEMO_CUDA=OFF -DMNEMO_SANITIZE=address,undefined >/dev/null
  fi
  cmake --build build-fuzz -j"$(nproc)" --target fuzz_precision
  rm -rf "$dir" && mkdir -p "$dir/lib" "$dir/corpus"
  cp build-fuzz/bin/fuzz_precision "$dir/"
  # libmnemo is linked in statically (the sanitizer runtimes live in the
  # executable); what remains are this machine's libraries the GPU one may lack.
  ldd build-fuzz/bin/fuzz_precision | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libgcc_s.so* | libstdc++.so* | ld-linux*) ;;
      *) cp -L "$lib" "$dir/lib/" ;;
    esac
  done
  cp fuzz/corpus/precision/* "$dir/corpus/"
  du -sh "$dir"
}

# The GPU machine's environment for the bundled binary in $1.
gpu_env() {
  local dir=$1
  local backend_dir=${MNEMO_BACKEND_DIR:-$PWD/.device/lib}
  [ -f "$backend_dir/libmnemo_cuda.so" ] || { echo "no libmnemo_cuda.so in $backend_dir" >&2; return 2; }
  local cublas
  cublas=$(ldconfig -p | awk '/libcublas.so.13/ { print $NF; exit }')
  [ -n "$cublas" ] || cublas=$(find /usr/local /opt -name 'libcublas.so.13' 2>/dev/null | head -n1)
  export LD_LIBRARY_PATH="$PWD/$dir/lib:$backend_dir:$(dirname "${cublas:-/usr/local/cuda/lib64/x}"):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  export MNEMO_BACKEND_DIR=$backend_dir MNEMO_FUZZ_REQUIRE_CUDA=1
  # The CUDA driver maps memory where ASan keeps its shadow gap; its own
  # allocations at exit are not leaks of mnemo.
  export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0:abort_on_error=1:handle_segv=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
}

# What each finding says: the first failure line of a replay of each file.
explain() {
  local exe=$1
  shift
  local f
  for f in "$@"; do
    "$exe" "$f" 2>&1 | grep -m1 -E 'mnemo fuzz: [^b]|ERROR: AddressSanitizer|runtime error' | cut -c1-400
  done | sed -E 's/[0-9]+\.[0-9]+(e[-+][0-9]+)?/N/g' | sort | uniq -c | sort -rn
}

replay() {
  local dir=$1
  shift
  gpu_env "$dir" || return 2
  local f
  for f in "$@"; do
    echo "== $f"
    "$dir/fuzz_precision" "$f" 2>&1 | grep -E 'mnemo fuzz|ERROR|runtime error|Executed' | cut -c1-600
  done
}

run() {
  local dir=$1 out=$2 seconds=$3
  mkdir -p "$out/findings" "$out/corpus"
  cp -n "$dir"/corpus/* "$out/corpus/" 2>/dev/null
  gpu_env "$dir" || return 2
  local exe="$dir/fuzz_precision" log="$out/precision.log"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  # One pass over the seeds first: it must see the CUDA backends.
  "$exe" -runs=0 "$dir/corpus" >"$out/check.log" 2>&1
  grep -m1 'mnemo fuzz: backends' "$out/check.log"
  grep -q 'backends: cpu cuda cuda-fast' "$out/check.log" || {
    echo "the CUDA backend did not load:" >&2
    tail -n 20 "$out/check.log" >&2
    return 2
  }
  "$exe" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -max_total_time="$seconds" -timeout=60 -rss_limit_mb=16384 \
    -len_control=0 -max_len=1024 -artifact_prefix="$out/findings/" "$out/corpus" >"$log" 2>&1
  local rc=$?
  local last
  last=$(grep -E '^#[0-9]+' "$log" | tail -n1)
  echo "last status: $last"
  local n
  n=$(find "$out/findings" -type f | wc -l)
  echo "fuzz_precision on $(grep -m1 -o 'backends: .*' "$out/check.log"), ${seconds} s, exit $rc"
  local execs secs
  execs=$(sed -E 's/^#([0-9]+).*/\1/' <<<"$last")
  # "dft_time:" also ends in "time:"; take the field that stands alone.
  secs=$(grep -oE '(^| )time: [0-9]+' <<<"$last" | head -n1 | grep -oE '[0-9]+$')
  echo "  executions: $execs"
  echo "  exec/s:     $((execs / (${secs:-1} > 0 ? ${secs:-1} : 1))) (average; the last job's: $(grep -oE 'exec/s:? [0-9]+' <<<"$last" | grep -oE '[0-9]+$'))"
  echo "  cov:        $(grep -oE 'cov: [0-9]+' <<<"$last" | grep -oE '[0-9]+$')"
  echo "  ft:         $(grep -oE 'ft: [0-9]+' <<<"$last" | grep -oE '[0-9]+$')"
  echo "  findings:   $n"
  if [ "$n" -gt 0 ]; then
    echo "  kinds of finding (numbers masked), from a replay of each:"
    # shellcheck disable=SC2046
    explain "$exe" $(find "$out/findings" -type f | head -n 60) | head -n 30
    return 1
  fi
}

case "$mode" in
  bundle) shift; bundle "${1:?usage: $0 bundle DIR}" ;;
  run) shift; run "${1:?DIR}" "${2:?OUT}" "${3:?SECONDS}" ;;
  replay) shift; dir=${1:?DIR}; shift; replay "$dir" "$@" ;;
  *) echo "usage: $0 bundle DIR | run DIR OUT SECONDS | replay DIR FILE..." >&2; exit 2 ;;
esac
