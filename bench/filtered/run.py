"""Filtered search beside its peers, on the data set of gen.py (shaped like
the NeurIPS'23 big-ann filtered track: 192-dim unit rows, tags from a
200k-tag Zipf vocabulary, queries of one or two tags that a result must
ALL carry, k = 10, inner product). One process, one data set, the same
queries and thread count for every peer; recall@10 against the exact
filtered ground truth of gen.py (per query: hits / min(k, matching rows),
averaged over the queries, as the track does).

Peers (each skipped with its reason printed where its package or device is
missing):
  numpy         exact: batches of queries, a matrix product over every row,
                the rows the filter refuses set to -inf, top-k (a sanity peer).
  faiss-flat    exact: IndexFlatIP, one query a call with an IDSelectorBitmap
                of its matching rows (SearchParameters(sel=...)).
  faiss-ivf     IndexIVFFlat (inner product), one query a call with an
                IDSelectorBitmap of its matching rows
                (SearchParametersIVF(sel=..., nprobe=...)), nprobe swept.
  faiss-hybrid  the track's FAISS baseline rule: a query whose matching rows
                are under 1e-3 of the store is answered exactly over those
                rows (faiss.knn on them), the others by faiss-ivf; nprobe
                swept.
  mnemo         exact: Store search with one filter a query (the C ABI's
                where_each: ALL of the query's tags), batches of --batches
                queries; and one query a call (where).
  mnemo-callers the same one query a call from --threads Python threads,
                the runtime on one thread (the faiss peers' way).
  mnemo-py      the same as mnemo through the Python package's API as users
                call it: Store.add(..., tags=[[...]]), Store.search(...,
                where_each=[{"$tags": {"$all": [...]}}]) or where= (needs the
                package's filters and its compiled extension).
  mnemo-ivf     the same over mnemo's inverted-file index, nprobe swept (a
                filtered query reads further lists until it has k
                candidates, or scans its matching rows exactly).
  mnemo-cuda    mnemo on a CUDA runtime (the store on the GPU, host queries
                and results), batches and one query a call; mnemo-cuda-ivf
                the same over its index, nprobe swept.
  cuvs          cuvs.neighbors.brute_force with a per-query bitmap prefilter
                (filters.from_bitmap), batches of --gpu-batch queries.
  torch         a masked matrix product and topk on the GPU, batches of
                --gpu-batch queries.
The faiss peers run one query a call from --threads Python threads (each
faiss call on one thread), as the track's baseline does; mnemo, numpy,
cuVS and torch take batches (mnemo also one query a call, its runtime on
--threads threads).

The matching rows of each query come, for numpy and FAISS, from an
inverted index built here in numpy (tag -> ascending rows; two tags
intersected). Building it is timed once (build_s of the "inverted index"
row) and so is computing every query's rows, on one thread (ids_s); their
queries/s ("qps") counts ids_s with the searches, "search_qps" leaves it
out. cuVS and torch keep that inverted index on the GPU and build each
batch's mask there, inside their timed searches; mnemo evaluates its
filters inside the search, and its qps counts building the filter
objects. Index builds (faiss train + add, mnemo add with the tags)
are reported as build_s and are not in queries/s.

mnemo is driven through its C ABI with ctypes (mnemo_store_add_with_fields
with mnemo_memory_fields.tags, mnemo_filter_create + mnemo_filter_tags(ALL),
mnemo_search_options.where / where_each) on the library the mnemo Python
package loads (MNEMO_LIBRARY), runtime and store made by the package.

One JSON object per (peer, setting) to --out (default
bench/results/filtered-<machine>.jsonl): impl, peer, setting, mode, n, dim,
dtype, nq, batch, k, threads, qps, search_qps, ids_s, recall,
recall_by_selectivity and queries_by_selectivity (decades of matching
rows / n), for one query a call ms_by_selectivity (the mean time of a
call), build_s, machine, load. A table last.

    MNEMO_LIBRARY=build/lib/libmnemo.so.1 PYTHONPATH=python \\
        python3 bench/filtered/run.py --n 1000000 --dtype f32 --nq 1000 --threads 2
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import sys
import time
import traceback
from multiprocessing.pool import ThreadPool
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import gen  # noqa: E402 - beside this file

PEERS = ["numpy", "faiss-flat", "faiss-ivf", "faiss-hybrid", "mnemo", "mnemo-callers", "mnemo-py", "mnemo-ivf",
         "mnemo-cuda", "mnemo-cuda-ivf", "cuvs", "torch"]
TRACK_THRESHOLD = 1e-3  # the track baseline's switch to an exact scan of the matching rows
NO_ID = 2**64 - 1
SELECTOR = {"bitmap": "IDSelectorBitmap", "batch": "IDSelectorBatch"}


class Skip(Exception):
    """A peer that cannot run here, and why."""


# --------------------------------------------------------------- context

class Bench:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.k = a.k
        d = gen.load(a.n, a.dtype, a.nq, a.k, a.seed, a.cache, a.gen_threads)
        self.meta = d["meta"]
        self.x = d["vectors"]  # memory-mapped, f32 or f16
        self.tag_ptr, self.tag_ids = d["tag_ptr"], d["tag_ids"]
        self.q = np.ascontiguousarray(d["queries"], dtype=np.float32)
        self.qtags = d["query_tags"]
        self.nmatch = d["matches"]
        self.gt = d["gt_ids"]
        self.n, self.dim = self.x.shape
        self.nq = len(self.q)
        self.sel = self.nmatch / self.n
        self.decade = np.floor(np.log10(self.sel)).astype(int)
        self.rows: List[Dict[str, Any]] = []
        self.machine = a.machine or describe_machine(a.threads)
        self._x32: Optional[np.ndarray] = None
        self.ids: List[np.ndarray] = []
        self.ids_s = 0.0
        self.index_s = 0.0

    def x32(self) -> np.ndarray:
        """The rows as float32 in memory (the faiss and numpy peers' input)."""
        if self._x32 is None:
            self._x32 = np.ascontiguousarray(self.x, dtype=np.float32)
        return self._x32

    def inverted_index(self, ids: bool = True) -> None:
        """The tags' postings, and (ids) every query's matching rows, which
        only the numpy and FAISS peers take (75 s for 10,000 queries at 10M
        on 16 cores)."""
        t0 = time.perf_counter()
        self.ptr, self.post = gen.postings(self.tag_ptr, self.tag_ids)
        self.index_s = time.perf_counter() - t0
        if not ids:
            return
        t0 = time.perf_counter()
        self.ids = [gen.matching(self.ptr, self.post, self.qtags[j]) for j in range(self.nq)]
        self.ids_s = time.perf_counter() - t0
        assert all(len(m) == c for m, c in zip(self.ids, self.nmatch))
        self.emit("inverted index", "inverted index", "-", mode="build", build_s=round(self.index_s, 3),
                  ids_s=round(self.ids_s, 3), ids_ms_per_query=round(1e3 * self.ids_s / self.nq, 4), recall=None,
                  qps=None)

    def recall(self, got: np.ndarray, nq: Optional[int] = None) -> np.ndarray:
        """Per query: hits / min(k, matching rows)."""
        nq = len(got) if nq is None else nq
        out = np.empty(nq)
        for j in range(nq):
            g = got[j]
            g = g[(g >= 0) & (g < self.n)] if g.dtype.kind == "i" else g[g != NO_ID].astype(np.int64)
            t = self.gt[j]
            t = t[t >= 0]
            out[j] = len(np.intersect1d(g, t)) / min(self.k, self.nmatch[j])
        return out

    def emit(self, peer: str, impl: str, setting: str, *, mode: str, recall: Any, qps: Optional[float],
             **extra: Any) -> Dict[str, Any]:
        r: Dict[str, Any] = {"peer": peer, "impl": impl, "setting": setting, "mode": mode}
        nq = extra.pop("nq", self.nq)
        if isinstance(recall, np.ndarray):
            per = recall
            r["recall"] = round(float(per.mean()), 5)
            dec = self.decade[:len(per)]
            r["recall_by_selectivity"] = {f"1e{d}": round(float(per[dec == d].mean()), 4)
                                          for d in sorted(set(dec.tolist()))}
            r["queries_by_selectivity"] = {f"1e{d}": int((dec == d).sum()) for d in sorted(set(dec.tolist()))}
        else:
            r["recall"] = recall
        r["qps"] = None if qps is None else round(qps, 2)
        r.update(extra)
        r.update(n=self.n, dim=self.dim, dtype=self.a.dtype, nq=nq, k=self.k, threads=self.a.threads,
                 data=f"gen.py v{self.meta['version']} seed {self.meta['seed']}", machine=self.machine,
                 load=round(os.getloadavg()[0], 2), date=datetime.date.today().isoformat())
        self.rows.append(r)
        print(json.dumps(r), flush=True)
        with open(self.a.out, "a") as f:
            f.write(json.dumps(r) + "\n")
        return r

    def timed_emit(self, peer: str, impl: str, setting: str, mode: str, batch: Any, search_s: float,
                   got: np.ndarray, nq: Optional[int] = None, with_ids: bool = True, **extra: Any) -> None:
        """A row from a timed run: qps counts the queries' matching rows
        (ids_s, prorated) for peers that take them from outside."""
        nq = len(got) if nq is None else nq
        ids_s = self.ids_s * nq / self.nq if with_ids else 0.0
        lat = extra.pop("latency", None)
        if lat is not None:  # seconds of each call, one query a call
            dec = self.decade[:nq]
            extra["ms_by_selectivity"] = {f"1e{d}": round(1e3 * float(lat[dec == d].mean()), 4)
                                          for d in sorted(set(dec.tolist()))}
        self.emit(peer, impl, setting, mode=mode, recall=self.recall(got, nq), qps=nq / (search_s + ids_s),
                  search_qps=round(nq / search_s, 2), search_s=round(search_s, 4), ids_s=round(ids_s, 4),
                  batch=batch, nq=nq, **extra)


def describe_machine(threads: int) -> str:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    out = f"{cpu}, {os.cpu_count()} cores, {threads} threads used"
    try:
        import torch
        if torch.cuda.is_available():
            out = f"{torch.cuda.get_device_name(0)}; host {out}"
    except Exception:
        pass
    return out


def blas_threads(n: int) -> Any:
    try:
        from threadpoolctl import threadpool_limits
        return threadpool_limits(n)
    except ImportError:
        import contextlib
        return contextlib.nullcontext()


def top_k_rows(s: np.ndarray, k: int) -> np.ndarray:
    """Row-wise top-k ids of a score matrix, best first (-1 for -inf)."""
    part = np.argpartition(-s, k - 1, axis=1)[:, :k]
    ps = np.take_along_axis(s, part, 1)
    order = np.argsort(-ps, axis=1, kind="stable")
    ids = np.take_along_axis(part, order, 1).astype(np.int64)
    ids[~np.isfinite(np.take_along_axis(ps, order, 1))] = -1
    return ids


# ------------------------------------------------------------------ numpy

def run_numpy(b: Bench) -> None:
    nq = min(b.nq, b.a.slow_nq or b.nq)
    x = b.x32()
    bs = b.a.numpy_batch
    got = np.full((nq, b.k), -1, dtype=np.int64)
    with blas_threads(b.a.threads):
        t0 = time.perf_counter()
        for a0 in range(0, nq, bs):
            a1 = min(nq, a0 + bs)
            s = b.q[a0:a1] @ x.T
            keep = np.zeros(s.shape, dtype=bool)
            for j in range(a0, a1):
                keep[j - a0, b.ids[j]] = True
            np.putmask(s, ~keep, -np.inf)
            got[a0:a1] = top_k_rows(s, b.k)
        dt = time.perf_counter() - t0
    b.timed_emit("numpy", "numpy masked matmul + top-k", "exact", "batch", bs, dt, got,
                 version=np.__version__)


# ------------------------------------------------------------------ faiss

def probes(spec: str, nlist: int) -> List[int]:
    """The nprobe sweep: the values under nlist, then nlist (every list)."""
    return sorted({int(v) for v in spec.split(",") if int(v) < nlist} | {nlist})


def faiss_module():
    try:
        import faiss
    except ImportError as e:
        raise Skip(f"faiss not installed ({e})")
    return faiss


def bitmap_of(ids: np.ndarray, n: int) -> np.ndarray:
    m = np.zeros(n, dtype=bool)
    m[ids] = True
    return np.packbits(m, bitorder="little")


def selector(b: Bench, faiss: Any, ids: np.ndarray) -> tuple:
    """(the IDSelector of a query's matching rows, what it keeps alive)."""
    if b.a.faiss_selector == "batch":
        i64 = ids.astype(np.int64)
        return faiss.IDSelectorBatch(len(i64), faiss.swig_ptr(i64)), i64
    bm = bitmap_of(ids, b.n)
    return faiss.IDSelectorBitmap(len(bm), faiss.swig_ptr(bm)), bm  # n: bytes


def callers(b: Bench) -> str:
    return f"one query a call, {b.a.threads} caller threads"


def per_query(b: Bench, faiss: Any, nq: int, one: Callable[[int], np.ndarray]) -> tuple:
    """one(j) for j < nq from --threads threads, each faiss call on one
    thread (the track baseline's ThreadPool); (seconds, ids [nq, k])."""
    got = np.full((nq, b.k), -1, dtype=np.int64)
    lat = np.zeros(nq)

    def body(j: int) -> None:
        t = time.perf_counter()
        got[j] = one(j)
        lat[j] = time.perf_counter() - t

    pool = ThreadPool(b.a.threads, initializer=lambda: faiss.omp_set_num_threads(1))
    try:
        pool.map(body, range(min(nq, 20)))  # warm-up
        t0 = time.perf_counter()
        pool.map(body, range(nq), chunksize=4)
        dt = time.perf_counter() - t0
    finally:
        pool.close()
        pool.join()
    return dt, got, lat


def run_faiss_flat(b: Bench) -> None:
    faiss = faiss_module()
    x = b.x32()
    t0 = time.perf_counter()
    index = faiss.IndexFlatIP(b.dim)
    index.add(x)
    build_s = time.perf_counter() - t0
    nq = min(b.nq, b.a.slow_nq or b.nq)

    def one(j: int) -> np.ndarray:
        sel, keep = selector(b, faiss, b.ids[j])
        _, i = index.search(b.q[j:j + 1], b.k, params=faiss.SearchParameters(sel=sel))
        return i[0]

    dt, got, lat = per_query(b, faiss, nq, one)
    b.timed_emit("faiss-flat", f"faiss IndexFlatIP + {SELECTOR[b.a.faiss_selector]}", "exact", callers(b), 1, dt,
                 got, build_s=round(build_s, 2), version=faiss.__version__, latency=lat)


def faiss_ivf(b: Bench, faiss: Any):
    if getattr(b, "_ivf", None) is None:
        x = b.x32()
        nlist = b.a.nlist or int(round(math.sqrt(b.n)))
        t0 = time.perf_counter()
        quant = faiss.IndexFlatIP(b.dim)
        index = faiss.IndexIVFFlat(quant, b.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.niter = 10
        train = x[np.random.default_rng(5).choice(b.n, min(b.n, 64 * nlist), replace=False)]
        with blas_threads(b.a.threads):
            faiss.omp_set_num_threads(b.a.threads)
            index.train(train)
            index.add(x)
        b._ivf = (index, quant, nlist, time.perf_counter() - t0)
    return b._ivf


def run_faiss_ivf(b: Bench, hybrid: bool) -> None:
    faiss = faiss_module()
    index, _, nlist, build_s = faiss_ivf(b, faiss)
    x = b.x32()
    name = f"faiss IVFFlat + {SELECTOR[b.a.faiss_selector]}" + (
        ", exact over the matching rows under 1e-3 (the track baseline's rule)" if hybrid else "")
    peer = "faiss-hybrid" if hybrid else "faiss-ivf"
    for p in probes(b.a.nprobe, nlist):
        def one(j: int, p: int = p) -> np.ndarray:
            ids = b.ids[j]
            if hybrid and len(ids) < TRACK_THRESHOLD * b.n:
                _, i = faiss.knn(b.q[j:j + 1], x[ids], b.k, metric=faiss.METRIC_INNER_PRODUCT)
                i = i[0]
                return np.where(i >= 0, ids[np.maximum(i, 0)], -1)
            sel, keep = selector(b, faiss, ids)
            _, i = index.search(b.q[j:j + 1], b.k, params=faiss.SearchParametersIVF(sel=sel, nprobe=p))
            return i[0]

        dt, got, lat = per_query(b, faiss, b.nq, one)
        b.timed_emit(peer, name, f"nprobe={p}", callers(b), 1, dt, got, nprobe=p, nlist=nlist,
                     build_s=round(build_s, 2), version=faiss.__version__, latency=lat)


# ------------------------------------------------------------------ mnemo

class MemoryFields(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("set", ctypes.c_uint32), ("key", ctypes.c_void_p),
                ("namespace_parts", ctypes.c_void_p), ("namespace_depth", ctypes.c_uint32),
                ("tag_count", ctypes.c_uint32), ("tags", ctypes.c_void_p), ("attributes", ctypes.c_void_p),
                ("attribute_count", ctypes.c_uint32), ("reserved0", ctypes.c_uint32), ("payload", ctypes.c_void_p),
                ("payload_bytes", ctypes.c_uint64)]


FIELDS_DTYPE = np.dtype({"names": ["struct_size", "set", "tag_count", "tags"],
                         "formats": [np.uint32, np.uint32, np.uint32, np.uint64],
                         "offsets": [MemoryFields.struct_size.offset, MemoryFields.set.offset,
                                     MemoryFields.tag_count.offset, MemoryFields.tags.offset],
                         "itemsize": ctypes.sizeof(MemoryFields)})


def search_options_type(base: Any) -> Any:
    """mnemo_search_options: the package's struct, grown by where and
    where_each where it ends before them; where and where_each as plain
    addresses."""
    fields = [(n, ctypes.c_void_p if n in ("where", "where_each") else t) for n, t in base._fields_]
    names = [n for n, _ in fields]
    if "where" not in names:
        fields += [("where", ctypes.c_void_p), ("where_each", ctypes.c_void_p)]

    class SearchOptions(ctypes.Structure):
        _fields_ = fields
    return SearchOptions


MNEMO_FIELD_TAGS = 4
MNEMO_OP_ALL = 12


class MnemoFiltered:
    """A mnemo store holding the rows and their tags, searched with tag
    filters through the C ABI (ctypes)."""

    def __init__(self, b: Bench, backend: str, precision: str = "exact", threads: int = 0) -> None:
        try:
            import mnemo
            from mnemo import _cdefs, _lib
        except Exception as e:  # not importable, or no library
            raise Skip(f"mnemo not importable ({type(e).__name__}: {e})")
        self.b = b
        self.mnemo = mnemo
        # Own function objects on the same loaded library, so that the
        # declarations here do not touch the package's.
        lib = ctypes.CDLL(_lib.LIBRARY_PATH)
        for name in ("mnemo_store_add_with_fields", "mnemo_filter_create", "mnemo_filter_tags"):
            if not hasattr(lib, name):
                raise Skip(f"{_lib.LIBRARY_PATH} has no {name} (a library before memories' fields)")
        self.SearchOptions = search_options_type(_cdefs.SearchOptions)
        vp, u32, u64, i32 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32
        lib.mnemo_memory_fields_default.restype = MemoryFields
        lib.mnemo_memory_fields_default.argtypes = []
        lib.mnemo_search_options_default.restype = self.SearchOptions
        lib.mnemo_search_options_default.argtypes = []
        lib.mnemo_store_add_with_fields.argtypes = [vp, vp, vp, i32, u64, vp, vp, vp]
        lib.mnemo_filter_create.argtypes = [ctypes.POINTER(vp)]
        lib.mnemo_filter_destroy.argtypes = [vp]
        lib.mnemo_filter_destroy.restype = None
        lib.mnemo_filter_tags.argtypes = [vp, i32, vp, u32, vp]
        lib.mnemo_store_search.argtypes = [vp, vp, u64, u64, vp, vp, vp]
        lib.mnemo_last_error.restype = ctypes.c_char_p
        for f in ("mnemo_store_add_with_fields", "mnemo_filter_create", "mnemo_filter_tags", "mnemo_store_search"):
            getattr(lib, f).restype = i32
        self.lib = lib
        if lib.mnemo_memory_fields_default().struct_size != ctypes.sizeof(MemoryFields):
            raise Skip("mnemo_memory_fields has another layout than this script's")
        if lib.mnemo_search_options_default().struct_size != ctypes.sizeof(self.SearchOptions):
            raise Skip("mnemo_search_options has another layout than this script's")
        # Every tag's name, NUL-terminated, in one buffer; a tag's pointer is
        # the buffer's address plus its offset.
        names = [f"t{r}".encode() for r in range(gen.VOCAB)]
        lens = np.array([len(s) + 1 for s in names], dtype=np.int64)
        self.tag_off = np.zeros(gen.VOCAB, dtype=np.int64)
        np.cumsum(lens[:-1], out=self.tag_off[1:])
        self.names = mnemo.aligned_empty(int(lens.sum()), np.uint8)
        self.names[:] = np.frombuffer(b"\0".join(names) + b"\0", dtype=np.uint8)
        self.names_at = self.names.ctypes.data
        try:
            self.rt = mnemo.Runtime(backend, precision=precision, threads=threads or b.a.threads)
        except Exception as e:
            raise Skip(f"no {backend} runtime ({type(e).__name__}: {e})")
        self.store = mnemo.Store(self.rt, b.dim, b.a.dtype, "dot")
        self.handle = self.store.handle
        t0 = time.perf_counter()
        self._add()
        self.build_s = time.perf_counter() - t0
        self.backend = backend

    def check(self, status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what}: status {status}: {self.lib.mnemo_last_error().decode(errors='replace')}")

    def _add(self) -> None:
        b, m = self.b, self.mnemo
        ptrs = (self.names_at + self.tag_off[b.tag_ids]).astype(np.uint64)  # every row's tag pointers
        dtype_code = 1 if b.a.dtype == "f32" else 2
        step = 1 << 17
        for a0 in range(0, b.n, step):
            a1 = min(b.n, a0 + step)
            ids = m.aligned_empty(a1 - a0, np.uint64)
            ids[:] = np.arange(a0, a1, dtype=np.uint64)
            v = m.aligned_empty((a1 - a0, b.dim), b.x.dtype)
            v[:] = b.x[a0:a1]
            raw = m.aligned_empty((a1 - a0) * FIELDS_DTYPE.itemsize, np.uint8)
            raw[:] = 0  # every other field zero or NULL (a structured zero-fill leaves the gaps)
            f = raw.view(FIELDS_DTYPE)
            f["struct_size"] = ctypes.sizeof(MemoryFields)
            f["set"] = MNEMO_FIELD_TAGS
            f["tag_count"] = np.diff(b.tag_ptr[a0:a1 + 1])
            f["tags"] = ptrs.ctypes.data + 8 * b.tag_ptr[a0:a1].astype(np.uint64)
            self.check(self.lib.mnemo_store_add_with_fields(self.handle, ids.ctypes.data, v.ctypes.data, dtype_code,
                                                            a1 - a0, None, None, f.ctypes.data),
                       "mnemo_store_add_with_fields")

    def filter_of(self, j: int) -> int:
        """A new filter: ALL of query j's tags (the caller destroys it)."""
        f = ctypes.c_void_p()
        self.check(self.lib.mnemo_filter_create(ctypes.byref(f)), "mnemo_filter_create")
        tags = [int(t) for t in self.b.qtags[j] if t >= 0]
        arr = (ctypes.c_void_p * len(tags))(*[self.names_at + int(self.tag_off[t]) for t in tags])
        self.check(self.lib.mnemo_filter_tags(f, MNEMO_OP_ALL, arr, len(tags), None), "mnemo_filter_tags")
        return f.value

    def filters_of(self, a0: int, a1: int) -> List[int]:
        """New filters for queries a0..a1 (ALL of each one's tags), as a C
        caller makes them: the tags' name pointers of the whole range in
        one array, two calls a query (the caller destroys them)."""
        qt = self.b.qtags[a0:a1]
        ptrs = self.mnemo.aligned_empty(qt.shape, np.uint64)
        ptrs[:] = (self.names_at + self.tag_off[np.maximum(qt, 0)]).astype(np.uint64)
        counts = (qt >= 0).sum(axis=1).tolist()
        base, row = ptrs.ctypes.data, ptrs.strides[0]
        create, tags, check = self.lib.mnemo_filter_create, self.lib.mnemo_filter_tags, self.check
        out = []
        for j, c in enumerate(counts):
            f = ctypes.c_void_p()
            check(create(ctypes.byref(f)), "mnemo_filter_create")
            out.append(f.value)
            check(tags(f, MNEMO_OP_ALL, base + j * row, c, None), "mnemo_filter_tags")
        return out

    def search(self, a0: int, a1: int, nprobe: int = 0) -> np.ndarray:
        """Queries a0..a1 in one call, one filter each (where_each; where
        for one query). Filters are built and destroyed inside."""
        b, m = self.b, self.mnemo
        nb = a1 - a0
        q = b.q[a0:a1]
        if q.ctypes.data % 16:
            q2 = m.aligned_empty(q.shape, np.float32)
            q2[:] = q
            q = q2
        ids = m.aligned_empty((nb, b.k), np.uint64)
        scores = m.aligned_empty((nb, b.k), np.float32)
        filters = self.filters_of(a0, a1)
        try:
            opts = self.lib.mnemo_search_options_default()
            opts.nprobe = nprobe
            each = None
            if nb == 1:
                opts.where = filters[0]
            else:
                each = m.aligned_empty(nb, np.uint64)
                each[:] = filters
                opts.where_each = each.ctypes.data
            self.check(self.lib.mnemo_store_search(self.handle, q.ctypes.data, nb, b.k, ctypes.byref(opts),
                                                   ids.ctypes.data, scores.ctypes.data), "mnemo_store_search")
        finally:
            for f in filters:
                self.lib.mnemo_filter_destroy(f)
        return ids

    def run(self, peer: str, impl: str, batches: Sequence[int], single_nq: int, nprobe: int = 0,
            setting: str = "exact", **extra: Any) -> None:
        b = self.b
        if nprobe:
            extra["nprobe"] = nprobe
        self.search(0, min(b.nq, 20), nprobe)  # warm-up
        for bs in batches:
            got = np.empty((b.nq, b.k), dtype=np.uint64)
            t0 = time.perf_counter()
            for a0 in range(0, b.nq, bs):
                a1 = min(b.nq, a0 + bs)
                got[a0:a1] = self.search(a0, a1, nprobe)
            dt = time.perf_counter() - t0
            b.timed_emit(peer, impl, setting, "batch", bs, dt, got, with_ids=False, build_s=round(self.build_s, 2),
                         **extra)
        if single_nq:
            nq = min(b.nq, single_nq)
            got = np.empty((nq, b.k), dtype=np.uint64)
            lat = np.zeros(nq)
            t0 = time.perf_counter()
            for j in range(nq):
                t = time.perf_counter()
                got[j] = self.search(j, j + 1, nprobe)[0]
                lat[j] = time.perf_counter() - t
            dt = time.perf_counter() - t0
            b.timed_emit(peer, impl, setting, "one query a call", 1, dt, got, with_ids=False,
                         build_s=round(self.build_s, 2), latency=lat, **extra)

    def run_callers(self, peer: str, impl: str, **extra: Any) -> None:
        """One query a call from --threads Python threads (the faiss peers'
        way), the runtime on one thread."""
        b = self.b
        got = np.empty((b.nq, b.k), dtype=np.uint64)
        lat = np.zeros(b.nq)

        def body(j: int) -> None:
            t = time.perf_counter()
            got[j] = self.search(j, j + 1)[0]
            lat[j] = time.perf_counter() - t

        pool = ThreadPool(b.a.threads)
        try:
            pool.map(body, range(min(b.nq, 20)))  # warm-up
            t0 = time.perf_counter()
            pool.map(body, range(b.nq), chunksize=4)
            dt = time.perf_counter() - t0
        finally:
            pool.close()
            pool.join()
        b.timed_emit(peer, impl, "exact", callers(b), 1, dt, got,
                     with_ids=False, build_s=round(self.build_s, 2), latency=lat, **extra)

    def close(self) -> None:
        self.store.close()
        self.rt.close()


def mnemo_version() -> str:
    try:
        import mnemo
        return mnemo.version()
    except Exception:
        return "?"


def run_mnemo(b: Bench, backend: str, ivf: bool = False, callers: bool = False) -> None:
    # Flat searches on the GPU in each --mnemo-precision (a store each, one
    # after the other); FAST is recorded as its own setting with its recall.
    precisions = [p for p in b.a.mnemo_precision.split(",") if p] if backend == "cuda" and not ivf else ["exact"]
    for precision in precisions:
        run_mnemo_one(b, backend, precision, ivf, callers)


def run_mnemo_one(b: Bench, backend: str, precision: str, ivf: bool, callers: bool) -> None:
    peer = {"cpu": "mnemo", "cuda": "mnemo-cuda"}[backend] + ("-ivf" if ivf else "")
    s = MnemoFiltered(b, backend, precision=precision, threads=1 if callers else 0)
    try:
        where = "CPU" if backend == "cpu" else "CUDA" if precision == "exact" else "CUDA FAST"
        if callers:
            s.run_callers(peer, f"mnemo {where} on one thread a call, where (ALL of the query's tags)",
                          version=mnemo_version())
            return
        batches = [int(v) for v in b.a.batches.split(",")]
        if not ivf:
            # --mnemo-env: the same store searched under each setting of the
            # library's measuring knobs in turn (read at every call), e.g.
            # "MNEMO_FILTER_DENSE=0;MNEMO_FILTER_DENSE=100".
            envs = [e for e in b.a.mnemo_env.split(";") if e.strip()] or [""]
            for i, env in enumerate(envs):
                kv = dict(x.split("=", 1) for x in env.split(",") if "=" in x)
                old = {key: os.environ.get(key) for key in kv}
                os.environ.update(kv)
                try:
                    s.run(peer, f"mnemo {where}, where_each (ALL of the query's tags)", batches,
                          b.a.single if i == 0 else 0, setting=precision + (f", {env}" if env else ""),
                          version=mnemo_version())
                finally:
                    for key, v in old.items():
                        if v is None:
                            os.environ.pop(key, None)
                        else:
                            os.environ[key] = v
            return
        nlist = b.a.nlist or int(round(math.sqrt(b.n)))
        t0 = time.perf_counter()
        s.store.build_index(nlist=nlist, background=False)
        index_s = time.perf_counter() - t0
        sweep = probes(b.a.nprobe, nlist)
        for p in sweep:
            s.run(peer, f"mnemo {where} index, where_each (ALL of the query's tags)", batches[:1],
                  b.a.single if p == sweep[0] else 0, nprobe=p, setting=f"nprobe={p}",
                  nlist=nlist, index_build_s=round(index_s, 2), version=mnemo_version())
    finally:
        s.close()


def run_mnemo_py(b: Bench) -> None:
    """mnemo through its Python API: Store.add(..., tags=[[str]]) and
    Store.search(..., where_each=[{"$tags": {"$all": [...]}}]) / where=."""
    try:
        import mnemo
    except Exception as e:
        raise Skip(f"mnemo not importable ({type(e).__name__}: {e})")
    if not hasattr(mnemo, "Filter"):
        raise Skip("this mnemo package has no Filter (its Python API for filters)")
    rt = mnemo.Runtime("cpu", threads=b.a.threads)
    st = mnemo.Store(rt, b.dim, b.a.dtype, "dot")
    try:
        names = np.array([f"t{r}" for r in range(gen.VOCAB)], dtype=object)
        t0 = time.perf_counter()
        step = 1 << 16
        for a0 in range(0, b.n, step):
            a1 = min(b.n, a0 + step)
            tags = [names[b.tag_ids[b.tag_ptr[i]:b.tag_ptr[i + 1]]].tolist() for i in range(a0, a1)]
            st.add(np.arange(a0, a1, dtype=np.uint64), np.asarray(b.x[a0:a1]), tags=tags)
        build_s = time.perf_counter() - t0
        where = [{"$tags": {"$all": [f"t{t}" for t in qt if t >= 0]}} for qt in b.qtags]
        impl = "mnemo CPU from Python: Store.search(where_each=[{'$tags': {'$all': [...]}}])"
        st.search(b.q[:20], b.k, where_each=where[:20])  # warm-up
        for bs in [int(v) for v in b.a.batches.split(",")]:
            got = np.empty((b.nq, b.k), dtype=np.uint64)
            t0 = time.perf_counter()
            for a0 in range(0, b.nq, bs):
                a1 = min(b.nq, a0 + bs)
                got[a0:a1] = st.search(b.q[a0:a1], b.k, where_each=where[a0:a1])[0]
            dt = time.perf_counter() - t0
            b.timed_emit("mnemo-py", impl, "exact", "batch", bs, dt, got, with_ids=False, build_s=round(build_s, 2),
                         version=mnemo.version())
        if b.a.single:
            nq = min(b.nq, b.a.single)
            got = np.empty((nq, b.k), dtype=np.uint64)
            lat = np.zeros(nq)
            t0 = time.perf_counter()
            for j in range(nq):
                t = time.perf_counter()
                got[j] = st.search(b.q[j], b.k, where=where[j])[0]
                lat[j] = time.perf_counter() - t
            dt = time.perf_counter() - t0
            b.timed_emit("mnemo-py", impl.replace("where_each=[", "where=").replace("}])", "})"), "exact",
                         "one query a call", 1, dt, got, with_ids=False, build_s=round(build_s, 2), latency=lat,
                         version=mnemo.version())
    finally:
        st.close()
        rt.close()


# ------------------------------------------------------------ GPU peers

def torch_cuda():
    try:
        import torch
    except ImportError as e:
        raise Skip(f"torch not installed ({e})")
    if not torch.cuda.is_available():
        raise Skip("no CUDA device visible to torch")
    return torch


class GpuPostings:
    """The inverted index on the GPU (every tag's rows, int64), and each
    batch's keep mask built there from it: a row is kept where it holds
    all of the query's tags (counted per row; a tag's rows are distinct)."""

    def __init__(self, b: Bench, torch: Any, batch: int) -> None:
        self.b, self.torch = b, torch
        t0 = time.perf_counter()
        self.rows = torch.from_numpy(b.post.astype(np.int64)).cuda()
        self.cnt = torch.zeros((batch, b.n), dtype=torch.uint8, device=self.rows.device)
        torch.cuda.synchronize()
        self.build_s = time.perf_counter() - t0

    def keep(self, a0: int, a1: int) -> Any:
        b, torch = self.b, self.torch
        cnt = self.cnt[:a1 - a0]
        cnt.zero_()
        need = torch.from_numpy((b.qtags[a0:a1] >= 0).sum(1).astype(np.uint8)).to(cnt.device)
        for j in range(a0, a1):
            for t in b.qtags[j]:
                if t >= 0:
                    cnt[j - a0, self.rows[int(b.ptr[t]):int(b.ptr[t + 1])]] += 1
        return cnt == need[:, None]


def gpu_batches(b: Bench, torch: Any, batch: Callable[[int, int], Any], bs: int) -> tuple:
    """batch(a0, a1) over every query after one warm-up batch; (seconds,
    ids [nq, k])."""
    batch(0, min(b.nq, bs))
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    outs = [(a0, batch(a0, min(b.nq, a0 + bs))) for a0 in range(0, b.nq, bs)]
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    got = np.full((b.nq, b.k), -1, dtype=np.int64)
    for a0, i in outs:
        got[a0:a0 + len(i)] = i.cpu().numpy()
    return dt, got


def run_torch(b: Bench) -> None:
    torch = torch_cuda()
    x = torch.from_numpy(np.ascontiguousarray(b.x)).cuda()
    qall = torch.from_numpy(b.q).cuda().to(x.dtype)
    bs = b.a.gpu_batch
    gp = GpuPostings(b, torch, bs)

    def batch(a0: int, a1: int) -> Any:
        keep = gp.keep(a0, a1)
        s = qall[a0:a1] @ x.T
        s.masked_fill_(~keep, float("-inf"))
        v, i = torch.topk(s, b.k, dim=1)
        i[torch.isinf(v)] = -1
        return i

    dt, got = gpu_batches(b, torch, batch, bs)
    b.timed_emit("torch", f"torch matmul ({b.a.dtype}) + mask from the tags' rows on the GPU + topk", "exact",
                 "batch", bs, dt, got, with_ids=False, build_s=round(gp.build_s, 2), version=torch.__version__)


def run_cuvs(b: Bench) -> None:
    torch = torch_cuda()
    try:
        from cuvs.common import Resources
        from cuvs.neighbors import brute_force, filters
    except Exception as e:
        raise Skip(f"cuVS not available ({type(e).__name__}: {e})")
    try:
        import cupy as cp
    except ImportError as e:
        raise Skip(f"cupy not installed ({e})")
    sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
    try:
        from cuvs_peer import use_rmm_pool
        pool = use_rmm_pool()
    except Exception as e:
        pool = f"no rmm pool ({e})"
    res = Resources()
    x = torch.from_numpy(np.ascontiguousarray(b.x)).cuda()
    qall = torch.from_numpy(b.q).cuda().to(x.dtype)
    t0 = time.perf_counter()
    index = brute_force.build(x, metric="inner_product", resources=res)
    res.sync()
    build_s = time.perf_counter() - t0
    bs = b.a.gpu_batch
    gp = GpuPostings(b, torch, bs)
    nbr = torch.empty((bs, b.k), dtype=torch.int64, device=x.device)
    dist = torch.empty((bs, b.k), dtype=torch.float32, device=x.device)

    def batch(a0: int, a1: int) -> Any:
        nb = a1 - a0
        keep = cp.asarray(gp.keep(a0, a1).view(torch.uint8).reshape(-1))
        # bit i of the bitmap: row i % n of query i // n, 32 to a word, low bit first
        packed = cp.packbits(keep, bitorder="little")
        if packed.size % 4:
            packed = cp.concatenate([packed, cp.zeros(4 - packed.size % 4, dtype=cp.uint8)])
        brute_force.search(index, qall[a0:a1], b.k, neighbors=nbr[:nb], distances=dist[:nb], resources=res,
                           prefilter=filters.from_bitmap(packed.view(cp.uint32)))
        return nbr[:nb].clone()

    dt, got = gpu_batches(b, torch, batch, bs)
    import cuvs
    b.timed_emit("cuvs", f"cuVS brute_force ({b.a.dtype}) + bitmap prefilter from the tags' rows on the GPU", "exact",
                 "batch", bs, dt, got, with_ids=False, build_s=round(build_s + gp.build_s, 2),
                 version=getattr(cuvs, "__version__", "?"), pool=pool)


# ------------------------------------------------------------------ table

def at_recall(rows: List[Dict[str, Any]], target: float) -> Optional[Dict[str, Any]]:
    """The fastest measured setting of a swept peer with recall >= target."""
    ok = [r for r in rows if r.get("recall") is not None and r["recall"] >= target]
    return max(ok, key=lambda r: r["qps"]) if ok else None


def table(rows: List[Dict[str, Any]]) -> str:
    out = ["| peer | mode | setting | batch | queries/s | search only | recall@10 | build s |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["mode"] == "build":
            out.append(f"| {r['peer']} | build | - | - | - | - | - | {r['build_s']:.2f} "
                       f"(ids of all queries: {r['ids_s']:.2f} s) |")
            continue
        out.append(f"| {r['peer']} | {r['mode']} | {r['setting']} | {r.get('batch', '-')} | {r['qps']:,.1f} | "
                   f"{r.get('search_qps', 0):,.1f} | {r['recall']:.4f} | {r.get('build_s', '-')} |")
    swept = sorted({r["peer"] for r in rows if r.get("nprobe") is not None})
    lines = []
    for p in swept:
        for t in (0.9, 0.95, 0.99):
            best = at_recall([r for r in rows if r["peer"] == p and r["mode"] != "build"], t)
            lines.append(f"{p} at recall >= {t}: " + (f"{best['qps']:,.1f} queries/s ({best['setting']}, recall "
                                                       f"{best['recall']:.4f})" if best else "not reached"))
    return "\n".join(out + [""] + lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dtype", choices=["f32", "f16"], default="f32")
    ap.add_argument("--nq", type=int, default=1000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated, of: " + ", ".join(PEERS))
    ap.add_argument("--batches", default="1000", help="mnemo's batch sizes (queries a call)")
    ap.add_argument("--single", type=int, default=1000, help="queries timed one a call for mnemo (0: none)")
    ap.add_argument("--mnemo-precision", default="exact",
                    help="mnemo-cuda's runtime precisions, comma-separated (exact, fast): a store each")
    ap.add_argument("--mnemo-env", default="",
                    help="mnemo's flat searches once per setting of knobs: 'A=1,B=2;A=0' (';' between settings)")
    ap.add_argument("--numpy-batch", type=int, default=100)
    ap.add_argument("--gpu-batch", type=int, default=100, help="queries a call for cuVS and torch")
    ap.add_argument("--slow-nq", type=int, default=0, help="queries for numpy and faiss-flat (0: all)")
    ap.add_argument("--nlist", type=int, default=0, help="IVF lists (0: sqrt(n))")
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64,128,256,512,1024",
                    help="IVF sweep (values from nlist up replaced by nlist: every list)")
    ap.add_argument("--faiss-selector", choices=sorted(SELECTOR), default="bitmap",
                    help="bitmap: IDSelectorBitmap (O(1) look-up, n/8 bytes a query); batch: IDSelectorBatch "
                         "(a hash set of the ids)")
    ap.add_argument("--machine", default="", help="machine description (default: from /proc/cpuinfo and torch)")
    ap.add_argument("--tag", default="", help="results file tag: bench/results/filtered-TAG.jsonl (default cpu)")
    ap.add_argument("--out", default="", help="results file (appended to)")
    ap.add_argument("--cache", default=None, help="data cache (default $MNEMO_FILTERED_CACHE or ~/.cache)")
    ap.add_argument("--gen-threads", type=int, default=0)
    a = ap.parse_args()
    a.out = a.out or os.path.join(ROOT, "bench", "results", f"filtered-{a.tag or 'cpu'}.jsonl")
    peers = [p.strip() for p in a.peers.split(",") if p.strip()]
    unknown = set(peers) - set(PEERS)
    if unknown:
        ap.error(f"unknown peers {sorted(unknown)}")
    t0 = time.perf_counter()
    b = Bench(a)
    print(f"data: {b.n} x {b.dim} {a.dtype}, {b.nq} queries, {b.meta['tags_per_row']} tags a row, "
          f"selectivity {b.sel.min():.1e} .. {b.sel.max():.2f} ({time.perf_counter() - t0:.1f} s); {b.machine}",
          flush=True)
    b.inverted_index(ids=any(p in peers for p in ("numpy", "faiss-flat", "faiss-ivf", "faiss-hybrid")))
    runners: Dict[str, Callable[[], None]] = {
        "numpy": lambda: run_numpy(b),
        "faiss-flat": lambda: run_faiss_flat(b),
        "faiss-ivf": lambda: run_faiss_ivf(b, hybrid=False),
        "faiss-hybrid": lambda: run_faiss_ivf(b, hybrid=True),
        "mnemo": lambda: run_mnemo(b, "cpu"),
        "mnemo-callers": lambda: run_mnemo(b, "cpu", callers=True),
        "mnemo-py": lambda: run_mnemo_py(b),
        "mnemo-ivf": lambda: run_mnemo(b, "cpu", ivf=True),
        "mnemo-cuda": lambda: run_mnemo(b, "cuda"),
        "mnemo-cuda-ivf": lambda: run_mnemo(b, "cuda", ivf=True),
        "cuvs": lambda: run_cuvs(b),
        "torch": lambda: run_torch(b),
    }
    skipped = []
    for p in peers:
        t1 = time.perf_counter()
        try:
            runners[p]()
            print(f"{p}: {time.perf_counter() - t1:.1f} s", flush=True)
        except Skip as e:
            skipped.append(f"{p}: {e}")
            print(f"skipped {p}: {e}", flush=True)
        except Exception as e:  # one peer's failure must not lose the others' rows
            skipped.append(f"{p}: failed ({type(e).__name__}: {e})")
            print(f"{p} failed:", flush=True)
            traceback.print_exc()
    print()
    print(table(b.rows))
    for s in skipped:
        print("skipped " + s)
    print(f"results appended to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
