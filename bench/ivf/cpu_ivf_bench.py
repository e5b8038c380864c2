"""The CPU benchmark of the inverted-file index: mnemo's index against the
exact scan and against faiss-cpu's IndexIVFFlat, in one process, same
threads, same data (bench/ivf/mixture.py), same queries. Recall@k is against
mnemo's exact scan of the same store (FAISS returns row numbers; mnemo's ids
are the row numbers).

Per nprobe: recall@k, single-query latency (median over --single queries
called one at a time) and queries/s of one batch of --nq queries. The build
is mnemo_store_build_index (train + assign + lay out) against FAISS's train
+ add. One JSON object per row to --out; a table and the targets last.

--dims 64,128,256 runs the whole comparison once per width (the short rows
of bench/results/ivf-cpu-short.jsonl) and adds, per width and target recall
(--targets), one "at_recall" object: each side's queries/s there, single and
batch, interpolated between the nprobe points that bracket it.

Usage: cpu_ivf_bench.py [--n 1000000] [--dim 768 | --dims 64,128,256] [--clusters 10000]
       [--nq 1000] [--nlist 1000] [--nprobe 1,2,4,...] [--threads 2] [--out FILE]
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from mixture import Mixture  # noqa: E402


def recall(got: np.ndarray, truth: np.ndarray) -> float:
    k = truth.shape[1]
    hit = sum(len(np.intersect1d(got[i], truth[i])) for i in range(len(truth)))
    return hit / float(len(truth) * k)


def at_recall(rows, target):
    """queries/s at `target` recall, interpolated in log(qps) between the two
    nprobe points that bracket it (None when no point reaches it)."""
    pts = sorted((r["recall"], r["qps"]) for r in rows)
    for (r0, q0), (r1, q1) in zip(pts, pts[1:]):
        if r0 <= target <= r1 and r1 > r0:
            t = (target - r0) / (r1 - r0)
            return float(np.exp(np.log(q0) + t * (np.log(q1) - np.log(q0))))
    hit = [q for r, q in pts if r >= target]
    return max(hit) if hit else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--clusters", type=int, default=10_000)
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--single", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--nlist", type=int, default=1000)
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--centre-scale", type=float, default=1.0)
    ap.add_argument("--data", choices=["mixture", "patches"], default="mixture",
                    help="patches: real image patches (bench/ivf/patches.py); --n, --dim, --clusters ignored")
    ap.add_argument("--out", default="bench/results/ivf-cpu.jsonl")
    ap.add_argument("--dims", default="", help="several widths, one after another (mixture data)")
    ap.add_argument("--targets", default="0.95", help="recalls at which queries/s are compared")
    a = ap.parse_args()
    import faiss

    faiss.omp_set_num_threads(a.threads)
    rows = []
    targets = [float(t) for t in a.targets.split(",")]
    for dim in ([int(d) for d in a.dims.split(",")] if a.dims else [a.dim]):
        a.dim = dim
        mine = run(a, faiss)
        rows += mine
        if a.dims:
            rows += compare(mine, targets)
        # Written after each width: a long run keeps what it has measured.
        with open(a.out, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    for dim in sorted({r["dim"] for r in rows}):
        summarize([r for r in rows if r["dim"] == dim], targets)


def load_avg():
    return round(os.getloadavg()[0], 2)


def compare(rows, targets):
    """Per target recall: each side's queries/s there, single and batch."""
    out = []
    mi = [r for r in rows if r["impl"] == "mnemo" and r["kind"] == "ivf"]
    fa = [r for r in rows if r["impl"] == "faiss" and r["kind"] == "ivf"]
    for t in targets:
        r = dict(impl="compare", kind="at_recall", recall=t, dim=rows[0]["dim"], n=rows[0]["n"],
                 threads=rows[0]["threads"], data=rows[0]["data"], centre_scale=rows[0]["centre_scale"])
        for key, name in (("qps", "single_qps"), ("batch_qps", "batch_qps")):
            r["mnemo_" + name] = at_recall([{"recall": x["recall"], "qps": x[key]} for x in mi], t)
            r["faiss_" + name] = at_recall([{"recall": x["recall"], "qps": x[key]} for x in fa], t)
            if r["mnemo_" + name] and r["faiss_" + name]:
                r[name.replace("_qps", "_ratio")] = r["mnemo_" + name] / r["faiss_" + name]
        r["load"] = load_avg()
        print(json.dumps(r), flush=True)
        out.append(r)
    return out


def run(a, faiss):
    import mnemo

    rows = []

    def emit(**r):
        r.update(n=a.n, dim=a.dim, threads=a.threads, data=a.data,
                 centre_scale=a.centre_scale if a.data == "mixture" else None, load=load_avg())
        rows.append(r)
        print(json.dumps(r), flush=True)

    t0 = time.perf_counter()
    if a.data == "patches":
        from patches import patches
        x, q = patches(n_queries=a.nq)
        a.n, a.dim, a.nq = x.shape[0], x.shape[1], q.shape[0]
        a.single = min(a.single, a.nq)
        print(f"data: {a.n} image patches x {a.dim}, {a.nq} queries", flush=True)
    else:
        mix = Mixture(a.clusters, a.dim, centre_scale=a.centre_scale)
        x = mix.draw(a.n, seed=11)
        q = mix.draw(a.nq, seed=12)
        print(f"data: {a.n} x {a.dim} from {a.clusters} clusters in {time.perf_counter() - t0:.1f} s", flush=True)

    rt = mnemo.Runtime("cpu", threads=a.threads)
    store = mnemo.Store(rt, a.dim, "f32", "cosine")
    ids = np.arange(a.n, dtype=np.uint64)
    t0 = time.perf_counter()
    for s in range(0, a.n, 262144):
        store.add(ids[s:s + 262144], x[s:s + 262144])
    add_s = time.perf_counter() - t0

    def single(nprobe, n):
        lat = []
        out = []
        for i in range(n):
            t = time.perf_counter()
            got, _ = store.search(q[i:i + 1], a.k, nprobe=nprobe)
            lat.append(time.perf_counter() - t)
            out.append(got[0])
        return statistics.median(lat), np.array(out)

    def batch(nprobe):
        t = time.perf_counter()
        got, _ = store.search(q, a.k, nprobe=nprobe)
        return time.perf_counter() - t, np.asarray(got)

    # Exact: the truth of every query (one batch), and single-query latency.
    exact_batch_s, truth = batch(0)
    exact_lat, _ = single(0, min(20, a.single))
    emit(impl="mnemo", kind="exact", nprobe=0, recall=1.0, single_ms=exact_lat * 1e3, qps=1.0 / exact_lat,
         batch_qps=a.nq / exact_batch_s, add_s=add_s)

    t0 = time.perf_counter()
    store.build_index(nlist=a.nlist, background=False)
    build_s = time.perf_counter() - t0
    info = store.index_info()
    emit(impl="mnemo", kind="build", nlist=a.nlist, build_s=build_s, largest_list=int(info["largest_list"])
         if isinstance(info, dict) else int(info.largest_list))
    probes = [int(p) for p in a.nprobe.split(",")]
    for p in probes:
        lat, got1 = single(p, a.single)
        bs, got = batch(p)
        emit(impl="mnemo", kind="ivf", nprobe=p, recall=recall(got, truth), single_recall=recall(got1, truth[:a.single]),
             single_ms=lat * 1e3, qps=1.0 / lat, batch_qps=a.nq / bs)

    # FAISS IndexIVFFlat, inner product on the same unit rows (cosine).
    quant = faiss.IndexFlatIP(a.dim)
    fi = faiss.IndexIVFFlat(quant, a.dim, a.nlist, faiss.METRIC_INNER_PRODUCT)
    t0 = time.perf_counter()
    fi.train(x)
    fi.add(x)
    fbuild_s = time.perf_counter() - t0
    emit(impl="faiss", kind="build", nlist=a.nlist, build_s=fbuild_s, version=faiss.__version__)
    for p in probes:
        fi.nprobe = p
        lat = []
        for i in range(a.single):
            t = time.perf_counter()
            fi.search(q[i:i + 1], a.k)
            lat.append(time.perf_counter() - t)
        t = time.perf_counter()
        _, got = fi.search(q, a.k)
        bs = time.perf_counter() - t
        lat_m = statistics.median(lat)
        emit(impl="faiss", kind="ivf", nprobe=p, recall=recall(got, truth), single_ms=lat_m * 1e3, qps=1.0 / lat_m,
             batch_qps=a.nq / bs)

    store.close()
    return rows


def summarize(rows, targets=(0.95,)):
    ex = next(r for r in rows if r["impl"] == "mnemo" and r["kind"] == "exact")
    mi = [r for r in rows if r["impl"] == "mnemo" and r["kind"] == "ivf"]
    fa = [r for r in rows if r["impl"] == "faiss" and r["kind"] == "ivf"]
    mb = next(r for r in rows if r["impl"] == "mnemo" and r["kind"] == "build")
    fb = next(r for r in rows if r["impl"] == "faiss" and r["kind"] == "build")
    print("\n| nprobe | mnemo recall@10 | mnemo 1q ms | mnemo batch q/s | faiss recall@10 | faiss 1q ms | faiss batch q/s |")
    print("|---|---|---|---|---|---|---|")
    for m, f in zip(mi, fa):
        print(f"| {m['nprobe']} | {m['recall']:.4f} | {m['single_ms']:.3f} | {m['batch_qps']:.0f} | {f['recall']:.4f} | "
              f"{f['single_ms']:.3f} | {f['batch_qps']:.0f} |")
    print(f"| exact | 1 | {ex['single_ms']:.2f} | {ex['batch_qps']:.1f} | | | |")
    first = next((m for m in mi if m["recall"] >= 0.95), None)
    if first:
        print(f"\nmnemo at recall >= 0.95: nprobe {first['nprobe']}, recall {first['recall']:.4f}, "
              f"1q {first['single_ms']:.3f} ms = {first['qps'] / ex['qps']:.1f}x the exact scan's queries/s "
              "(target >= 20x)")
    for t in targets:
        for key in ("qps", "batch_qps"):
            sub_m = [{"recall": r["recall"], "qps": r[key]} for r in mi]
            sub_f = [{"recall": r["recall"], "qps": r[key]} for r in fa]
            qm, qf = at_recall(sub_m, t), at_recall(sub_f, t)
            label = "single-query" if key == "qps" else "batch"
            if qm and qf:
                print(f"{label} queries/s at recall {t}: mnemo {qm:.0f}, faiss {qf:.0f} ({qm / qf:.2f}x; target >= 1)")
            else:
                print(f"{label} queries/s at recall {t}: mnemo {qm}, faiss {qf} (a side never reached it)")
    print(f"dim {ex['dim']}: build (train + add): mnemo {mb['build_s']:.1f} s, faiss {fb['build_s']:.1f} s "
          f"(target: mnemo <= faiss)")


if __name__ == "__main__":
    main()
