"""A data set shaped like the NeurIPS'23 big-ann filtered track (YFCC-10M),
made here at any size, deterministically, with its exact filtered ground
truth.

What the track published about its data, and what this generator takes
from it:
  - 10M CLIP embeddings of YFCC100M images, 192 dimensions; each image
    carries a "bag" of tags (words of its description, the camera model,
    the year, the country) from a vocabulary of 200,386 tags whose
    frequencies are very skewed (a few tags on a large share of the images,
    most on a handful);
  - queries: one image embedding and one or two tags, and a result must
    carry ALL of the query's tags; k = 10, recall@10 against the exact
    filtered top 10;
  - the FAISS baseline searches a query's matching rows exactly when the
    product of its tags' frequencies is under 1e-3, and an IVF index with a
    filter otherwise, so selectivity spans many decades.
What it does not publish in the pages read for this (the mean tag count of
an image, the exact frequency curve, how the query tags were drawn) is
chosen here and stated below; the data is a stand-in with the track's
shape, not its data.

Parameters (module constants, the same at every size):
  DIM 192, VOCAB 200,000 tags named "t0".."t199999" by frequency rank.
  Tags per row: 1 + Poisson(9) (mean 10), each drawn from a Zipf law over
    the ranks, p(r) ~ 1 / (r + 2.5): the offset puts the most frequent tag
    on about 30% of the rows (the top of the wanted selectivity range) and
    the rarest ones on about 4 rows in a million; repeated draws in a row
    count once.
  Vectors: a mixture of N // 1000 Gaussian clusters (at least 16) in 192
    dims (centres N(0, 0.5^2) per dim, a per-cluster spread
    sqrt(U(0.3, 1)^2 + 0.3^2) per dim), rows L2-normalised: neighbours
    mostly share a cluster, so an IVF index has something to find and
    recall is meaningful. Stored as f32 or f16 (the f16 rows are the f32
    unit rows rounded; scores are inner products with the stored values).
  Tags follow content: past the 1,000 most frequent (years, cameras,
    countries: global), a tag has a home topic (rank mod 1000), every
    cluster a topic (cluster mod 1000), and half a row's draws past rank
    1000 are moved to the tag of the same band of 1000 ranks that belongs
    to the row's topic. Band totals, so the frequency curve, are kept; a
    rare tag's rows then crowd in a few clusters, as words of an image's
    description do in CLIP space.
  Queries: selectivity targets log-uniform between max(1e-6, k/N) and 0.3;
    half one tag (the tag whose row count is nearest the target), half two
    (a first tag of frequency between the target and 0.3, a random row
    holding it, and of that row's other tags the one whose frequency brings
    the product nearest the target; the true intersection is what counts).
    A one-tag target below the rarest usable tag's frequency takes two
    tags. Every query has at least k matching rows (as in the track, whose
    baseline assumes it), so at 1M rows selectivity starts at 1e-5. The query vector is drawn from
    the cluster of a random matching row (an image like one that carries
    the tags), f32, unit.
  Ground truth: per query, the exact top-k by inner product among its
    matching rows, in float32 over the stored values, ties to the smaller
    row number. Selective
    queries score their matching rows directly; broad ones (over 2% of the
    rows) by chunked matrix products over all rows, gathered at the
    matches.

Files (a folder per parameter set under the cache, not committed):
vectors.npy [N, 192], tag_ptr.npy int64 [N+1] and tag_ids.npy int32 (each
row's tags, CSR, ascending), queries.npy f32 [nq, 192], query_tags.npy
int32 [nq, 2] (-1: no second tag), matches.npy int64 [nq], gt_ids.npy
int64 [nq, k], gt_scores.npy f32 [nq, k], meta.json (parameters, sizes,
statistics, seconds taken).

    python3 bench/filtered/gen.py --n 1000000 --dtype f32 --nq 1000 [--cache DIR]

The cache is $MNEMO_FILTERED_CACHE, else ~/.cache/mnemo-filtered.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Tuple

import numpy as np

DIM = 192
VOCAB = 200_000
ZIPF_S = 1.0
ZIPF_B = 2.5
TAGS_EXTRA = 9.0          # tags per row: 1 + Poisson(TAGS_EXTRA)
GLOBAL_TAGS = 1000        # the most frequent tags, not tied to content
TOPICS = 1000             # bands of this many ranks; a tag's topic is rank mod TOPICS
P_LOCAL = 0.5             # share of a row's draws past GLOBAL_TAGS moved to its topic
ROWS_PER_CLUSTER = 1000
CENTRE_SCALE = 0.5
SEL_HI = 0.3
BROAD = 0.02              # ground truth by matrix products above this selectivity
CHUNK = 1 << 18
VERSION = 1


def default_cache() -> str:
    return os.environ.get("MNEMO_FILTERED_CACHE") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                   "mnemo-filtered")


def folder_name(n: int, dtype: str, nq: int, k: int, seed: int) -> str:
    return f"yfcc-like-v{VERSION}-n{n}-d{DIM}-{dtype}-q{nq}-k{k}-s{seed}"


def zipf_cdf() -> np.ndarray:
    w = (np.arange(VOCAB, dtype=np.float64) + ZIPF_B) ** -ZIPF_S
    c = np.cumsum(w)
    return c / c[-1]


class Mixture:
    """Cluster centres and spreads; rows drawn for given cluster ids."""

    def __init__(self, clusters: int, seed: int) -> None:
        rng = np.random.default_rng([seed, 1])
        self.clusters = clusters
        self.centres = rng.standard_normal((clusters, DIM), dtype=np.float32) * np.float32(CENTRE_SCALE)
        s = rng.uniform(0.3, 1.0, clusters).astype(np.float32)
        self.sigma = np.sqrt(s * s + np.float32(0.09)).astype(np.float32)

    def rows(self, c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = rng.standard_normal((len(c), DIM), dtype=np.float32)
        x *= self.sigma[c, None]
        x += self.centres[c]
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return x


def clusters_for(n: int) -> int:
    return max(16, n // ROWS_PER_CLUSTER)


def _chunk(i: int, a: int, b: int, seed: int, mix: Mixture, cdf: np.ndarray, vec_out: np.ndarray
           ) -> Tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Rows [a, b): vectors written into vec_out[a:b] (rounded to its
    dtype); returns (i, cluster ids, tag counts per row, tags in row order,
    ascending per row)."""
    rng = np.random.default_rng([seed, 2, i])
    m = b - a
    c = rng.integers(0, mix.clusters, m)
    vec_out[a:b] = mix.rows(c, rng)
    draws = 1 + rng.poisson(TAGS_EXTRA, m)
    row = np.repeat(np.arange(m, dtype=np.int64), draws)
    r = np.searchsorted(cdf, rng.random(len(row)), side="right").astype(np.int64)
    np.minimum(r, VOCAB - 1, out=r)
    move = (r >= GLOBAL_TAGS) & (rng.random(len(row)) < P_LOCAL)
    topic = (c % TOPICS)[row[move]]
    moved = (r[move] // TOPICS) * TOPICS + topic
    r[move] = np.where(moved < VOCAB, moved, r[move])
    key = np.unique(row * VOCAB + r)  # sorted: by row, then tag; repeats once
    rows = key // VOCAB
    tags = (key - rows * VOCAB).astype(np.int32)
    counts = np.bincount(rows, minlength=m).astype(np.int64)
    return i, c, counts, tags


def postings(tag_ptr: np.ndarray, tag_ids: np.ndarray, vocab: int = VOCAB) -> Tuple[np.ndarray, np.ndarray]:
    """The inverted index: (ptr int64 [vocab+1], rows int32), each tag's rows
    ascending (a stable sort of the row-ordered tags by tag)."""
    n = len(tag_ptr) - 1
    counts = np.bincount(tag_ids, minlength=vocab)
    ptr = np.zeros(vocab + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    order = np.argsort(tag_ids, kind="stable")
    rows = np.repeat(np.arange(n, dtype=np.int32), np.diff(tag_ptr))[order]
    return ptr, rows


def intersect_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The common values of two ascending arrays of distinct values: the
    shorter looked up in the longer (O(short * log long))."""
    if len(a) > len(b):
        a, b = b, a
    if len(a) == 0:
        return a
    i = np.searchsorted(b, a)
    np.minimum(i, len(b) - 1, out=i)
    return a[b[i] == a]


def matching(ptr: np.ndarray, rows: np.ndarray, tags) -> np.ndarray:
    """Rows holding every tag of `tags` (one or two; -1 ignored), ascending."""
    tags = [int(t) for t in tags if t >= 0]
    got = rows[ptr[tags[0]]:ptr[tags[0] + 1]]
    for t in tags[1:]:
        got = intersect_sorted(got, rows[ptr[t]:ptr[t + 1]])
    return got


def make_queries(nq: int, n: int, k: int, seed: int, mix: Mixture, row_cluster: np.ndarray, tag_ptr: np.ndarray,
                 tag_ids: np.ndarray, ptr: np.ndarray, rows: np.ndarray
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, 3])
    counts = np.diff(ptr)
    freq = counts / n
    present = np.flatnonzero(counts >= k)  # a query has at least k matching rows
    by_count = present[np.argsort(counts[present], kind="stable")]
    sorted_counts = counts[by_count]
    lo = max(1e-6, k / n)
    qtags = np.full((nq, 2), -1, dtype=np.int32)
    nmatch = np.zeros(nq, dtype=np.int64)
    anchor_cluster = np.zeros(nq, dtype=np.int64)

    def nearest_tag(target_count: float) -> int:
        j = np.searchsorted(sorted_counts, target_count)
        # a random tag among those of the nearest count (ties are common low down)
        cands = []
        for jj in (j - 1, j):
            if 0 <= jj < len(sorted_counts):
                cands.append(jj)
        best = min(cands, key=lambda jj: abs(np.log(sorted_counts[jj]) - np.log(max(target_count, 1))))
        c = sorted_counts[best]
        a, b = np.searchsorted(sorted_counts, c, "left"), np.searchsorted(sorted_counts, c, "right")
        return int(by_count[rng.integers(a, b)])

    min_single = sorted_counts[0] / n
    for q in range(nq):
        while True:
            t = 10 ** rng.uniform(np.log10(lo), np.log10(SEL_HI))
            two = rng.random() < 0.5 or t < min_single
            if not two:
                a = nearest_tag(t * n)
                m = rows[ptr[a]:ptr[a + 1]]
                anchor = int(m[rng.integers(len(m))])
                qtags[q] = (a, -1)
                nmatch[q] = len(m)
                break
            fa = 10 ** rng.uniform(np.log10(t), np.log10(SEL_HI))
            a = nearest_tag(fa * n)
            m = rows[ptr[a]:ptr[a + 1]]
            anchor = int(m[rng.integers(len(m))])
            own = tag_ids[tag_ptr[anchor]:tag_ptr[anchor + 1]]
            own = own[own != a]
            if len(own) == 0:
                continue
            err = np.abs(np.log(freq[a] * freq[own]) - np.log(t))
            b = int(own[np.argmin(err)])
            got = matching(ptr, rows, (a, b))
            if len(got) < k:
                continue
            qtags[q] = (min(a, b), max(a, b))
            nmatch[q] = len(got)
            break
        anchor_cluster[q] = row_cluster[anchor]
    qv = mix.rows(anchor_cluster, np.random.default_rng([seed, 4]))
    return qv, qtags, nmatch


def top_k(scores: np.ndarray, ids: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """The k best (highest score, then smaller id) of one query's candidates."""
    if len(scores) > k:
        part = np.argpartition(-scores, k - 1)[:k]
        kth = scores[part].min()
        keep = np.flatnonzero(scores >= kth)  # every candidate tied with the k-th
        scores, ids = scores[keep], ids[keep]
    order = np.lexsort((ids, -scores))[:k]
    out_i = np.full(k, -1, dtype=np.int64)
    out_s = np.full(k, np.nan, dtype=np.float32)
    out_i[:len(order)] = ids[order]
    out_s[:len(order)] = scores[order]
    return out_i, out_s


def ground_truth(x: np.ndarray, q: np.ndarray, qtags: np.ndarray, ptr: np.ndarray, rows: np.ndarray, k: int,
                 threads: int = 1, log=print) -> Tuple[np.ndarray, np.ndarray]:
    n, nq = x.shape[0], q.shape[0]
    gt_i = np.full((nq, k), -1, dtype=np.int64)
    gt_s = np.full((nq, k), np.nan, dtype=np.float32)
    match = [matching(ptr, rows, qtags[j]) for j in range(nq)]
    broad = [j for j in range(nq) if len(match[j]) > BROAD * n]
    t0 = time.perf_counter()

    def selective(j: int) -> None:
        m = match[j]
        s = x[m].astype(np.float32, copy=False) @ q[j]
        gt_i[j], gt_s[j] = top_k(s, m.astype(np.int64), k)

    with ThreadPoolExecutor(max_workers=threads) as ex:
        list(ex.map(selective, [j for j in range(nq) if len(match[j]) <= BROAD * n]))
    log(f"ground truth: {nq - len(broad)} selective queries in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    if broad:
        # Row chunks outer (each converted to f32 once), the broad queries'
        # products [nb, chunk] inner, each query's scores gathered at its
        # matches and cut to those at or above its chunk's k-th (ties kept);
        # each query's candidates ranked once at the end.
        qb = q[broad]
        cand: List[List[Tuple[np.ndarray, np.ndarray]]] = [[] for _ in broad]
        step = int(min(n, max(1 << 16, (4 << 30) // (4 * len(broad)))))
        for a in range(0, n, step):
            b = min(n, a + step)
            xc = x[a:b].astype(np.float32, copy=False)
            s = qb @ xc.T
            for jj, j in enumerate(broad):
                m = match[j]
                ids = m[np.searchsorted(m, a):np.searchsorted(m, b)]
                sc = s[jj, ids - a]
                if len(sc) > k:
                    kth = -np.partition(-sc, k - 1)[k - 1]
                    keep = sc >= kth
                    ids, sc = ids[keep], sc[keep]
                cand[jj].append((ids, sc))
        for jj, j in enumerate(broad):
            ids = np.concatenate([c[0] for c in cand[jj]]).astype(np.int64)
            sc = np.concatenate([c[1] for c in cand[jj]])
            gt_i[j], gt_s[j] = top_k(sc, ids, k)
    log(f"ground truth: {len(broad)} broad queries in {time.perf_counter() - t0:.1f} s")
    return gt_i, gt_s


def generate(folder: str, n: int, dtype: str, nq: int, k: int, seed: int, threads: int, log=print) -> None:
    os.makedirs(folder, exist_ok=True)
    t_all = time.perf_counter()
    mix = Mixture(clusters_for(n), seed)
    cdf = zipf_cdf()
    tmp = os.path.join(folder, "vectors.tmp.npy")
    vec = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32 if dtype == "f32" else np.float16,
                                    shape=(n, DIM))
    spans = [(i, a, min(n, a + CHUNK)) for i, a in enumerate(range(0, n, CHUNK))]
    parts: List[Optional[Tuple]] = [None] * len(spans)
    t0 = time.perf_counter()

    def work(span):
        i, a, b = span
        return _chunk(i, a, b, seed, mix, cdf, vec)

    with ThreadPoolExecutor(max_workers=threads) as ex:
        for i, c, counts, tags in ex.map(work, spans):
            parts[i] = (c, counts, tags)
    vec.flush()
    row_cluster = np.concatenate([p[0] for p in parts])
    counts = np.concatenate([p[1] for p in parts])
    tag_ids = np.concatenate([p[2] for p in parts])
    del parts
    tag_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=tag_ptr[1:])
    t_rows = time.perf_counter() - t0
    log(f"rows: {n} x {DIM} {dtype}, {len(tag_ids)} tags ({len(tag_ids) / n:.2f} a row) in {t_rows:.1f} s")

    t0 = time.perf_counter()
    ptr, rows = postings(tag_ptr, tag_ids)
    t_post = time.perf_counter() - t0
    t0 = time.perf_counter()
    q, qtags, nmatch = make_queries(nq, n, k, seed, mix, row_cluster, tag_ptr, tag_ids, ptr, rows)
    t_q = time.perf_counter() - t0
    log(f"queries: {nq} in {t_q:.1f} s (inverted index {t_post:.1f} s)")

    t0 = time.perf_counter()
    x = np.load(tmp, mmap_mode="r")
    gt_i, gt_s = ground_truth(x, q, qtags, ptr, rows, k, threads, log)
    t_gt = time.perf_counter() - t0

    tag_counts = np.diff(ptr)
    sel = nmatch / n
    decades = np.floor(np.log10(sel)).astype(int)
    meta = {
        "version": VERSION, "n": n, "dim": DIM, "dtype": dtype, "nq": nq, "k": k, "seed": seed,
        "vocab": VOCAB, "zipf_s": ZIPF_S, "zipf_b": ZIPF_B, "tags_per_row_mean_drawn": 1 + TAGS_EXTRA,
        "global_tags": GLOBAL_TAGS, "topics": TOPICS, "p_local": P_LOCAL, "clusters": mix.clusters,
        "centre_scale": CENTRE_SCALE,
        "tags_per_row": round(len(tag_ids) / n, 3),
        "tags_used": int((tag_counts > 0).sum()),
        "top_tag_freq": [round(float(f), 4) for f in np.sort(tag_counts)[::-1][:5] / n],
        "tag_count_quantiles": {str(p): int(np.quantile(tag_counts[tag_counts > 0], p))
                                for p in (0.1, 0.5, 0.9, 0.99, 0.999)},
        "queries_two_tags": int((qtags[:, 1] >= 0).sum()),
        "selectivity_min": float(sel.min()), "selectivity_max": float(sel.max()),
        "queries_by_decade": {f"1e{d}": int((decades == d).sum()) for d in range(decades.min(), decades.max() + 1)},
        "queries_under_k_matches": int((nmatch < k).sum()),
        "seconds": {"rows": round(t_rows, 1), "postings": round(t_post, 1), "queries": round(t_q, 1),
                    "ground_truth": round(t_gt, 1), "all": round(time.perf_counter() - t_all, 1)},
    }
    np.save(os.path.join(folder, "tag_ptr.npy"), tag_ptr)
    np.save(os.path.join(folder, "tag_ids.npy"), tag_ids)
    np.save(os.path.join(folder, "queries.npy"), q)
    np.save(os.path.join(folder, "query_tags.npy"), qtags)
    np.save(os.path.join(folder, "matches.npy"), nmatch)
    np.save(os.path.join(folder, "gt_ids.npy"), gt_i)
    np.save(os.path.join(folder, "gt_scores.npy"), gt_s)
    os.replace(tmp, os.path.join(folder, "vectors.npy"))
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    log(json.dumps(meta))


def load(n: int, dtype: str = "f32", nq: int = 1000, k: int = 10, seed: int = 1, cache: Optional[str] = None,
         threads: int = 0, log=print) -> Dict[str, object]:
    """The data set (generated first if not in the cache): a dict of the
    arrays of the module docstring (vectors memory-mapped) and "meta"."""
    folder = os.path.join(cache or default_cache(), folder_name(n, dtype, nq, k, seed))
    if not os.path.exists(os.path.join(folder, "meta.json")):
        log(f"generating {folder}")
        generate(folder, n, dtype, nq, k, seed, threads or os.cpu_count() or 1, log)
    out: Dict[str, object] = {"folder": folder}
    for name in ("vectors", "tag_ptr", "tag_ids", "queries", "query_tags", "matches", "gt_ids", "gt_scores"):
        out[name] = np.load(os.path.join(folder, name + ".npy"), mmap_mode="r" if name == "vectors" else None)
    with open(os.path.join(folder, "meta.json")) as f:
        out["meta"] = json.load(f)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dtype", choices=["f32", "f16"], default="f32")
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="generation threads (0: all cores)")
    ap.add_argument("--cache", default=None)
    a = ap.parse_args()
    d = load(a.n, a.dtype, a.nq, a.k, a.seed, a.cache, a.threads)
    print(d["folder"])
    print(json.dumps(d["meta"], indent=1))


if __name__ == "__main__":
    main()
