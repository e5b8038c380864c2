#!/usr/bin/env bash
# Multi-GPU tests and benchmark of sharded stores (run on a machine with 2 or
# more GPUs, e.g. the x2 and x4 kinds).
#
#   scripts/device-multi.sh bundle    here: the bundle of scripts/device-test.sh
#                                     (MNEMO_BUNDLE_QUICK=1: without the fuzzers
#                                     and the Rust binary), which carries the
#                                     GPU tests and mnemo_multi_bench
#   scripts/device-multi.sh run OUT   on the GPU machine: the sharded-store GPU
#                                     tests, then the benchmark (results as JSON
#                                     lines in OUT/multi-gpu.jsonl), then a short
#                                     table last. MNEMO_MULTI_SCALE (default 1)
#                                     scales the benchmark's row counts.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}

case "$mode" in
  bundle)
    MNEMO_BUNDLE_QUICK=${MNEMO_BUNDLE_QUICK:-1} bash scripts/device-test.sh bundle
    ;;
  run)
    out=${2:-${OUT:-device-out}}
    mkdir -p "$out"
    log=$out/multi-gpu.log
    nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader >"$log" 2>&1
    gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
    echo "===== sharded-store GPU tests and staged uploads, all $gpus GPUs" >>"$log"
    timeout 420 bash scripts/device-test.sh exec .device/bin/mnemo_gpu_tests --gtest_brief=1 \
      '--gtest_filter=*GpuShards*:*GpuUpload*:GpuActivationCases.Sharded*' >>"$log" 2>&1
    tests_rc=$?
    # Sharded activation searches with every shard's memory terms formed
    # ahead of its scan (by default only from 2^17 slots a shard).
    echo "===== sharded activation searches, terms ahead forced, all $gpus GPUs" >>"$log"
    timeout 300 bash scripts/device-test.sh exec env MNEMO_ACT_TERMS=1 .device/bin/mnemo_gpu_tests --gtest_brief=1 \
      '--gtest_filter=GpuActivationCases.Sharded*:GpuShardsDevice.ActivationAndTouch' >>"$log" 2>&1
    rc1=$?
    [ "$tests_rc" -eq 0 ] && tests_rc=$rc1
    if [ "$gpus" -gt 2 ]; then
      # The same store over two of them.
      echo "===== sharded-store GPU tests, 2 GPUs" >>"$log"
      CUDA_VISIBLE_DEVICES=0,1 timeout 300 bash scripts/device-test.sh exec .device/bin/mnemo_gpu_tests \
        --gtest_brief=1 '--gtest_filter=*GpuShards*' >>"$log" 2>&1
      rc2=$?
      [ "$tests_rc" -eq 0 ] && tests_rc=$rc2
    fi
    # Device-buffer searches of a sharded store: the gather's copies between
    # the devices and the merge kernel on the first one.
    echo "===== memcheck of device-buffer searches over $gpus GPUs" >>"$log"
    timeout 420 bash scripts/device-test.sh exec compute-sanitizer --tool memcheck --error-exitcode 3 \
      .device/bin/mnemo_gpu_tests --gtest_brief=1 '--gtest_filter=GpuShardsDevice.*' >>"$log" 2>&1
    rc3=$?
    [ "$tests_rc" -eq 0 ] && tests_rc=$rc3
    echo "===== benchmark" >>"$log"
    timeout 900 bash scripts/device-test.sh exec .device/bin/mnemo_multi_bench "$out/multi-gpu.jsonl" \
      "${MNEMO_MULTI_SCALE:-1}" >"$out/multi-bench.txt" 2>&1
    bench_rc=$?
    cat "$out/multi-bench.txt" >>"$log"
    grep -E "^=====|^\[  (PASSED|FAILED|SKIPPED) |^\[  FAILED  \]" "$log" | tail -n 24
    echo "tests: rc=$tests_rc  benchmark: rc=$bench_rc"
    # Markdown table against the goals, and the scaling plot where matplotlib is.
    [ -s "$out/multi-gpu.jsonl" ] && python3 bench/gpu/multi_report.py "$out/multi-gpu.jsonl" "$out" >/dev/null 2>&1
    # The benchmark's table comes last.
    sed -n '/^bench /,$p' "$out/multi-bench.txt"
    ;;
  *) echo "usage: $0 bundle | run OUT" >&2; exit 2 ;;
esac
