#!/usr/bin/env bash
# Every GPU test and benchmark of mnemo, in one call on the GPU machine.
#
#   scripts/device-test.sh bundle      on the build machine (no GPU needed): builds
#                                      build-device/ with the CUDA module for sm_80 and
#                                      sm_90 and copies the binaries, libraries and the
#                                      non-system shared libraries they need into .device/
#   scripts/device-test.sh run [OUT]   on the GPU machine (CUDA 13, PyTorch, no Debian
#                                      extras): GPU tests (also under compute-sanitizer),
#                                      the ABI suite on the CUDA backend, the Python tests
#                                      on CUDA, the GPU benchmark against PyTorch; logs and
#                                      results into OUT ($OUT, else ./device-out), then a
#                                      short table last.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

bundle() {
  set -e
  # MNEMO_BUNDLE_BUILD / MNEMO_BUNDLE_ARCHS: another build folder and
  # architectures (e.g. build90 and 90-real for a quicker H100/H200-only
  # bundle); MNEMO_BUNDLE_QUICK=1 leaves out the fuzzer and the Rust tests.
  local dir=${MNEMO_BUNDLE_BUILD:-build-device}
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMNEMO_CUDA=ON -DMNEMO_BUILD_TESTS=ON \
    -DMNEMO_BUILD_BENCH=ON "-DCMAKE_CUDA_ARCHITECTURES=${MNEMO_BUNDLE_ARCHS:-80-real;90-real;90-virtual}" >/dev/null
  cmake --build "$dir" -j"$(nproc)"
  # Staged here, then packed: the uncompressed bundle (OpenBLAS alone is
  # 36 MB) would not fit what travels to the GPU machine.
  rm -rf .device && mkdir -p .device/bin .device/lib
  for b in mnemo_tests mnemo_gpu_tests mnemo_gpu_kernel_tests mnemo_core_tests mnemo_gpu_bench mnemo_multi_bench mnemo_activation_bench mnemo_demo; do
    cp "$dir/bin/$b" .device/bin/
  done
  cp -P "$dir"/lib/libmnemo.so* "$dir"/lib/libmnemo_cuda.so .device/lib/
  # Shared libraries from this machine's packages that the GPU machine lacks
  # (OpenMP, xxHash, Highway, OpenBLAS and its Fortran runtime, ...): every
  # non-system, non-CUDA library the binaries and libraries load.
  ldd .device/bin/* .device/lib/*.so* 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    while read -r lib; do
      case "$(basename "$lib")" in
        libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libgcc_s.so* | libstdc++.so* | ld-linux* | \
          libcuda.so* | libcublas* | libcudart* | libmnemo*) ;;
        *) cp -L "$lib" .device/lib/ ;;
      esac
    done
  # The precision fuzzer for the CUDA backend (clang, ASan+UBSan).
  [ -n "${MNEMO_BUNDLE_QUICK:-}" ] || bash scripts/device-fuzz.sh bundle .device/fuzz
  # The Rust differential tests against this build (the GPU machine has no
  # Rust toolchain, so the test binary travels).
  if [ -z "${MNEMO_BUNDLE_QUICK:-}" ] && command -v cargo >/dev/null 2>&1; then
    local rbin
    rbin=$(MNEMO_LIB_DIR="$PWD/$dir/lib" CARGO_TARGET_DIR="$PWD/$dir/cargo" \
      cargo test --release --no-run --test differential --message-format=json 2>/dev/null |
      python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "differential":
        print(m["executable"])')
    [ -n "$rbin" ] && cp "$rbin" .device/bin/rust_differential
  fi
  strip --strip-unneeded .device/bin/* .device/lib/*.so* 2>/dev/null || true
  rm -rf "$dir/stage" && mv .device "$dir/stage" && mkdir .device
  tar -C "$dir/stage" -cf - . | xz -T2 -6 >.device/bundle.tar.xz
  du -sh "$dir/stage" .device/bundle.tar.xz
}

# Unpacks the bundle once and points the loader at its libraries.
setup() {
  [ -f .device/bundle.tar.xz ] && [ ! -d .device/bin ] &&
    python3 -c 'import tarfile; tarfile.open(".device/bundle.tar.xz").extractall(".device")'
  local cublas
  cublas=$(ldconfig -p | awk '/libcublas.so.13/ { print $NF; exit }')
  [ -n "$cublas" ] || cublas=$(find /usr/local /opt -name 'libcublas.so.13' 2>/dev/null | head -n1)
  export LD_LIBRARY_PATH="$PWD/.device/lib:$(dirname "${cublas:-/usr/local/cuda/lib64/x}"):/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
  export MNEMO_BACKEND_DIR="$PWD/.device/lib"
}

# The profile modes' start: the bundle set up, OUT made, and the caller's
# `ncu` set to the profiler's path (fails without one). Called directly, not
# in a subshell, so that setup's exports reach the caller.
profile_start() {
  setup
  mkdir -p "$1"
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -n1)
  [ -n "$ncu" ] || { echo "no ncu on this machine" >&2; return 1; }
}

# Nsight Compute figures of the single-query search kernels (the fused scan,
# the merge of the block lists, the emit): full sections for the first
# search of the benchmark (1q x 1M x 768 f32), then the duration and DRAM
# throughput of every launch of the first searches, 10k rows included.
profile() {
  local out=${1:-${OUT:-device-out}} ncu
  profile_start "$out" || return 1
  local kernels='regex:scan_topk|merge_kernel|emit_kernel'
  timeout 240 "$ncu" --clock-control none -k "$kernels" --launch-count 3 --section SpeedOfLight \
    --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats \
    .device/bin/mnemo_gpu_bench "$out/profiled-bench.jsonl" >"$out/ncu-search-1m.txt" 2>&1
  echo "full sections: exit $?"
  timeout 240 "$ncu" --clock-control none -k "$kernels" --launch-count 240 --csv --print-units base \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size \
    .device/bin/mnemo_gpu_bench "$out/profiled-bench2.jsonl" >"$out/ncu-search-durations.csv" 2>&1
  echo "durations: exit $?"
  grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Size|Grid Size|Stall|Warp Cycles Per Issued|Eligible|Issued Warp" \
    "$out/ncu-search-1m.txt" | head -n 90
  python3 - "$out/ncu-search-durations.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    sys.exit("no rows")
h = rows[0]; ki = h.index("Kernel Name"); mi = h.index("Metric Name"); vi = h.index("Metric Value"); ii = h.index("ID")
per = collections.OrderedDict()
for r in rows[1:]:
    per.setdefault(r[ii], {"k": r[ki].split("(")[0].split("<")[0]})[r[mi]] = r[vi]
runs = collections.OrderedDict()
for v in per.values():
    key = (v["k"], v.get("launch__grid_size"))
    runs.setdefault(key, []).append((float(v.get("gpu__time_duration.sum", "nan").replace(",", "")),
                                     v.get("dram__throughput.avg.pct_of_peak_sustained_elapsed")))
for (k, g), xs in runs.items():
    ts = sorted(x[0] for x in xs)
    print(f"{k:22s} grid {g:>8s} launches {len(xs):4d} median {ts[len(ts)//2]:10.0f} ns dram% {xs[len(xs)//2][1]}")
PY
}

# Nsight Compute of the recall rows furthest from their targets, one launch
# each (the 10000-query f16 batch, the 100-query FAST batch, the 10k- and
# 100k-row single-query scans), with the per-issue stall ratios; a short
# extract last.
profile_rows() {
  local out=${1:-${OUT:-device-out}} ncu
  profile_start "$out" || return 1
  local stalls='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
  local batch=(--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis
    --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats
    --section InstructionStats --metrics "$stalls")
  local scan=(--cache-control none --section SpeedOfLight --section Occupancy --section WarpStateStats
    --section LaunchStats --metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max)
  one() {  # one NAME ROW KERNEL SKIP COUNT ARGS...
    local name=$1 only=$2 kernel=$3 skip=$4 count=$5
    shift 5
    MNEMO_BENCH_ONLY="$only" timeout 150 "$ncu" --clock-control none -k "regex:$kernel" --launch-skip "$skip" \
      --launch-count "$count" "$@" .device/bin/mnemo_gpu_bench "$out/prof-$name.jsonl" >"$out/ncu-$name.txt" 2>&1
    echo "ncu $name: exit $?"
  }
  one short-f16 "10000q x 1M x 128 f16" fused_short_kernel 6 1 "${batch[@]}"
  one wide-fast "100q x 1M x 768 f32 k=10" fused_wide_kernel 20 2 "${batch[@]}"
  one scan-10k "1q x 10k x 768 f32" scan_topk 20 1 "${scan[@]}"
  one scan-100k "1q x 100k x 768 f32" scan_topk 20 1 "${scan[@]}"
  local f
  for f in "$out"/ncu-*.txt; do
    echo "== $f"
    grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|L2 Cache Throughput|Issue Slots Busy|Executed Ipc Active|Achieved Occupancy|Registers Per|Grid Size|Warp Cycles Per Issued|Eligible Warps|sm__cycles|stalled_(wait|long|short|barrier|math)" "$f" | head -n 40
  done
  return 0
}

run() {
  local out=${1:-${OUT:-device-out}}
  setup
  mkdir -p "$out"
  local log="$out/tests.log"
  : >"$log"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$log" 2>&1
  declare -a names results
  step() {  # step NAME TIMEOUT CMD...: runs one step, logs it, records pass/fail
    local name=$1 limit=$2
    shift 2
    # MNEMO_STEP_SKIP (an extended regex on step names): steps left for
    # another call, so that a part fits a call's time limit; recorded as
    # skipped, never as passed.
    if [ -n "${MNEMO_STEP_SKIP:-}" ] && [[ $name =~ $MNEMO_STEP_SKIP ]]; then
      names+=("$name")
      results+=("skipped (MNEMO_STEP_SKIP)")
      return 0
    fi
    echo "===== $name: $*" >>"$log"
    local t0=$SECONDS
    timeout "$limit" "$@" >>"$log" 2>&1
    local rc=$?
    names+=("$name")
    results+=("$([ $rc -eq 0 ] && echo pass || echo "FAIL rc=$rc") ($((SECONDS - t0)) s)")
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? (passed|failed)|[0-9]+ passed|[0-9]+ failed" "$log" | tail -n 3 >/dev/null
  }
  # compute-sanitizer memcheck and racecheck over subsets that reach every
  # GPU kernel, the four steps at once (one process each on the GPU): one
  # after another they ran past the 10-minute limit of a call.
  # bg_step NAME LIMIT CMD...: starts one step, its log and status in OUT.
  local -a bg_names=() bg_pids=()
  bg_step() {
    local name=$1 limit=$2 i=${#bg_names[@]}
    shift 2
    if [ -n "${MNEMO_STEP_SKIP:-}" ] && [[ $name =~ $MNEMO_STEP_SKIP ]]; then
      names+=("$name")
      results+=("skipped (MNEMO_STEP_SKIP)")
      return 0
    fi
    (
      t0=$SECONDS
      timeout "$limit" "$@" >"$out/sanitizer$i.log" 2>&1
      echo "$? $((SECONDS - t0))" >"$out/sanitizer$i.rc"
    ) &
    bg_names+=("$name")
    bg_pids+=($!)
  }
  # Waits for every started step and records it as step does.
  bg_join() {
    local i rc secs
    for i in "${!bg_pids[@]}"; do
      wait "${bg_pids[$i]}"
      read -r rc secs <"$out/sanitizer$i.rc" || { rc=1 secs=0; }
      echo "===== ${bg_names[$i]}" >>"$log"
      cat "$out/sanitizer$i.log" >>"$log"
      names+=("${bg_names[$i]}")
      results+=("$([ "$rc" -eq 0 ] && echo pass || echo "FAIL rc=$rc") ($secs s)")
    done
    bg_names=() bg_pids=()
  }
  sanitizers() {
  bg_step "memcheck (subset)" 540 compute-sanitizer --tool memcheck --error-exitcode 3 .device/bin/mnemo_gpu_tests \
    --gtest_brief=1 "--gtest_filter=*n31_*:*n20_*:GpuSearchTies.*:GpuStore.UpdatesReachTheDevice:*F16_Cosine_d768_n5000*:*F32_L2sq_d96_n6000_q17_k300_fast*:*GpuPairs.*_d127_*:*GpuPairs.*F32_L2sq_d771*:*GpuResample.*_d3*:*GpuResample.*s20000*:*GpuNorm.*d127:*GpuNorm.*d4097:GpuDevicePointers.*:GpuStore.StatsCountDeviceBytes:GpuDeviceSearch.*:GpuDeviceSimilarity.*:*n30011*:*GpuActivation.SmallStores/*:GpuActivationCases.*:*n6001_q70_k10_fast*:*n20_q16_k20_fast*:*n30011_q130_k16_fast*:GpuSearchGraph.*:*_n7_q1_k5_*:*_n1001_q1_k32_*:*_n40_q1_k40_*:*_n2999_q1_k256_*:*n12007_q150*:*n6007_q257*:*n9001_q23*:*n8009_q300*:*n3001_q11_k7*:*n30_q16_k30*:*n20011_q100*:*n7_q16_k7*:*n5003_q113*:*n3001_q40*:*n9000_q250*:*d300_n7_q16_k7_exact*:*d136_n3001_q40_k10_exact*:*n50_q16_k50*:*n100003_q17*:*n70001_q1_*:*n5003_q1_k300*:*n4099_q3_k400*:*n300_q1_k300*:GpuSimilarity.FastBf16*:*F32_*_d100_n6001_q70_k10_fast:*F32_Cosine_d128_n12007_q150_k10_fast:*F32_Dot_d24_n30_q16_k30_fast:*F32_Dot_d768_n12345_q16_k16_fast:*F32_L2sq_d136_n3001_q40_k10_fast:*F16_Cosine_d200_n30011_q130_k16_fast:*BF16_Cosine_d384_n9000_q250_k5_fast-GpuActivationCases.QueryChunksOfASmallWorkspace"
  bg_step "racecheck (subset)" 540 compute-sanitizer --tool racecheck --error-exitcode 3 .device/bin/mnemo_gpu_tests \
    --gtest_brief=1 "--gtest_filter=*n31_*:*F16_Cosine_d127_n4000*:*F32_Dot_d100_n6000_q40_k100_fast*:*BF16_Cosine_d96_n6000_q17_k300_exact*:*GpuPairs.*F16_Cosine_d1024_n40000*:*GpuResample.*_d64_*:*GpuNorm.*d768:*GpuNorm.*d4097:*F32_Cosine_d96_n30011*:GpuDeviceSearch.TiesBeyondThePrefilterFallBack:*F16_L2sq_d5_n20_q16_k20_fast*:*BF16_Dot_d100_n6001_q70_k10_fast*:GpuSearchGraph.FiltersChangeBetweenReplays:*F16_L2sq_d512_n1001_q1_k32*:*BF16_Dot_d1024_n40_q1_k40*:*F16_L2sq_d768_n2999_q1_k256*:*n6007_q257*:*n9001_q23*:*n30_q16_k30*:*n7_q16_k7*:*n5003_q113*:*n3001_q40*:*n9000_q250*:*d300_n7_q16_k7_exact*:*d136_n3001_q40_k10_exact*:*n50_q16_k50*:*n300_q1_k300*:GpuSearchTies.*:*F32_*_d100_n6001_q70_k10_fast:*F32_Cosine_d128_n12007_q150_k10_fast:*F32_Dot_d24_n30_q16_k30_fast:*F32_Dot_d768_n12345_q16_k16_fast:*F32_L2sq_d136_n3001_q40_k10_fast:*F16_Cosine_d200_n30011_q130_k16_fast:*BF16_Cosine_d384_n9000_q250_k5_fast"
  # The short-row scans (4, 8, 16 and 32 lanes a row, one to five queries)
  # and the sampled bound of single queries (its sampling and selection
  # kernels, the bounded scans, the bulk-copy scan from a bound).
  bg_step "memcheck + racecheck (short rows, sampled bound)" 400 bash -c 'f="*_d3_n60013_q2_*:*_d17_n60013_q5_k31_*:*_d64_n60013_q5_*:*_d33_n60013_q1_*:*_d1000_n17011_q5_*:*n40_q3_k100*"
    compute-sanitizer --tool memcheck --error-exitcode 3 .device/bin/mnemo_gpu_tests --gtest_brief=1 \
      "--gtest_filter=$f:*n700_q2_k2048*:*SampledBoundOnShortRows/F16_Cosine_plain:GpuSearchTies.RowsAtTheSampledBound*" &&
    compute-sanitizer --tool racecheck --error-exitcode 3 .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=$f"'
  # The tensor-core scan: one, two and four queries a pass, every list
  # kind, rows of one to four chunks and of the run-time width.
  bg_step "memcheck + racecheck (tensor-core scan)" 400 bash -c 'f="*F16_Cosine_d768_n5000_q1*:*F16*_d5_n31_q2*:*F16*_d127_n4000_q6*:*_d17_n60013_q5_k31_*:*_d64_n60013_q5_*:*_d33_n60013_q1_*:*n40_q3_k100*:*F16*_n1001_q1_k32*:*F16*_n2999_q1_k256*:GpuSearchTies.*"
    compute-sanitizer --tool memcheck --error-exitcode 3 .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=$f" &&
    compute-sanitizer --tool racecheck --error-exitcode 3 .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=$f"'
  # The GPU merge of sharded results, called directly.
  # Filters on the device: the programs' count and write passes, the span
  # scan over per-query tables, and the host's lists past the programs.
  bg_step "memcheck + racecheck (filtered plans)" 400 bash -c 'f="GpuFields.FilteredSearchesMatchTheModel:GpuFields.EachQueryItsOwnFilter:GpuFields.BiasAndActivationOnTheSelectivePlan:GpuFields.NumbersCompareExactlyOnTheDevice:GpuFields.FiltersTooDeepForAProgramStayCorrect"
    compute-sanitizer --tool memcheck --error-exitcode 3 .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=$f" &&
    compute-sanitizer --tool racecheck --error-exitcode 3 .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=$f"'
  # The staged gather on every list (gather_scan.cu), 16-bit rows.
  bg_step "memcheck + racecheck (staged gather)" 400 bash -c 'export MNEMO_GATHER_MIN_ROWS=1
    compute-sanitizer --tool memcheck --error-exitcode 3 .device/bin/mnemo_gpu_tests --gtest_brief=1 \
      "--gtest_filter=Dtypes/GpuGatherDtype.*/F16:GpuFields.EachQueryItsOwnFilter" &&
    compute-sanitizer --tool racecheck --error-exitcode 3 .device/bin/mnemo_gpu_tests --gtest_brief=1 \
      "--gtest_filter=Dtypes/GpuGatherDtype.*/BF16:GpuFields.BiasAndActivationOnTheSelectivePlan"'
  bg_step "memcheck + racecheck (part merge)" 300 bash -c 'compute-sanitizer --tool memcheck --error-exitcode 3 \
    .device/bin/mnemo_gpu_kernel_tests --gtest_brief=1 && compute-sanitizer --tool racecheck --error-exitcode 3 \
    .device/bin/mnemo_gpu_kernel_tests --gtest_brief=1'
  # The activation kernels on their own, plain and normalised apart: racecheck
  # of their sweeps takes minutes.
  bg_step "racecheck (activation, plain)" 540 compute-sanitizer --tool racecheck --error-exitcode 3 \
    .device/bin/mnemo_gpu_tests --gtest_brief=1 \
    "--gtest_filter=*GpuActivation.SmallStores/F32_Cosine_plain:GpuActivationCases.DeviceEntryPointMatchesHostCall"
  # The memory terms formed ahead of the scan, on the small stores too.
  # (racecheck of the small stores' sweep alone passed 200 s).
  bg_step "memcheck + racecheck (activation terms ahead)" 540 bash -c 'f=GpuActivationCases.DeviceEntryPointMatchesHostCall
    MNEMO_ACT_TERMS=1 compute-sanitizer --tool memcheck --error-exitcode 3 .device/bin/mnemo_gpu_tests --gtest_brief=1 \
      "--gtest_filter=*GpuActivation.SmallStores/F32_Cosine_plain:$f" &&
    MNEMO_ACT_TERMS=1 compute-sanitizer --tool racecheck --error-exitcode 3 .device/bin/mnemo_gpu_tests --gtest_brief=1 \
      "--gtest_filter=$f"'
  bg_step "racecheck (activation, normalised)" 540 compute-sanitizer --tool racecheck --error-exitcode 3 \
    .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=*GpuActivation.SmallStores/F32_Cosine_normalized"
  bg_join
  }
  # MNEMO_RUN_PART=tests runs the suites only, =bench the benchmark and its
  # peers only, =user the Python user-level benchmark (calls that each fit a
  # 10-minute limit); unset, all three. =ivf the index benchmark alone.
  # =sanitizers runs only the compute-sanitizer steps, so that they can run
  # beside tests with MNEMO_SKIP_SANITIZERS=1 (two OUT folders).
  # The Python extension, built here for this machine's python3 against the
  # bundle's libmnemo (the build machine's Python may differ), and the
  # variables that point the package at both.
  local -a pyenv=(MNEMO_LIBRARY="$PWD/.device/pyext/lib/libmnemo.so.1" MNEMO_BACKEND_DIR="$PWD/.device/lib"
    PYTHONPATH="$PWD/python")
  py_ext() {
    [ -f .device/pyext/lib/libmnemo.so.1 ] ||
      step "python extension" 240 env MNEMO_LIB_DIR=.device/lib bash scripts/py-ext-build.sh .device/pyext
  }
  local part=${MNEMO_RUN_PART:-all}
  if [ "$part" = sanitizers ]; then
    sanitizers
  elif [ "$part" = tests ] || [ "$part" = all ]; then
  # The whole GPU suite in MNEMO_TEST_SHARDS (4) processes at once: its time
  # is mostly the float64 reference on the CPU (over 420 s in one process on
  # an H100 host), and the GPU machine has 16 cores.
  # shards OUT TAG CMD...: CMD in MNEMO_TEST_SHARDS gtest shards at once,
  # logs in OUT/TAG-shardI.log (a script, so that step's timeout can run it).
  local shards='n=${MNEMO_TEST_SHARDS:-4} out=$1 tag=$2; shift 2
    pids=(); for ((i = 0; i < n; ++i)); do
      GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i "$@" >"$out/$tag-shard$i.log" 2>&1 & pids+=($!)
    done
    rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
    cat "$out/$tag"-shard*.log; exit $rc'
  step "gpu tests" 420 bash -c "$shards" shards "$out" gpu .device/bin/mnemo_gpu_tests --gtest_brief=1
  step "gpu kernel tests" 120 .device/bin/mnemo_gpu_kernel_tests --gtest_brief=1
  # The first fused GEMM + selection forced on everywhere it can run (short
  # rows take the short-row kernel by default).
  # In shards too: in one process it ran past 200 s on an H100 host.
  step "gpu tests (fused forced)" 300 bash -c "$shards" shards "$out" fused env MNEMO_FUSED_GEMM=1 MNEMO_FUSED_SHORT=0 \
    .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=*GpuSearch*fast*:*GpuActivation*"
  # The wide-row kernel on short rows too (they take the short-row kernel by
  # default).
  step "gpu tests (wide forced)" 300 bash -c "$shards" shards "$out" wide env MNEMO_FUSED_SHORT=0 \
    .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=*GpuSearch*fast*"
  # The short-row kernel's sampling pass with one block a query tile, which
  # walks the first tiles of every chunk (by default a block takes one or a
  # few), and with the pass off.
  step "gpu tests (short sampling by one walker)" 300 bash -c "$shards" shards "$out" walk1 \
    env MNEMO_FUSED_SHORT_WALKERS=1 .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=*GpuSearch*fast*"
  step "gpu tests (short sampling off)" 300 bash -c "$shards" shards "$out" nosample \
    env MNEMO_FUSED_SHORT_SAMPLE=0 .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=*GpuSearch*fast*"
  # Activation searches with the memory terms formed ahead of the scan at
  # every store size (by default from 2^17 slots).
  step "gpu tests (activation terms ahead)" 300 bash -c "$shards" shards "$out" actterms env MNEMO_ACT_TERMS=1 \
    .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=*GpuActivation*:GpuSearchGraph.*"
  # Up to four queries over 16-bit rows on the row-by-row scans too (the
  # suites above take the tensor-core scan for them): the bulk-copy scan,
  # then the register-fed scan.
  step "gpu tests (tensor-core scan off)" 200 env MNEMO_SCAN_MMA=0 .device/bin/mnemo_gpu_tests --gtest_brief=1 \
    "--gtest_filter=*GpuSearch.*F16*:*GpuSearch.*BF16*:GpuSearchTies.*:GpuSearchBits.*"
  step "gpu tests (bulk scan off)" 200 env MNEMO_SCAN_MMA=0 MNEMO_SCAN_BULK=0 .device/bin/mnemo_gpu_tests --gtest_brief=1 \
    "--gtest_filter=*GpuSearch.*_q1_*"
  # Lists of 129-256 entries, and 2-4 queries over f32 rows past 256 dims,
  # on the single-pass scans as routed before (by default exact keys of
  # every row and the radix selection take them).
  step "gpu tests (scan lists up to 256)" 300 bash -c "$shards" shards "$out" lists256 env MNEMO_SCAN_LIST_MAX=256 \
    .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=*GpuSearch.*:GpuSearchTies.*:GpuSearchBits.*"
  # The short-row and long-list single-query cases on the scans as they were
  # before: a warp a row, and no sampled bound.
  step "gpu tests (short rows off)" 200 bash -c "$shards" shards "$out" shortoff env MNEMO_SCAN_MMA=0 MNEMO_SCAN_SHORT=0 \
    .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=*GpuSearch.*_q1_*:*GpuSearch.*_q2_*:*GpuSearch.*_q5_*:GpuSearchTies.*"
  step "gpu tests (sampled bound off)" 200 bash -c "$shards" shards "$out" sampleoff env MNEMO_SCAN_SAMPLE=0 \
    .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=*GpuSearch.*_q1_*:*GpuSearch.*_q2_*:*GpuSearch.*_q5_*:GpuSearchTies.*"
  step "gpu tests (lists folded)" 200 bash -c "$shards" shards "$out" fold env MNEMO_SCAN_FOLD=1 \
    .device/bin/mnemo_gpu_tests --gtest_brief=1 "--gtest_filter=*GpuSearch.*_q1_*:*GpuSearch.*_q2_*:*GpuSearch.*_q5_*:GpuSearchTies.*"
  # The staged gather on every list, however short (by default a pass takes
  # it where its longest list times its queries reaches 131072 slots).
  step "gpu tests (staged gather on every list)" 200 env MNEMO_GATHER_MIN_ROWS=1 .device/bin/mnemo_gpu_tests \
    --gtest_brief=1 "--gtest_filter=*GpuGather*:GpuFields.*:*GpuIvf*"
  step "abi suite on CUDA" 150 env MNEMO_TEST_BACKEND=cuda .device/bin/mnemo_tests --gtest_brief=1
  [ -n "${MNEMO_SKIP_SANITIZERS:-}" ] || sanitizers
  if python3 -c "import numpy, pytest" 2>/dev/null; then
    py_ext
    step "python on CUDA" 240 env "${pyenv[@]}" MNEMO_TEST_CUDA=1 python3 -m pytest -q -p no:cacheprovider python/tests
    # 1q x 1M x 768 search from a torch CUDA tensor against torch.topk(q @ X.T).
    step "torch tensor search" 300 env "${pyenv[@]}" python3 python/tests/bench_torch_search.py "$out/torch_search.txt"
  fi
  if [ -x .device/bin/rust_differential ]; then
    step "rust differential" 300 env MNEMO_TEST_CUDA=1 .device/bin/rust_differential
  fi
  step "gpu precision fuzz" $((${MNEMO_FUZZ_SECONDS:-150} + 60)) bash scripts/device-fuzz.sh run .device/fuzz "$out/fuzz" \
    "${MNEMO_FUZZ_SECONDS:-150}"
  fi
  if [ "$part" = bench ] || [ "$part" = all ]; then
  step "gpu benchmark" 300 .device/bin/mnemo_gpu_bench "$out/mnemo_gpu.jsonl"
  # Activation search against plain search, 1q x 1M x 768 f32 (CUDA events).
  step "activation benchmark" 200 .device/bin/mnemo_activation_bench "$out/activation_gpu.jsonl" cuda 1000000 101
  step "torch peer" 200 python3 bench/gpu/torch_peer.py "$out/torch_gpu.jsonl"
  step "torch ops peer" 200 python3 bench/gpu/torch_ops_peer.py "$out/torch_ops.jsonl"
  cat "$out/torch_ops.jsonl" >>"$out/torch_gpu.jsonl" 2>/dev/null
  grep '"break-even' "$out/mnemo_gpu.jsonl" >"$out/break-even.jsonl" 2>/dev/null
  step "report" 60 python3 bench/gpu/report.py "$out/mnemo_gpu.jsonl" "$out/torch_gpu.jsonl" "$out"
  fi
  # Recall as users call it: Store.search from Python beside cuVS (where
  # staged: PYTHONPATH and the libraries of ../shared/tools/cuvs-stage.sh in
  # the environment) and torch, then where a call's time goes.
  if [ "$part" = user ] || [ "$part" = all ]; then
    py_ext
    local upart=${MNEMO_USER_PART:-}
    # MNEMO_USER_PART=single or batches: one half of the benchmark, no
    # profile; =activation: the activation rows alone.
    if [ "$upart" != activation ]; then
      step "user benchmark" 540 env "${pyenv[@]}" PYTHONPATH="$PWD/python:${PYTHONPATH:-}" python3 bench/gpu/user_bench.py \
        --out "$out/user_bench.jsonl" --part "${upart:-all}"
    fi
    if [ -z "$upart" ]; then
      step "user profile" 120 env "${pyenv[@]}" PYTHONPATH="$PWD/python:${PYTHONPATH:-}" python3 bench/gpu/user_bench.py \
        --profile --out "$out/user_profile.jsonl"
    fi
    # Activation against plain search from Python, beside torch: the memory
    # terms ahead of the scan (the default at 1M), then inside it.
    if [ -z "$upart" ] || [ "$upart" = activation ]; then
      step "activation as users call it" 240 env "${pyenv[@]}" PYTHONPATH="$PWD/python:${PYTHONPATH:-}" \
        python3 bench/gpu/activation_user.py "$out/activation_user.jsonl"
      step "activation as users call it (terms inside the scan)" 240 env "${pyenv[@]}" MNEMO_ACT_TERMS=0 \
        PYTHONPATH="$PWD/python:${PYTHONPATH:-}" python3 bench/gpu/activation_user.py "$out/activation_user.jsonl"
    fi
  fi
  # The inverted-file index against its exact scan and cuVS IVF-Flat (where
  # staged), 10M x 768 f16 clustered rows (bench/gpu/ivf_bench.py); not part
  # of "all" (one call of its own: data, build and sweeps take minutes).
  # The shape grid (bench/gpu/shape_grid.py, beside torch and cuVS where it
  # is staged): MNEMO_GRID_PART = widths, ks or more (one call each), all by
  # default; MNEMO_GRID_ARGS adds options (e.g. --no-cuvs, --only 64,128).
  if [ "$part" = grid ]; then
    py_ext
    # shellcheck disable=SC2086
    step "shape grid (${MNEMO_GRID_PART:-all})" "${MNEMO_GRID_LIMIT:-570}" env "${pyenv[@]}" \
      PYTHONPATH="$PWD/python:$PWD/bench/gpu:${PYTHONPATH:-}" PYTHONUNBUFFERED=1 python3 bench/gpu/shape_grid.py \
      --part "${MNEMO_GRID_PART:-all}" --out "$out/shape-grid.jsonl" ${MNEMO_GRID_ARGS:-}
    grep -E "^ *[0-9]+ (f32|f16|bf16) " "$log" | tail -n 300
  fi
  if [ "$part" = ivf ]; then
    py_ext
    step "index benchmark" 540 env "${pyenv[@]}" PYTHONPATH="$PWD/python:${PYTHONPATH:-}" python3 bench/gpu/ivf_bench.py \
      --out "$out/ivf-gpu.jsonl" ${MNEMO_IVF_ARGS:-}
  fi
  # Filtered search in the big-ann filtered track's shape (bench/filtered/:
  # 10M x 192 f16, 10,000 queries of one or two tags) beside torch and cuVS
  # (where staged); not part of "all". The data and its ground truth are
  # cached in MNEMO_FILTERED_CACHE (/tmp/mnemo-filtered) for later calls on
  # the same warm machine (a first call may make them alone:
  # MNEMO_STEP_SKIP='filtered search'); MNEMO_FILTERED_ARGS adds options.
  if [ "$part" = filtered ]; then
    py_ext
    local -a fargs=(--n 10000000 --dtype f16 --nq 10000 --cache "${MNEMO_FILTERED_CACHE:-/tmp/mnemo-filtered}")
    step "filtered data" 540 python3 bench/filtered/gen.py "${fargs[@]}"
    # shellcheck disable=SC2086
    step "filtered search" "${MNEMO_FILTERED_LIMIT:-570}" env "${pyenv[@]}" PYTHONUNBUFFERED=1 \
      PYTHONPATH="$PWD/python:${PYTHONPATH:-}" python3 bench/filtered/run.py "${fargs[@]}" --threads "$(nproc)" \
      --peers mnemo-cuda,torch,cuvs,mnemo,numpy --batches 1000,10000 --single 1000 --slow-nq 1000 --tag gpu \
      --out "$out/filtered-gpu.jsonl" ${MNEMO_FILTERED_ARGS:-}
    sed -n '/^| peer | mode/,$p' "$log" | head -n 60
  fi
  echo
  echo "== precision fuzz"
  sed -n '/^fuzz_precision on/,$p' "$log" | head -n 12
  echo
  echo "== test summaries"
  grep -E "^\[  PASSED  \]|^\[  FAILED  \]|^\[  SKIPPED \]|tests? ran|passed|ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -n 40
  echo
  [ -f "$out/gpu-table.md" ] && cat "$out/gpu-table.md"
  [ -f "$out/activation_gpu.jsonl" ] && { echo; echo "== activation against plain search"; cat "$out/activation_gpu.jsonl"; }
  [ -f "$out/torch_search.txt" ] && { echo; echo "== search from a torch tensor"; cat "$out/torch_search.txt"; }
  [ -f "$out/user_bench-table.txt" ] && { echo; echo "== recall as users call it (ms)"; cat "$out/user_bench-table.txt"; }
  echo
  echo "== steps"
  local i
  for i in "${!names[@]}"; do printf '%-22s %s\n' "${names[$i]}" "${results[$i]}"; done
}

case "$mode" in
  bundle) bundle ;;
  run) shift; run "$@" ;;
  profile) shift; profile "$@" ;;
  profile-rows) shift; profile_rows "$@" ;;
  exec) shift; setup; "$@" ;;  # one command with the bundle's libraries (e.g. one benchmark)
  *) echo "usage: $0 bundle | run [OUT] | profile [OUT] | profile-rows [OUT] | exec CMD..." >&2; exit 2 ;;
esac
