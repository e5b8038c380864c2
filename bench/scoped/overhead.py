"""What a filter costs: a search scoped by a filter against an unfiltered
search of a store that holds only the rows the filter matches, and against
the unfiltered search of the whole store (a scoped search should read about
its share of it), and the scoped search again after Store.cluster() has laid
the store out by namespace (the scope's rows then one run), and once more
after 1% more memories were written to every user (appended after the runs).

One process, same threads. The store holds N rows of D dims (f32, cosine),
each under a namespace ("users", u) with U users, so a scope of one user
holds 1/U of the rows, spread over the whole store (every U-th row). Each
line of output is one JSON object: scope share, the three medians (ms) and
the two ratios.

    python3 bench/scoped/overhead.py --n 1000000 --dim 192 --out bench/results/scoped-cpu.jsonl

(MNEMO_LIBRARY naming the built libmnemo and PYTHONPATH=python, as the
other benchmarks run.)
"""
import argparse
import json
import platform
import time

import numpy as np

import mnemo


def median_ms(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts) * 1e3)


def paired_ms(fa, fb, reps):
    """Medians of fa and fb called in turn, call by call: both see the same
    moments of the machine (a block of one then a block of the other moved
    the ratio of two 0.14 ms searches by up to 30% between runs)."""
    fa()
    fb()
    ta, tb = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        fa()
        t1 = time.perf_counter()
        fb()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return float(np.median(ta) * 1e3), float(np.median(tb) * 1e3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=192)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    rng = np.random.default_rng(7)
    x = rng.standard_normal((a.n, a.dim), dtype=np.float32)
    ids = np.arange(1, a.n + 1, dtype=np.uint64)
    rt = mnemo.Runtime(backend=a.backend, threads=a.threads)
    rows = []
    for users in (100, 10, 2):
        user = np.arange(a.n) % users
        whole = mnemo.Store(rt, a.dim)
        whole.add(ids, x, namespaces=[("users", str(u)) for u in user])
        mine = user == 1
        alone = mnemo.Store(rt, a.dim)
        alone.add(ids[mine], x[mine])
        q = rng.standard_normal((1, a.dim), dtype=np.float32)
        scope = mnemo.Filter({"$namespace": ("users", "1")})
        fi, fs = whole.search(q, a.k, where=scope)
        ai, as_ = alone.search(q, a.k)
        assert np.array_equal(fi, ai), "the scoped search and the store of its rows disagree"
        t_scoped, t_alone = paired_ms(lambda: whole.search(q, a.k, where=scope), lambda: alone.search(q, a.k),
                                      a.reps)
        t_whole = median_ms(lambda: whole.search(q, a.k), a.reps)
        # The same store laid out by namespace (Store.cluster): the scope's
        # rows become one run, read as a store of them alone would be.
        t0 = time.perf_counter()
        whole.cluster()
        t_cluster = (time.perf_counter() - t0) * 1e3
        ci, _ = whole.search(q, a.k, where=scope)
        assert np.array_equal(ci, ai), "the clustered store's scoped search disagrees"
        ranged0 = whole.stats().filtered_ranged
        t_clustered, t_alone2 = paired_ms(lambda: whole.search(q, a.k, where=scope),
                                          lambda: alone.search(q, a.k), a.reps)
        ranged = whole.stats().filtered_ranged - ranged0
        # Then 1% more memories written to every user (appended after the
        # runs): the scope is its run and the few after it.
        extra = a.n // 100
        xe = rng.standard_normal((extra, a.dim), dtype=np.float32)
        ide = np.arange(a.n + 1, a.n + 1 + extra, dtype=np.uint64)
        ue = np.arange(extra) % users
        whole.add(ide, xe, namespaces=[("users", str(u)) for u in ue])
        alone.add(ide[ue == 1], xe[ue == 1])
        ei, _ = whole.search(q, a.k, where=scope)
        assert np.array_equal(ei, alone.search(q, a.k)[0]), "the scoped search after adds disagrees"
        t_added, t_alone3 = paired_ms(lambda: whole.search(q, a.k, where=scope), lambda: alone.search(q, a.k),
                                      a.reps)
        row = {"n": a.n, "dim": a.dim, "k": a.k, "backend": a.backend, "share": 1.0 / users,
               "scoped_ms": t_scoped, "rows_alone_ms": t_alone, "whole_ms": t_whole,
               "filter_cost": t_scoped / t_alone, "scoped_over_whole": t_scoped / t_whole,
               "cluster_ms": t_cluster, "clustered_scoped_ms": t_clustered, "rows_alone_again_ms": t_alone2,
               "clustered_filter_cost": t_clustered / t_alone2, "clustered_ranged_queries": ranged,
               "after_adds_scoped_ms": t_added, "after_adds_alone_ms": t_alone3,
               "after_adds_filter_cost": t_added / t_alone3,
               "machine": platform.node(), "cpu": platform.processor()}
        rows.append(row)
        print(json.dumps(row), flush=True)
        whole.close()
        alone.close()
    if a.out:
        with open(a.out, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
