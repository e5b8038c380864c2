"""Recall on a grid of shapes as users bring them: mnemo's Store.search from
Python beside torch (matmul + topk) and cuVS brute_force, in one process on
one GPU, on the same unit rows resident on the device.

    MNEMO_LIBRARY=.../libmnemo.so.1 MNEMO_BACKEND_DIR=.../lib PYTHONPATH=python \\
        python3 bench/gpu/shape_grid.py --part widths|ks|more|all --out grid.jsonl

Every cell is timed two ways for each implementation:
  wall_ms    the median wall clock of one call with its sync, as a user
             calls it (outputs preallocated: mnemo's out_ids / out_scores,
             cuVS's neighbors / distances; torch allocates its own);
  kernel_ms  the median GPU time between CUDA events around the same call,
             the stream kept busy ahead (torch.cuda._sleep) so that the
             events time the GPU's work, not the launch. cuVS is timed on
             torch's stream (its Resources take that stream) or not at all.
floor_ms is the store's bytes over the read bandwidth measured in the same
run (the best of torch.sum and torch.amax over a 4 GiB buffer).

Parts (each fits one 10-minute call on an H200):
  widths  17 row widths from 32 to 4096 (five not multiples of 64), f32 and
          f16, 1 GB stores, cosine: one query at k 10 and 100, 100 and 1000
          queries at k 10.
  ks      rows of 64, 128, 384 and 1536 f16, 1 GB, cosine: k of 1, 10, 100,
          1000 by 1, 4, 32, 100 and 1000 queries.
  more    the same four widths: bf16, dot (f16), L2 (f32), and 64 MB and
          4 GB stores (f16), one query at k 10 and 100 and 100 queries at k 10.
Single queries and batches under 16 queries run on an EXACT runtime against
torch in f32 without TF32 (16-bit rows: torch in the rows' dtype); batches of
16 and more on a FAST runtime (tensor-core products, the top lists re-scored)
against torch with TF32 (f32) or the rows' dtype. cuVS takes f32 and f16
rows (no bf16). Rows are unit vectors, so cosine is cuVS's inner product.
JSON lines, one object per cell: dim, dtype, k, nq, store_bytes, metric, n,
floor_ms, read_gbs, and {mnemo,torch,cuvs}_{wall,kernel}_ms (null with a
*_why where a peer could not run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from user_bench import kernel_ms  # noqa: E402 - beside this file

GB = 1 << 30
WIDTHS = [32, 48, 64, 96, 100, 128, 200, 256, 384, 512, 768, 1000, 1024, 1536, 2048, 3072, 4096]
FOUR = [64, 128, 384, 1536]
ESIZE = {"f32": 4, "f16": 2, "bf16": 2}


def cells(part: str) -> List[Dict[str, Any]]:
    out: List[Dict[str, Any]] = []

    def add(dim: int, dtype: str, metric: str, store: int, pairs: List[Tuple[int, int]]) -> None:
        for nq, k in pairs:
            out.append({"dim": dim, "dtype": dtype, "metric": metric, "store_bytes": store, "nq": nq, "k": k})

    if part in ("widths", "all"):
        for dt in ("f32", "f16"):
            for w in WIDTHS:
                add(w, dt, "cosine", GB, [(1, 10), (1, 100), (100, 10), (1000, 10)])
    if part in ("ks", "all"):
        for w in FOUR:
            add(w, "f16", "cosine", GB, [(nq, k) for nq in (1, 4, 32, 100, 1000) for k in (1, 10, 100, 1000)])
    if part in ("more", "all"):
        three = [(1, 10), (1, 100), (100, 10)]
        for w in FOUR:
            add(w, "bf16", "cosine", GB, three)
            add(w, "f16", "dot", GB, three)
            add(w, "f32", "l2", GB, three)
            add(w, "f16", "cosine", 64 << 20, three)
            add(w, "f16", "cosine", 4 * GB, three)
    return out


def median_wall(fn: Callable[[], Any], sync: Callable[[], None], budget_s: float = 0.6) -> float:
    fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    once = time.perf_counter() - t0
    reps = int(max(5, min(40, budget_s / max(once, 1e-6))))
    for _ in range(2):
        fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def median_kernel(torch: Any, fn: Callable[[], Any], reps: int = 15) -> float:
    """GPU time of fn's work (user_bench.kernel_ms: events with the stream
    kept busy ahead)."""
    return kernel_ms(torch, fn, reps)


def read_gbs(torch: Any) -> float:
    buf = torch.ones(GB, dtype=torch.float32, device="cuda")  # 4 GiB
    best = 0.0
    for fn in (lambda: torch.sum(buf), lambda: torch.amax(buf)):
        ms = median_kernel(torch, fn, reps=10)
        best = max(best, 4 * GB / (ms * 1e-3) / 1e9)
    del buf
    torch.cuda.empty_cache()
    return best


def own_cells(spec: str) -> List[Dict[str, Any]]:
    """Cells off the grid (--cells), e.g. 64:f16:2:100 or 128:f32:4:100:4096:l2."""
    out = []
    for item in spec.split(","):
        f = item.split(":")
        mb = int(f[4]) if len(f) > 4 else 1024
        out.append({"dim": int(f[0]), "dtype": f[1], "metric": f[5] if len(f) > 5 else "cosine",
                    "store_bytes": mb << 20, "nq": int(f[2]), "k": int(f[3])})
    return out


class Grid:
    def __init__(self, args: argparse.Namespace) -> None:
        import torch
        import mnemo
        self.torch, self.mnemo = torch, mnemo
        self.sync = torch.cuda.synchronize
        self.rt_exact = mnemo.Runtime(backend="cuda")
        self.rt_fast = mnemo.Runtime(backend="cuda", precision="fast")
        self.cuvs_mod: Optional[Any] = None
        self.cuvs_why = ""
        if not args.no_cuvs:
            try:
                import cuvs_peer
                bf, why = cuvs_peer.load()
                if bf is None:
                    self.cuvs_why = why
                else:
                    self.cuvs_mod = cuvs_peer
                    cuvs_peer.use_rmm_pool()
            except Exception as exc:  # noqa: BLE001 - the reason goes in the row
                self.cuvs_why = f"{type(exc).__name__}: {exc}"
        else:
            self.cuvs_why = "cuVS not run (--no-cuvs)"
        self.read_gbs = read_gbs(torch)
        print(f"read bandwidth {self.read_gbs:.0f} GB/s; cuVS: {self.cuvs_why or 'loaded'}", flush=True)

    def tdtype(self, dt: str) -> Any:
        t = self.torch
        return {"f32": t.float32, "f16": t.float16, "bf16": t.bfloat16}[dt]

    def rows(self, n: int, dim: int, dt: str, seed: int) -> Any:
        t = self.torch
        g = t.Generator(device="cuda").manual_seed(seed)
        x = t.empty((n, dim), dtype=self.tdtype(dt), device="cuda")
        step = max(1, (256 << 20) // (dim * 4))
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            y = t.randn(hi - lo, dim, device="cuda", generator=g)
            x[lo:hi] = (y / y.norm(dim=1, keepdim=True)).to(x.dtype)
        return x

    def mnemo_stores(self, x: Any, dt: str, metric: str, want: List[str]) -> Dict[str, Any]:
        t = self.torch
        stores = {}
        for name, rt in (("exact", self.rt_exact), ("fast", self.rt_fast)):
            if name in want:
                stores[name] = self.mnemo.Store(rt, x.shape[1], dt, metric)
        step = max(1, (256 << 20) // (x.shape[1] * ESIZE[dt]))
        for lo in range(0, x.shape[0], step):
            hi = min(x.shape[0], lo + step)
            part = x[lo:hi]
            host = part.view(t.int16).cpu().numpy().view(np.uint16) if dt == "bf16" else part.cpu().numpy()
            ids = np.arange(lo, hi, dtype=np.uint64)
            for s in stores.values():
                s.add(ids, host)
        return stores

    def torch_search(self, x: Any, xn2: Optional[Any], q: Any, k: int, metric: str, fast: bool) -> Callable[[], Any]:
        t = self.torch
        n = x.shape[0]
        # Queries in chunks so that a score matrix stays within 8 GiB.
        chunk = max(1, min(q.shape[0], (8 * GB) // (n * 4)))

        def run() -> Any:
            t.backends.cuda.matmul.allow_tf32 = fast
            outs = []
            for lo in range(0, q.shape[0], chunk):
                s = q[lo:lo + chunk] @ x.T
                if metric == "l2":
                    s = 2 * s.float() - xn2  # -(|x|^2 - 2 q.x): the query's norm ranks nothing
                outs.append(t.topk(s, k, dim=1))
            return outs

        return run

    def run_store(self, group: List[Dict[str, Any]], out: Any) -> None:
        t = self.torch
        c0 = group[0]
        dim, dt, metric, store = c0["dim"], c0["dtype"], c0["metric"], c0["store_bytes"]
        n = store // (dim * ESIZE[dt])
        t0 = time.perf_counter()
        x = self.rows(n, dim, dt, seed=dim * 7 + len(dt))
        stores = self.mnemo_stores(x, dt, metric, sorted({"fast" if c["nq"] >= 16 else "exact" for c in group}))
        xn2 = x.float().pow(2).sum(dim=1) if metric == "l2" else None
        peer = None
        cuvs_why = self.cuvs_why
        if self.cuvs_mod is not None:
            if dt == "bf16":
                cuvs_why = "cuVS takes no bfloat16 rows"
            else:
                try:
                    peer = self.cuvs_mod.BruteForce(x, metric="sqeuclidean" if metric == "l2" else "inner_product",
                                                    stream=t.cuda.current_stream().cuda_stream)
                except Exception as exc:  # noqa: BLE001
                    cuvs_why = f"{type(exc).__name__}: {exc}"
        setup_s = time.perf_counter() - t0
        floor = store / (self.read_gbs * 1e9) * 1e3
        for c in group:
            nq, k = c["nq"], c["k"]
            fast = nq >= 16
            s = stores["fast" if fast else "exact"]
            qd = x.dtype if (dt != "f32") else t.float32
            q32 = self.rows(nq, dim, "f32", seed=12345 + nq)
            qt = q32.to(qd)
            ids = t.empty((nq, k), dtype=t.int64, device="cuda")
            sc = t.empty((nq, k), dtype=t.float32, device="cuda")
            row = dict(c, n=n, floor_ms=floor, read_gbs=self.read_gbs, setup_s=setup_s)

            def mn() -> Any:
                return s.search(q32, k, out_ids=ids, out_scores=sc)

            row["mnemo_wall_ms"] = median_wall(mn, self.sync)
            row["mnemo_kernel_ms"] = median_kernel(t, mn)
            tq = qt if not fast or dt != "f32" else q32
            ts = self.torch_search(x, xn2, tq, k, metric, fast)
            try:
                row["torch_wall_ms"] = median_wall(ts, self.sync)
                row["torch_kernel_ms"] = median_kernel(t, ts)
                # Agreement with torch: share of torch's top-k ids that mnemo returns.
                got = ts()
                tid = t.cat([o.indices for o in got]).to(t.int64)
                mn()
                self.sync()
                hit = (ids.unsqueeze(2) == tid.unsqueeze(1)).any(dim=2).float().mean().item()
                row["overlap_vs_torch"] = round(hit, 4)
            except Exception as exc:  # noqa: BLE001 - e.g. out of memory
                row["torch_wall_ms"] = row["torch_kernel_ms"] = None
                row["torch_why"] = f"{type(exc).__name__}: {exc}"[:200]
            if peer is not None:
                cq = q32 if dt == "f32" else qt
                try:
                    def cv() -> Any:
                        return peer.search(cq, k)
                    row["cuvs_wall_ms"] = median_wall(cv, self.sync)
                    row["cuvs_kernel_ms"] = median_kernel(t, cv) if getattr(peer, "on_torch_stream", False) else None
                    if row["cuvs_kernel_ms"] is None:
                        row["cuvs_kernel_why"] = "cuVS resources not on torch's stream"
                except Exception as exc:  # noqa: BLE001
                    row["cuvs_wall_ms"] = row["cuvs_kernel_ms"] = None
                    row["cuvs_why"] = f"{type(exc).__name__}: {exc}"[:200]
            else:
                row["cuvs_wall_ms"] = row["cuvs_kernel_ms"] = None
                row["cuvs_why"] = cuvs_why
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(summary(row), flush=True)
        del stores, x, peer, xn2
        t.cuda.synchronize()
        t.cuda.empty_cache()


def best_peer(row: Dict[str, Any], kind: str) -> Optional[float]:
    v = [row.get(f"{p}_{kind}_ms") for p in ("torch", "cuvs")]
    v = [x for x in v if x]
    return min(v) if v else None


def summary(r: Dict[str, Any]) -> str:
    def f(x: Optional[float]) -> str:
        return f"{x:8.3f}" if x else "       -"
    bw, bk = best_peer(r, "wall"), best_peer(r, "kernel")
    sp_w = bw / r["mnemo_wall_ms"] if bw else None
    sp_k = bk / r["mnemo_kernel_ms"] if bk else None
    pct = 100 * r["floor_ms"] / r["mnemo_kernel_ms"] if r["nq"] == 1 else None
    mb = r["store_bytes"] >> 20
    return (f"{r['dim']:5d} {r['dtype']:4s} {r['metric']:6s} {mb:5d}MB nq={r['nq']:<5d} k={r['k']:<5d} "
            f"mnemo {f(r['mnemo_wall_ms'])} ({f(r['mnemo_kernel_ms'])}) torch {f(r.get('torch_wall_ms'))} "
            f"({f(r.get('torch_kernel_ms'))}) cuvs {f(r.get('cuvs_wall_ms'))}  x{sp_w or 0:5.2f} wall "
            f"x{sp_k or 0:5.2f} kernel" + (f"  {pct:4.0f}% of floor" if pct else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", default="all", choices=["widths", "ks", "more", "all"])
    ap.add_argument("--out", default="shape-grid.jsonl")
    ap.add_argument("--no-cuvs", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated dims to keep (a quick subset)")
    ap.add_argument("--pairs", default="", help="nq:k pairs to keep, e.g. 1:10,1:100")
    ap.add_argument("--dtypes", default="", help="comma-separated storage dtypes to keep, e.g. f16,bf16")
    ap.add_argument("--metrics", default="", help="comma-separated metrics to keep, e.g. cosine")
    ap.add_argument("--stores", default="", help="comma-separated store sizes in MB to keep, e.g. 64,1024")
    ap.add_argument("--cells", default="",
                    help="cells of one's own instead of a part: DIM:DTYPE:NQ:K[:MB[:METRIC]] joined by commas")
    args = ap.parse_args()
    todo = own_cells(args.cells) if args.cells else cells(args.part)
    if args.only:
        keep = {int(d) for d in args.only.split(",")}
        todo = [c for c in todo if c["dim"] in keep]
    if args.pairs:
        keep_p = {tuple(int(v) for v in p.split(":")) for p in args.pairs.split(",")}
        todo = [c for c in todo if (c["nq"], c["k"]) in keep_p]
    if args.dtypes:
        keep_t = set(args.dtypes.split(","))
        todo = [c for c in todo if c["dtype"] in keep_t]
    if args.metrics:
        keep_m = set(args.metrics.split(","))
        todo = [c for c in todo if c["metric"] in keep_m]
    if args.stores:
        keep_s = {int(v) << 20 for v in args.stores.split(",")}
        todo = [c for c in todo if c["store_bytes"] in keep_s]
    groups: Dict[Tuple[Any, ...], List[Dict[str, Any]]] = {}
    for c in todo:
        groups.setdefault((c["dim"], c["dtype"], c["metric"], c["store_bytes"]), []).append(c)
    g = Grid(args)
    with open(args.out, "a") as out:
        for key, group in groups.items():
            try:
                g.run_store(group, out)
            except Exception as exc:  # noqa: BLE001 - one store's failure is recorded, the rest run
                print(f"store {key}: {type(exc).__name__}: {exc}", flush=True)
                for c in group:
                    out.write(json.dumps(dict(c, error=f"{type(exc).__name__}: {exc}"[:300])) + "\n")
                g.torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
