"""The CPU shape grid: mnemo's exact search (Python binding, CPU runtime)
beside faiss-cpu's flat index and numpy, in one process with the same thread
count, over row widths, k, query counts, store sizes, dtypes and metrics, and
the machine's read bandwidth measured in the same run.

Peers: faiss IndexFlatIP (cosine on unit rows, dot), IndexFlatL2 (l2sq);
for f16 rows faiss has no flat f16 index, so its f16 cells use
IndexScalarQuantizer(QT_fp16) (f16 storage, exhaustive scan), and numpy widens
the f16 rows per call (its f16 matmul has no BLAS). numpy: x @ q, then
argpartition and a sort of the k kept. Cosine peers search unit rows (the
usual way with them); mnemo stores the same unit rows with metric cosine.

Bandwidth: a C++ reader (bench/cpu/read_bw.cpp, compiled here) sums a buffer
of the store's size with the same threads, best of several passes, at the
start and before each store; the floor of a cell is its vector bytes over the
best bandwidth of the run at that size, and a one-query cell's share of the
floor is floor_ms / mnemo_ms. The machine is shared: before each store the
run waits (--wait-quiet) for other processes to go quiet, and each cell
records the load and the others' CPU share it started with.

Times are medians of a block of repetitions per implementation after a
warm-up, with a pause between blocks (see timed()). One JSON object per cell to --out; a table and the targets.

Usage: shape_grid.py [--threads 2] [--out FILE] [--quick] [--only dim=128,k=100]
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time


def parse():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default="bench/results/shape-grid-cpu.jsonl")
    ap.add_argument("--quick", action="store_true", help="64 MB stores only, fewer repetitions (development)")
    ap.add_argument("--only", default="", help="keep cells matching key=value[,key=value] (dim, k, nq, mb, dtype, metric)")
    ap.add_argument("--cells", default="",
                    help="cells of one's own instead of the grid: DIM:DTYPE:NQ:K[:MB[:METRIC]] joined by commas")
    ap.add_argument("--min-s", type=float, default=0.4, help="time each implementation about this long per cell")
    ap.add_argument("--impls", default="mnemo,faiss,numpy")
    ap.add_argument("--wait-quiet", type=float, default=60,
                    help="before each store, wait up to this long for the other processes to go quiet")
    return ap.parse_args()


A = parse()
# Before numpy and faiss load their BLAS and OpenMP runtimes.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(A.threads)

import numpy as np  # noqa: E402

MB = 1 << 20
ALL_DIMS = [64, 96, 100, 128, 200, 256, 384, 768, 1000, 1536, 3072]
FOUR = [64, 128, 768, 3072]


def grid():
    """(dim, dtype, metric, mb, k, nq) cells: not the whole cross product."""
    cells = set()
    for mb in (64, 256):
        for d in ALL_DIMS:  # every width, cosine f32, k 10 and 100
            for nq in (1, 64):
                for k in (10, 100):
                    cells.add((d, "f32", "cosine", mb, k, nq))
    for d in FOUR:
        for nq in (1, 64):
            for k in (1, 10, 100, 1000):  # every k at four widths
                cells.add((d, "f32", "cosine", 256, k, nq))
            for metric in ("dot", "l2sq"):
                cells.add((d, "f32", metric, 256, 10, nq))
            for k in (10, 100):
                cells.add((d, "f16", "cosine", 256, k, nq))
    return sorted(cells, key=lambda c: (c[3], c[1], c[2], c[0], c[5], c[4]))


def own_cells(spec):
    """Cells off the grid (--cells), e.g. 64:f32:4:256 or 768:f32:16:100:256:l2sq."""
    out = []
    for item in spec.split(","):
        f = item.split(":")
        out.append((int(f[0]), f[1], f[5] if len(f) > 5 else "cosine", int(f[4]) if len(f) > 4 else 64,
                    int(f[3]), int(f[2])))
    return out


def keep(cell, only):
    d, dtype, metric, mb, k, nq = cell
    have = {"dim": str(d), "dtype": dtype, "metric": metric, "mb": str(mb), "k": str(k), "nq": str(nq)}
    for term in filter(None, only.split(",")):
        key, val = term.split("=")
        if have[key] != val:
            return False
    return True


def load_avg():
    return os.getloadavg()[0]


def busy_share(seconds=1.0):
    """Share of the machine's CPU time spent busy over `seconds` (this
    process idles meanwhile, so it is other processes' share)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)
    i0, t0 = sample()
    time.sleep(seconds)
    i1, t1 = sample()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(limit_s):
    """Waits until others use under 10% of the CPUs for 3 s in a row (at
    most limit_s); returns (seconds waited, last busy share)."""
    waited, calm, b = 0, 0, 0.0
    while waited < limit_s:
        b = busy_share()
        waited += 1
        calm = calm + 1 if b < 0.10 else 0
        if calm >= 3:
            break
    return waited, b


def reader(threads):
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "read_bw.cpp")
    lib = os.path.join(tempfile.mkdtemp(prefix="mnemo_read_bw_"), "read_bw.so")
    subprocess.run(["c++", "-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-shared", "-fPIC",
                    src, "-o", lib], check=True)
    so = ctypes.CDLL(lib)
    so.mnemo_bench_read_sum.restype = ctypes.c_double
    so.mnemo_bench_read_sum.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

    def gbs(nbytes, passes=12):
        buf = np.ones(nbytes // 4, dtype=np.float32)
        best = 0.0
        for _ in range(passes):
            t = time.perf_counter()
            so.mnemo_bench_read_sum(buf.ctypes.data, buf.size, threads)
            best = max(best, nbytes / (time.perf_counter() - t) / 1e9)
        return best

    return gbs


def unit_rows(rng, n, d, unit=True):
    x = np.empty((n, d), dtype=np.float32)
    for s in range(0, n, 1 << 18):
        e = min(n, s + (1 << 18))
        x[s:e] = rng.standard_normal((e - s, d), dtype=np.float32)
        if unit:
            x[s:e] /= np.linalg.norm(x[s:e], axis=1, keepdims=True)
    return x


def topk_rows(scores, k):
    """Best-first top k of each row (or of a vector) of scores, numpy's way."""
    if k >= scores.shape[-1]:
        return np.argsort(-scores, axis=-1, kind="stable")
    idx = np.argpartition(-scores, k - 1, axis=-1)[..., :k]
    part = np.take_along_axis(scores, idx, axis=-1)
    return np.take_along_axis(idx, np.argsort(-part, axis=-1, kind="stable"), axis=-1)


def timed(fns, min_s, quick):
    """Median ms of each function: a block of repetitions per function after
    a warm-up call (timed, to size the block: 3 to 15 calls, about min_s;
    2 for a call over a second).
    Blocks, not interleaved calls, and a pause before each: numpy's OpenBLAS
    threads and each OpenMP runtime's threads spin for a while after a call,
    and would take the cores from whatever ran next."""
    ms, reps = {}, {}
    for name, f in fns.items():
        time.sleep(0.25)
        a = time.perf_counter()
        f()
        first = time.perf_counter() - a
        n = 2 if first > 1.0 else int(min(15, max(3 if quick or first > 0.1 else 5, min_s / max(first, 1e-6))))
        ts = []
        for _ in range(n):
            a = time.perf_counter()
            f()
            ts.append((time.perf_counter() - a) * 1e3)
        ms[name], reps[name] = float(np.median(ts)), n
    return ms, min(reps.values())


def main():
    import faiss

    sys.path.insert(0, "python")
    import mnemo

    impls = set(A.impls.split(","))
    faiss.omp_set_num_threads(A.threads)
    cells = own_cells(A.cells) if A.cells else [c for c in grid() if keep(c, A.only) and (not A.quick or c[3] == 64)]
    gbs = reader(A.threads)
    sizes = sorted({c[3] for c in cells})
    bw = {mb: gbs(mb * MB) for mb in sizes}
    print(f"read bandwidth ({A.threads} threads): " + ", ".join(f"{mb} MB {bw[mb]:.1f} GB/s" for mb in sizes)
          + f"; load {load_avg():.2f}", flush=True)
    rt = mnemo.Runtime("cpu", threads=A.threads)
    rows = []
    rng = np.random.default_rng(45)
    groups = {}
    for c in cells:
        groups.setdefault(c[:4], []).append(c)
    for (d, dtype, metric, mb), gcells in groups.items():
        esz = 4 if dtype == "f32" else 2
        n = mb * MB // (d * esz)
        x = unit_rows(rng, n, d, unit=metric == "cosine")
        q = unit_rows(rng, 64, d, unit=metric == "cosine")
        store = mnemo.Store(rt, d, dtype, metric)
        ids = np.arange(n, dtype=np.uint64)
        for s in range(0, n, 1 << 18):
            store.add(ids[s:s + (1 << 18)], x[s:s + (1 << 18)])
        fmetric = faiss.METRIC_L2 if metric == "l2sq" else faiss.METRIC_INNER_PRODUCT
        if dtype == "f32":
            fi = faiss.IndexFlatL2(d) if metric == "l2sq" else faiss.IndexFlatIP(d)
            fname = "IndexFlatL2" if metric == "l2sq" else "IndexFlatIP"
        else:
            fi = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_fp16, fmetric)
            fname = "IndexScalarQuantizer(QT_fp16)"
        if "faiss" in impls:
            fi.add(x)
        xs = x if dtype == "f32" else x.astype(np.float16)
        if dtype != "f32":
            del x
        x2 = (np.einsum("ij,ij->i", xs, xs) if dtype == "f32" else None) if metric == "l2sq" else None

        def np_search(qq, k, xs=xs, x2=x2, metric=metric, dtype=dtype):
            xx = xs if dtype == "f32" else xs.astype(np.float32)
            s = xx @ qq.T if qq.shape[0] > 1 else (xx @ qq[0])
            if metric == "l2sq":
                xn2 = x2 if x2 is not None else np.einsum("ij,ij->i", xx, xx)
                qn2 = np.einsum("ij,ij->i", qq, qq)
                s = (2 * s - (xn2[:, None] if s.ndim == 2 else xn2)) - (qn2[None, :] if s.ndim == 2 else qn2[0])
            return topk_rows(s.T if s.ndim == 2 else s, k)

        waited, busy = wait_quiet(A.wait_quiet)
        bw[mb] = max(bw[mb], gbs(mb * MB))
        for c in gcells:
            _, _, _, _, k, nq = c
            qq = np.ascontiguousarray(q[:nq])
            oi = np.empty((nq, k), dtype=np.uint64)
            osc = np.empty((nq, k), dtype=np.float32)
            fd = np.empty((nq, k), dtype=np.float32)
            fl = np.empty((nq, k), dtype=np.int64)
            fns = {}
            if "mnemo" in impls:
                fns["mnemo"] = lambda qq=qq, k=k, oi=oi, osc=osc: store.search(qq, k, out_ids=oi, out_scores=osc)
            if "faiss" in impls:
                fns["faiss"] = lambda qq=qq, k=k, fd=fd, fl=fl: fi.search(qq, k, D=fd, I=fl)
            if "numpy" in impls:
                fns["numpy"] = lambda qq=qq, k=k: np_search(qq, k)
            load0 = load_avg()
            ms, reps = timed(fns, A.min_s / (4 if A.quick else 1), A.quick)
            # The best hit of every query, as a check that all searched alike.
            agree = None
            if "mnemo" in impls and "faiss" in impls:
                agree = float(np.mean(oi[:, 0].astype(np.int64) == fl[:, 0]))
            nbytes = n * d * esz
            floor = nbytes / (bw[mb] * 1e9) * 1e3
            r = dict(dim=d, dtype=dtype, k=k, nq=nq, store_bytes=nbytes, store_mb=mb, metric=metric, n=n,
                     mnemo_ms=ms.get("mnemo"), faiss_ms=ms.get("faiss"), numpy_ms=ms.get("numpy"),
                     floor_ms=floor, bandwidth_gbs=bw[mb], threads=A.threads, faiss_impl=fname,
                     reps=reps, top1_agree=agree, load=round(max(load0, load_avg()), 2),
                     others_busy=round(busy, 3), quiet_wait_s=waited)
            if r["mnemo_ms"]:
                if r["faiss_ms"]:
                    r["vs_faiss"] = r["faiss_ms"] / r["mnemo_ms"]
                if r["numpy_ms"]:
                    r["vs_numpy"] = r["numpy_ms"] / r["mnemo_ms"]
                if nq == 1:
                    r["floor_share"] = floor / r["mnemo_ms"]
            rows.append(r)
            print(line(r), flush=True)
        store.close()
        del fi, xs
    # Every floor from the best bandwidth the run measured at that size: the
    # most demanding floor, whatever disturbed single measurements.
    for r in rows:
        r["bandwidth_gbs"] = bw[r["store_mb"]]
        r["floor_ms"] = r["store_bytes"] / (r["bandwidth_gbs"] * 1e9) * 1e3
        if "floor_share" in r:
            r["floor_share"] = r["floor_ms"] / r["mnemo_ms"]
    with open(A.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    summary(rows)


def fmt(v, p=3):
    return "-" if v is None else f"{v:.{p}f}"


HEAD = ("| dim | dtype | metric | MB | nq | k | mnemo ms | faiss ms | numpy ms | floor ms | vs faiss | vs numpy "
        "| floor share | load |")


def line(r):
    return (f"| {r['dim']} | {r['dtype']} | {r['metric']} | {r['store_mb']} | {r['nq']} | {r['k']} | "
            f"{fmt(r['mnemo_ms'])} | {fmt(r['faiss_ms'])} | {fmt(r['numpy_ms'])} | {fmt(r['floor_ms'])} | "
            f"{fmt(r.get('vs_faiss'), 2)} | {fmt(r.get('vs_numpy'), 2)} | {fmt(r.get('floor_share'), 2)} | "
            f"{r['load']} |")


def summary(rows):
    print("\n" + HEAD)
    print("|" + "---|" * 14)
    for r in rows:
        print(line(r))
    vf = [r for r in rows if "vs_faiss" in r]
    vn = [r for r in rows if "vs_numpy" in r]
    fs = [r for r in rows if "floor_share" in r]
    if vf:
        miss = [r for r in vf if r["vs_faiss"] < 1.1]
        print(f"\n>= 1.1x faiss: {len(vf) - len(miss)} of {len(vf)} cells; lowest {min(r['vs_faiss'] for r in vf):.2f}x")
    if vn:
        miss = [r for r in vn if r["vs_numpy"] < 1.0]
        print(f">= numpy: {len(vn) - len(miss)} of {len(vn)} cells; lowest {min(r['vs_numpy'] for r in vn):.2f}x")
    if fs:
        miss = [r for r in fs if r["floor_share"] < 0.9]
        print(f"one query >= 90% of the read floor: {len(fs) - len(miss)} of {len(fs)} cells; lowest "
              f"{min(r['floor_share'] for r in fs):.2f}")
    for r in rows:
        bad = [w for w, ok in (("faiss", r.get("vs_faiss", 9) >= 1.1), ("numpy", r.get("vs_numpy", 9) >= 1.0),
                               ("floor", r.get("floor_share", 9) >= 0.9)) if not ok]
        if bad:
            print("  missed " + "/".join(bad) + ": " + line(r))

if __name__ == "__main__":
    main()
