"""The machine's f32 matrix rate through numpy's BLAS, against which the CPU
shape grid's batch cells are read: a square product (the rate the BLAS
reaches at its best) and the grid's 64-query shapes (64 queries against a
store's rows, as one product), medians of repeated runs, GFLOP/s. One JSON
line per shape on stdout.

Usage: sgemm_rate.py [--threads 2] [--reps 9]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=9)
    a = ap.parse_args()
    # The BLAS reads its thread count when numpy loads it.
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import numpy as np

    rng = np.random.default_rng(0)
    shapes = [("square", 4096, 4096, 4096)]
    # The grid's 64-query cells: 256 MiB and 64 MiB stores of 3072 x f32, 256 MiB of 768 x f32.
    for mib, dim in ((256, 3072), (64, 3072), (256, 768)):
        shapes.append((f"64 queries x {mib} MiB of {dim} x f32", 64, (mib << 20) // (dim * 4), dim))
    for name, m, n, kdim in shapes:
        x = rng.random((m, kdim), dtype=np.float32)
        y = rng.random((n, kdim), dtype=np.float32)
        x @ y.T
        ts = []
        for _ in range(a.reps):
            t = time.perf_counter()
            x @ y.T
            ts.append(time.perf_counter() - t)
        med = statistics.median(ts)
        print(json.dumps({"bench": "f32 matrix rate (numpy's BLAS)", "shape": name, "m": m, "n": n, "k": kdim,
                          "threads": a.threads, "reps": a.reps, "median_ms": round(med * 1e3, 2),
                          "gflops": round(2 * m * n * kdim / med / 1e9, 1),
                          "numpy": np.__version__, "machine": platform.processor() or platform.machine(),
                          "load": round(os.getloadavg()[0], 2)}), flush=True)


if __name__ == "__main__":
    main()
