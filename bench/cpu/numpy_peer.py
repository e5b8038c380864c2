"""numpy peer of the CPU benchmark: the same workloads as cpu_bench.cpp, done
the vectorised numpy way, timed as the median of REPS runs after two warm-ups.
Prints one JSON object per row (workload, impl, median_ms).
Usage: numpy_peer.py OUT_JSONL [reps=9]"""
import json
import sys
import time

import numpy as np


def median_ms(f, reps):
    f()
    f()
    t = []
    for _ in range(reps):
        a = time.perf_counter()
        f()
        t.append((time.perf_counter() - a) * 1e3)
    return float(np.median(t))


def unit_rows(rng, n, d):
    x = rng.standard_normal((n, d), dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def topk(scores, k):
    """Best-first top k of each row of a score matrix (or vector)."""
    idx = np.argpartition(-scores, k, axis=-1)[..., :k]
    part = np.take_along_axis(scores, idx, axis=-1)
    order = np.argsort(-part, axis=-1, kind="stable")
    return np.take_along_axis(idx, order, axis=-1)


def main(out_path, reps):
    rng = np.random.default_rng(1)
    rows = []

    def emit(workload, impl, ms):
        rows.append({"workload": workload, "impl": impl, "median_ms": round(ms, 4)})
        print(f"  {workload:44s} {impl:26s} {ms:9.3f} ms", flush=True)

    n, d, k = 100_000, 768, 10
    x = unit_rows(rng, n, d)
    xn = np.linalg.norm(x, axis=1)
    q = unit_rows(rng, 100, d)
    x2 = (xn * xn).astype(np.float32)

    def recall_cos(qs):
        s = qs @ x.T if qs.ndim == 2 else x @ qs
        s /= xn * np.linalg.norm(qs, axis=-1, keepdims=qs.ndim == 2)
        return topk(s, k)

    def recall_l2(qs):
        s = qs @ x.T if qs.ndim == 2 else x @ qs
        dist = x2 - 2 * s + np.sum(qs * qs, axis=-1, keepdims=qs.ndim == 2)
        return topk(-dist, k)

    emit("recall 1q x 100k x 768 f32 cosine k=10", "numpy", median_ms(lambda: recall_cos(q[0]), reps))
    emit("recall 1q x 100k x 768 f32 l2sq k=10", "numpy", median_ms(lambda: recall_l2(q[0]), reps))
    emit("recall 100q x 100k x 768 f32 cosine k=10", "numpy", median_ms(lambda: recall_cos(q), reps))
    emit("recall 100q x 100k x 768 f32 l2sq k=10", "numpy", median_ms(lambda: recall_l2(q), reps))
    # numpy's f16 matvec has no BLAS behind it; widening the store per call
    # is the fast way there.
    x16 = x.astype(np.float16)
    emit("recall 1q x 100k x 768 f16 cosine k=10", "numpy",
         median_ms(lambda: topk((x16.astype(np.float32) @ q[0]) / xn, k), reps))
    del x, x16

    # Pairs: gather both sides, widen, einsum.
    items, dp, p = 10_000, 1024, 100_000
    t16 = rng.standard_normal((items, dp), dtype=np.float32).astype(np.float16)
    src = rng.integers(0, items, p).astype(np.uint32)
    tgt = rng.integers(0, items, p).astype(np.uint32)

    def pairs():
        a = t16[src].astype(np.float32)
        b = t16[tgt].astype(np.float32)
        dot = np.einsum("ij,ij->i", a, b)
        return dot / np.sqrt(np.einsum("ij,ij->i", a, a) * np.einsum("ij,ij->i", b, b))

    emit("pairs 100k over 10k x 1024 f16 cosine", "numpy", median_ms(pairs, reps))
    del t16

    # Resampling: searchsorted per row (offset so one call covers the batch),
    # gathered end points, one fused lerp.
    bsz, s, t, dr = 1024, 512, 256, 64
    data = rng.standard_normal((bsz, s, dr), dtype=np.float32)
    st = np.cumsum(0.5 + rng.random((bsz, s), dtype=np.float32), axis=1, dtype=np.float32)
    tt = (rng.random((bsz, t), dtype=np.float32) * st[:, -1:]).astype(np.float32)

    def resample():
        off = (np.arange(bsz, dtype=np.float64) * (float(st.max()) + 1.0))[:, None]
        i = np.searchsorted((st + off).ravel(), (tt + off).ravel(), side="right").reshape(bsz, t) - 1
        i -= np.arange(bsz)[:, None] * s
        i = np.clip(i, 0, s - 2)
        rows = np.arange(bsz)[:, None]
        t0, t1 = st[rows, i], st[rows, i + 1]
        w = np.clip((tt - t0) / (t1 - t0), 0.0, 1.0).astype(np.float32)
        a = data[rows, i]
        b = data[rows, i + 1]
        return a + w[..., None] * (b - a)

    emit("resample 1024 x 512 -> 256 x 64 f32", "numpy", median_ms(resample, reps))
    del data

    # Row normalisation of 1M x 768, in 64k-row chunks (the whole array at
    # once needs several 3 GB temporaries and is slower).
    r, dn, chunk = 1_000_000, 768, 65536
    xin = np.empty((r, dn), dtype=np.float32)
    for c0 in range(0, r, chunk):
        xin[c0:c0 + chunk] = rng.standard_normal((min(chunk, r - c0), dn), dtype=np.float32)
    out = np.empty_like(xin)
    g = rng.standard_normal(dn, dtype=np.float32)
    bt = rng.standard_normal(dn, dtype=np.float32)

    def normalize():
        for c0 in range(0, r, chunk):
            v = xin[c0:c0 + chunk]
            np.divide(v, np.linalg.norm(v, axis=1, keepdims=True), out=out[c0:c0 + chunk])

    def layer_norm():
        for c0 in range(0, r, chunk):
            v = xin[c0:c0 + chunk]
            mu = v.mean(axis=1, keepdims=True)
            var = v.var(axis=1, keepdims=True)
            o = out[c0:c0 + chunk]
            np.subtract(v, mu, out=o)
            o *= 1.0 / np.sqrt(var + 1e-5)
            o *= g
            o += bt

    emit("normalize 1M x 768 f32", "numpy", median_ms(normalize, reps))
    emit("layer_norm 1M x 768 f32", "numpy", median_ms(layer_norm, reps))

    with open(out_path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], max(7, int(sys.argv[2]) if len(sys.argv) > 2 else 9))
