"""Where one filtered query's time goes on the GPU, by the share of the
store its filter passes: a store of random unit rows with tags laid on
random rows (one tag per share), one query a call from Python as users
call it (Store.search with where={"$tags": [tag]}, preallocated outputs),
wall clock, beside the same query unfiltered. Run it with
MNEMO_FILTER_TRACE=1 to have the library print each call's plan and its
device phases (evaluation, and the scan with the count's trip down) on
stderr. --batch N: N queries a call sharing the share's filter (one list
read for N queries), the time per call.

Usage: one_query_parts.py [--n 10000000] [--dim 192] [--dtype f16]
                          [--shares 0.1,0.03,0.01,0.001] [--calls 50] [--batch 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import mnemo


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--dim", type=int, default=192)
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--shares", default="0.1,0.03,0.01,0.001")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--precision", default="fast")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--batch", type=int, default=1,
                    help="queries a call, all with the share's filter (where); times are per call")
    a = ap.parse_args()
    rng = np.random.default_rng(7)
    rt = mnemo.Runtime("cuda", precision=a.precision)
    store = mnemo.Store(rt, a.dim, a.dtype, "dot")
    ids = np.arange(a.n, dtype=np.uint64)
    step = 1_000_000
    t0 = time.perf_counter()
    for s in range(0, a.n, step):
        x = rng.standard_normal((min(step, a.n - s), a.dim), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        store.add(ids[s : s + len(x)], x.astype(np.float16) if a.dtype == "f16" else x)
    shares = [float(v) for v in a.shares.split(",")]
    # Each share's tag on its own random rows, written as upserts of those
    # rows' fields (their slots, and so the rows' scattered places, stay).
    for j, share in enumerate(shares):
        rows = np.sort(rng.choice(a.n, size=int(a.n * share), replace=False)).astype(np.uint64)
        for s in range(0, len(rows), step):
            part = rows[s : s + step]
            store.update_fields(part, tags=[[f"t{j}"]] * len(part))
    build_s = time.perf_counter() - t0
    q = rng.standard_normal((a.calls, a.batch, a.dim), dtype=np.float32)
    q /= np.linalg.norm(q, axis=2, keepdims=True)
    if a.batch == 1:
        q = q[:, 0]
    out_ids = np.empty(a.k if a.batch == 1 else (a.batch, a.k), dtype=np.uint64)
    out_scores = np.empty(out_ids.shape, dtype=np.float32)

    def timed(where) -> list:
        ms = []
        for i in range(a.calls):
            t = time.perf_counter()
            store.search(q[i], a.k, where=where, out_ids=out_ids, out_scores=out_scores)
            ms.append((time.perf_counter() - t) * 1e3)
        return ms

    timed(None)  # warm: the graph, the fields' first upload
    rows = [("unfiltered", None)] + [(f"{share:g}", {"$tags": [f"t{j}"]}) for j, share in enumerate(shares)]
    for name, where in rows:
        if where is not None:
            timed(where)  # warm: the filter's first compile and upload
        ms = timed(where)
        print(
            json.dumps(
                {
                    "bench": "one filtered query's parts",
                    "n": a.n,
                    "dim": a.dim,
                    "dtype": a.dtype,
                    "k": a.k,
                    "batch": a.batch,
                    "share": name,
                    "calls": a.calls,
                    "median_ms": round(statistics.median(ms), 4),
                    "p10_ms": round(sorted(ms)[len(ms) // 10], 4),
                    "p90_ms": round(sorted(ms)[len(ms) * 9 // 10], 4),
                    "build_s": round(build_s, 1),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
