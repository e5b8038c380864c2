"""The framework adapters' targets, measured in one process on one set of
data: 100,000 memories x 384 dims f32 (unit rows, cosine), each with a
text and four metadata fields; queries of k = 4 filtered on one field.

Search (per adapter: LangChain MnemoVectorStore, LangGraph MnemoStore,
LlamaIndex MnemoVectorStore, mem0's "mnemo" provider):
  - the adapter's call with the query vector given (LangGraph, whose
    search takes text, embeds through a table look-up of precomputed
    vectors);
  - within each call, the time of the Store.search calls it makes, taken
    by wrapping that store's search method, and of the library searches of
    the extension's search_rows (a search and its hits' records in one
    call from Python), timed in the extension around mnemo_store_search
    alone (without Store.search's own Python work, so the overhead is if
    anything overstated): the adapter's overhead is the call minus its
    search time, call by call (the machine's noise is in both and
    cancels);
  - Store.search alone on the same store with the adapter's own filter,
    interleaved with the adapter's calls;
  - pairs: the adapter's call and Store.search alone with the same query
    and filter, in the same state: cold (each after a sweep over
    --sweep-mb of memory, more than the caches hold, as after other work)
    and warm (the adapter's call made once untimed first, then each right
    after the other, which first in turn: each search of a large masked
    scan after the sweep is faster than the one before as its rows come
    into the caches), the store's search not wrapped; the A/B overhead is
    the median call minus the median Store.search, for each state;
  - LangChain's InMemoryVectorStore (filter: a Python function, its only
    kind) and its FAISS store (langchain-community, IndexFlatIP on the same
    unit rows; dict filter, applied to fetch_k candidates: the default 20,
    which returns fewer than k, and the smallest fetch_k of the form
    20 * 2^j returning k for every query), on the same rows and queries.
Adds (vectors given; texts and metadata): 100,000 memories in batches of
10,000 through each adapter, Store.add with the same fields, and the two
LangChain stores.

The machine is shared: each line records the load average and the CPU
share other processes took during the measurement.

With --paths N, each adapter's call is also timed both ways round by round,
each after a sweep: its search and hits' records in one call of the
extension, and Store.search then the records read (the extension's
search_rows declined), beside Store.search alone.

Usage: bench.py [--n 100000] [--dim 384] [--calls 200] [--pair-calls 100] [--threads 2]
                [--paths 0] [--out bench/results/integrations-cpu.jsonl]
(make bench-integrations runs it in the integrations' venv.)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import time
import uuid
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

import mnemo


def parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peer-calls", type=int, default=10, help="InMemoryVectorStore calls")
    ap.add_argument("--pair-calls", type=int, default=100,
                    help="cold and warm pairs (adapter call, Store.search alone) per adapter")
    ap.add_argument("--sweep-mb", type=int, default=64,
                    help="memory read before each cold call of the pairs")
    ap.add_argument("--paths", type=int, default=0,
                    help="rounds of the path comparison: each adapter's call with its search and "
                         "reads in one call of the extension, and with Store.search then the "
                         "records read, each after a sweep (0: not run)")
    ap.add_argument("--out", default="bench/results/integrations-cpu.jsonl")
    ap.add_argument("--wait-quiet", type=float, default=120.0,
                    help="seconds to wait for the 1-minute load to fall below 1.5 first")
    return ap.parse_args()


# The machine.

def _cpu_busy() -> Tuple[float, float]:
    """(busy, total) jiffies of the machine from /proc/stat."""
    with open("/proc/stat") as f:
        parts = [float(x) for x in f.readline().split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts) - idle, sum(parts)


class Meter:
    """Load and other processes' CPU share over a measurement."""

    def __enter__(self) -> "Meter":
        self.load0 = os.getloadavg()[0]
        self.busy0, self.total0 = _cpu_busy()
        self.own0 = sum(os.times()[:2])
        return self

    def __exit__(self, *exc: Any) -> None:
        busy, total = _cpu_busy()
        own = sum(os.times()[:2]) - self.own0
        hz = os.sysconf("SC_CLK_TCK")
        span = (total - self.total0) or 1.0
        self.others = max(0.0, ((busy - self.busy0) - own * hz) / span)
        self.load = (self.load0, os.getloadavg()[0])

    def fields(self) -> Dict[str, Any]:
        return {"load": [round(x, 2) for x in self.load], "others_cpu_share": round(self.others, 3)}


def wait_quiet(limit: float) -> None:
    end = time.time() + limit
    while os.getloadavg()[0] > 1.5 and time.time() < end:
        time.sleep(5)


def source() -> str:
    """The commit the library was built from as far as the tree tells: HEAD,
    and whether core/, cabi/ and kernels/ differ from it."""
    import subprocess
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "core", "cabi", "kernels"]
                               ).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted core changes" if dirty else "")


def library() -> Dict[str, Any]:
    """The libmnemo file this process loaded: its path, MD5 and modification
    time (the source line says what the tree held at the run, which need
    not be what the library was built from)."""
    import hashlib
    path = os.path.realpath(mnemo.library_path())
    with open(path, "rb") as f:
        md5 = hashlib.md5(f.read()).hexdigest()
    built = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(path)))
    return {"library": path, "library_md5": md5, "library_built": built}


# Data.

WORDS = ("memory store search filter agent tea coffee rain tokyo paris report sales engine "
         "vector index query answer note plan task").split()


def make_data(n: int, dim: int, seed: int = 0) -> Dict[str, Any]:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    picks = rng.integers(0, len(WORDS), size=(n, 6))
    texts = [f"note {i}: " + " ".join(WORDS[j] for j in row) for i, row in enumerate(picks)]
    metas = [{"source": f"s{i % 10}", "topic": f"t{i % 100}", "group": i % 100, "page": i // 10}
             for i in range(n)]
    q = rng.standard_normal((64, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return {"v": v, "texts": texts, "metas": metas, "ids": [f"doc-{i}" for i in range(n)], "q": q}


# One field each: a string matching 10% and 1% of the memories, and an int
# matching 1% (mnemo's planner estimates string equality from its postings;
# an int's it does not, which decides its plan).
FILTERS = {"10% str": ("source", "s3"), "1% str": ("topic", "t7"), "1% int": ("group", 7)}


class Lookup:
    """An Embeddings that returns precomputed vectors (embedding time out of
    the measurement): texts it was given, or the queries' names."""

    def __init__(self, table: Dict[str, Any]) -> None:
        self.table = table

    def embed_documents(self, texts: List[str]) -> List[List[float]]:
        return [self.table[t] for t in texts]

    def embed_query(self, text: str) -> List[float]:
        return self.table[text]


def lookup_embeddings(table: Dict[str, Any]) -> Any:
    from langchain_core.embeddings import Embeddings

    class LookupEmbeddings(Lookup, Embeddings):
        pass

    return LookupEmbeddings(table)


# Timing.

class InnerTimer:
    """Wraps a store's search: the time of each call, summed per adapter call."""

    def __init__(self, store: mnemo.Store) -> None:
        self.store = store
        self.orig = store.search
        self.spent = 0.0
        self.calls = 0

        def timed(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return self.orig(*a, **kw)
            finally:
                self.spent += time.perf_counter() - t
                self.calls += 1

        self.timed = timed
        store.search = timed  # type: ignore[method-assign]

    def install(self) -> None:
        self.store.search = self.timed  # type: ignore[method-assign]

    def reset(self) -> None:
        self.spent, self.calls = 0.0, 0

    def remove(self) -> None:
        del self.store.search


def _fused_time() -> Tuple[int, float]:
    """(calls, seconds) of the extension's search_rows searches so far on
    this thread ((0, 0.0) for an extension without it)."""
    from mnemo import _native
    timer = getattr(_native.ext, "search_rows_time", None)
    return timer() if timer is not None else (0, 0.0)


def us(x: float) -> float:
    return round(x * 1e6, 1)


def pct(xs: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p))


class Contender:
    """One way to run the search: its call's times and result counts and,
    for a mnemo adapter, the Store.search time inside each call (its store's
    search wrapped) and Store.search alone on that store with the adapter's
    filter, right after."""

    def __init__(self, name: str, call: Callable[[int], int], store: Any = None,
                 where: Any = None, extra: Optional[Dict[str, Any]] = None) -> None:
        self.name, self.call, self.store, self.where = name, call, store, where
        self.extra = extra or {}
        self.total: List[float] = []
        self.inner: List[float] = []
        self.inner_calls: List[int] = []
        self.direct: List[float] = []
        self.counts: List[int] = []
        self.cold_total: List[float] = []
        self.cold_direct: List[float] = []
        self.warm_total: List[float] = []
        self.warm_direct: List[float] = []
        self.timer = InnerTimer(store) if store is not None else None

    def warm(self, q: np.ndarray, k: int) -> None:
        for i in range(3):
            self.call(i)
            if self.timer is not None:
                self.timer.orig(q[i], k, where=self.where)

    def run(self, i: int, q: np.ndarray, k: int) -> None:
        if self.timer is not None:
            self.timer.reset()
            fused0 = _fused_time()
        t = time.perf_counter()
        self.counts.append(self.call(i))
        self.total.append(time.perf_counter() - t)
        if self.timer is not None:
            fused1 = _fused_time()
            self.inner.append(self.timer.spent + fused1[1] - fused0[1])
            self.inner_calls.append(self.timer.calls + fused1[0] - fused0[0])
            t = time.perf_counter()
            self.timer.orig(q[i % len(q)], k, where=self.where)
            self.direct.append(time.perf_counter() - t)

    def run_pairs(self, i: int, q: np.ndarray, k: int, sweep: Callable[[], Any]) -> None:
        """The adapter's call and Store.search alone with the same query and
        filter, each timed in the same state: cold (after a sweep over more
        memory than the caches hold, as after other work), then warm (each
        right after the other, the same rows just read, which first in turn:
        the second of two searches after the sweep gains from the rows the
        first brought into the caches, about 50 us with the 10% filter)."""
        assert self.timer is not None
        query = q[i % len(q)]
        self.timer.remove()  # the adapter's calls here as a user makes them
        try:
            self._pairs(i, query, k, sweep)
        finally:
            self.timer.install()

    def _pairs(self, i: int, query: np.ndarray, k: int, sweep: Callable[[], Any]) -> None:
        assert self.timer is not None
        orig = self.timer.orig

        def adapter(into: List[float]) -> None:
            t = time.perf_counter()
            self.call(i)
            into.append(time.perf_counter() - t)

        def direct(into: List[float]) -> None:
            t = time.perf_counter()
            orig(query, k, where=self.where)
            into.append(time.perf_counter() - t)

        sweep()
        adapter(self.cold_total)
        sweep()
        direct(self.cold_direct)
        self.call(i)  # the adapter's own code and objects warm too
        # Which of the warm pair goes first, in turn.
        if i % 2:
            direct(self.warm_direct)
            adapter(self.warm_total)
        else:
            adapter(self.warm_total)
            direct(self.warm_direct)

    def record(self, label: str) -> Dict[str, Any]:
        out: Dict[str, Any] = {"adapter": self.name, "filter": label, "calls": len(self.total),
                               "median_us": us(statistics.median(self.total)),
                               "p10_us": us(pct(self.total, 10)), "p90_us": us(pct(self.total, 90)),
                               "results_mean": statistics.mean(self.counts)}
        if self.timer is not None:
            over = [a - b for a, b in zip(self.total, self.inner)]
            out.update({"store_search_in_call_median_us": us(statistics.median(self.inner)),
                        "store_search_calls_per_call": statistics.mean(self.inner_calls),
                        "overhead_median_us": us(statistics.median(over)),
                        "overhead_p10_us": us(pct(over, 10)), "overhead_p90_us": us(pct(over, 90)),
                        "store_search_alone_median_us": us(statistics.median(self.direct))})
        for state in ("cold", "warm"):
            total, direct = getattr(self, f"{state}_total"), getattr(self, f"{state}_direct")
            if total:
                out.update({
                    f"pairs_{state}": len(total),
                    f"pair_{state}_call_median_us": us(statistics.median(total)),
                    f"pair_{state}_store_search_median_us": us(statistics.median(direct)),
                    f"overhead_{state}_ab_us": us(statistics.median(total)
                                                  - statistics.median(direct))})
        out.update(self.extra)
        return out


class _SeparateReads:
    """The extension with search_rows declining every call: the adapters
    then search through Store.search and read the hits after it."""

    def __init__(self, ext: Any) -> None:
        self._ext = ext

    def __getattr__(self, name: str) -> Any:
        if name == "search_rows":
            return lambda *a: None
        return getattr(self._ext, name)


def measure_paths(cases: Sequence[Tuple[str, Any, Callable[[int], int], Any]], q: np.ndarray,
                  k: int, rounds: int, sweep: Callable[[], Any]) -> Dict[str, Dict[str, float]]:
    """Per adapter, median call times (us) after a sweep: with the one call
    ("one_call"), with Store.search then the read ("separate"),
    Store.search alone ("store_search") and the library's search alone
    ("library_search"); the two paths in alternating order round by
    round."""
    from mnemo.integrations import _common as c
    one, separate = c._ext, _SeparateReads(c._ext)
    times: Dict[Tuple[str, str], List[float]] = {}
    try:
        for i in range(rounds):
            for name, store, call, where in cases:
                order = (("one_call", one), ("separate", separate))
                for path, ext in (order if i % 2 == 0 else order[::-1]):
                    c._ext = ext
                    sweep()
                    t = time.perf_counter()
                    call(i)
                    times.setdefault((name, path), []).append(time.perf_counter() - t)
                c._ext = one
                sweep()
                t = time.perf_counter()
                store.search(q[i % len(q)], k, where=where)
                times.setdefault((name, "store_search"), []).append(time.perf_counter() - t)
                # The same search in the library alone (timed in the
                # extension, nothing read): Store.search's own Python work
                # is the difference.
                sweep()
                n0, s0 = _fused_time()
                one.search_rows(store.handle, q[i % len(q)], k, 0 if where is None else where.handle,
                                store.dim, 0, c.Row)
                n1, s1 = _fused_time()
                if n1 == n0 + 1:
                    times.setdefault((name, "library_search"), []).append(s1 - s0)
    finally:
        c._ext = one
    return {name: {path: us(statistics.median(times[(name, path)]))
                   for path in ("one_call", "separate", "store_search", "library_search")
                   if (name, path) in times}
            for name, _, _, _ in cases}


def measure_peer(name: str, call: Callable[[int], int], calls: int, label: str,
                 extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    c_ = Contender(name, call, extra=extra)
    call(0)
    for i in range(calls):
        c_.run(i, np.empty((1, 1)), 0)
    return c_.record(label)


def timed_adds(add: Callable[[slice], None], n: int, batch: int) -> float:
    gc.collect()
    t = time.perf_counter()
    for b in range(0, n, batch):
        add(slice(b, min(b + batch, n)))
    return n / (time.perf_counter() - t)


# The stores.

def build_all(data: Dict[str, Any], args: argparse.Namespace, rt: mnemo.Runtime,
              emit: Callable[[Dict[str, Any]], None], n: int, report: bool = True) -> Dict[str, Any]:
    from langgraph.store.base import PutOp
    from llama_index.core.schema import TextNode

    import mnemo.integrations.mem0 as m0
    from mnemo.integrations import _common as c
    from mnemo.integrations.langchain import MnemoVectorStore as LCStore
    from mnemo.integrations.langgraph import MnemoStore
    from mnemo.integrations.llama_index import MnemoVectorStore as LIStore

    v, texts, metas, ids = data["v"][:n], data["texts"][:n], data["metas"][:n], data["ids"][:n]
    table = {t: row for t, row in zip(texts, v)}
    table.update({f"q{i}": row for i, row in enumerate(data["q"])})
    emb = lookup_embeddings(table)
    made: Dict[str, Any] = {}

    def adds(name: str, add: Callable[[slice], None], note: str = "") -> None:
        with Meter() as m:
            rate = timed_adds(add, n, min(args.batch, n))
        if not report:
            return
        emit({"op": "add", "adapter": name, "memories_per_s": round(rate), "batch": args.batch,
              "note": note, **m.fields()})
        print(f"  add {name:<22} {rate:>9,.0f} /s  {note}", flush=True)

    # Store.add with the fields the LangChain adapter writes: the floor.
    raw = mnemo.Store(rt, args.dim)
    payloads = [c.dumps({"text": t, "metadata": m}) for t, m in zip(texts, metas)]
    attrs = [c.project(m, nested=False)[0] for m in metas]
    adds("Store.add", lambda s: raw.add(np.arange(s.start, s.stop, dtype=np.uint64), v[s],
                                        keys=ids[s], attributes=attrs[s], payloads=payloads[s]),
         "keys, attributes and JSON payloads prepared beforehand")
    raw = None  # the rows' memory back (the lambda above reads it no more)

    lc = LCStore(emb, runtime=rt)
    adds("langchain", lambda s: lc.add_embeddings(texts[s], v[s], metas[s], ids=ids[s]))
    made["langchain"] = lc

    lg = MnemoStore(index={"dims": args.dim, "embed": emb, "fields": ["text"]}, runtime=rt)
    puts = [PutOp(("docs",), ids[i], {"text": texts[i], **metas[i]}) for i in range(n)]
    adds("langgraph", lambda s: lg.batch(puts[s]), "PutOps made beforehand; vectors by look-up")
    puts = None  # the rows' memory back (the lambda above reads it no more)
    made["langgraph"] = lg

    nodes = [TextNode(id_=ids[i], text=texts[i], metadata=metas[i], embedding=v[i].tolist())
             for i in range(n)]
    li = LIStore(runtime=rt)
    adds("llama_index", lambda s: li.add(nodes[s]), "TextNodes (embedding lists) made beforehand")
    nodes = None  # the rows' memory back (the lambda above reads it no more)
    made["llama_index"] = li

    m0_vs = m0.MnemoVectorStore(collection_name="bench", embedding_model_dims=args.dim,
                                store_name=f"bench-{uuid.uuid4()}")
    m0_payloads = [{"data": t, "hash": uuid.uuid5(uuid.NAMESPACE_URL, t).hex,
                    "created_at": "2026-01-01T00:00:00+00:00", "user_id": m["source"], **m}
                   for t, m in zip(texts, metas)]
    adds("mem0", lambda s: m0_vs.insert(v[s], m0_payloads[s], ids[s]),
         "provider insert (mem0's Memory adds one memory a call)")
    m0_payloads = None  # the rows' memory back (the lambda above reads it no more)
    made["mem0"] = m0_vs
    return made


def main() -> None:
    args = parse()
    wait_quiet(args.wait_quiet)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import faiss
    faiss.omp_set_num_threads(args.threads)
    from langchain_community.vectorstores import FAISS
    from langchain_community.vectorstores.utils import DistanceStrategy
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery

    rt = mnemo.Runtime(backend="cpu", threads=args.threads)
    data = make_data(args.n, args.dim)
    q, k = data["q"], args.k
    base = {"bench": "integrations", "source": source(), **library(), "n": args.n, "dim": args.dim,
            "dtype": "f32", "k": k,
            "threads": args.threads, "cpu": platform.processor() or platform.machine(),
            "cores": os.cpu_count(), "mnemo": mnemo.version(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    lines: List[Dict[str, Any]] = []

    def emit(rec: Dict[str, Any]) -> None:
        lines.append({**base, **rec})

    print(f"{args.n} x {args.dim} f32, k = {k}, {args.threads} threads", flush=True)
    # Read before each cold call of the pairs: more than the caches hold.
    swept = np.ones(args.sweep_mb * (1 << 20) // 8)

    def sweep() -> float:
        return float(swept.sum())
    made = build_all(data, args, rt, emit, args.n)
    lc = made["langchain"]
    # The same adapters over the first 1,000 memories, whose scan leaves the
    # caches warm: the adapters' own work without the misses a 150 MB scan
    # causes in it.
    small = build_all(data, args, rt, emit, 1000, report=False)

    texts, metas, ids, v = data["texts"], data["metas"], data["ids"], data["v"]
    table = {f"q{i}": row for i, row in enumerate(q)}
    table.update({t: row for t, row in zip(texts, v)})
    emb = lookup_embeddings(table)

    # LangChain's stores on the same rows.
    with Meter() as m:
        t = time.perf_counter()
        mem = InMemoryVectorStore(emb)
        for b in range(0, args.n, args.batch):
            s = slice(b, b + args.batch)
            mem.add_documents([Document(id=i, page_content=x, metadata=md) for i, x, md in
                               zip(ids[s], texts[s], metas[s])])
        rate = args.n / (time.perf_counter() - t)
    emit({"op": "add", "adapter": "InMemoryVectorStore", "memories_per_s": round(rate),
          "batch": args.batch, "note": "Documents made in the timing; vectors by look-up",
          **m.fields()})
    print(f"  add {'InMemoryVectorStore':<22} {rate:>9,.0f} /s", flush=True)
    with Meter() as m:
        t = time.perf_counter()
        fs = FAISS.from_embeddings(list(zip(texts[:args.batch], v[:args.batch])), emb,
                                   metadatas=metas[:args.batch], ids=ids[:args.batch],
                                   distance_strategy=DistanceStrategy.MAX_INNER_PRODUCT)
        for b in range(args.batch, args.n, args.batch):
            s = slice(b, b + args.batch)
            fs.add_embeddings(list(zip(texts[s], v[s])), metadatas=metas[s], ids=ids[s])
        rate = args.n / (time.perf_counter() - t)
    emit({"op": "add", "adapter": "FAISS (langchain-community)", "memories_per_s": round(rate),
          "batch": args.batch, "note": "IndexFlatIP", **m.fields()})
    print(f"  add {'FAISS':<22} {rate:>9,.0f} /s", flush=True)

    # Unfiltered, for scale: a filter's plan costs at most about this.
    with Meter() as m:
        rec = measure_peer("Store.search (no filter)",
                           lambda i: int(np.count_nonzero(lc.store.search(q[i % 64], k)[0]
                                                          != mnemo.NO_ID)), 100, "none")
    rec.update(m.fields())
    emit({"op": "search", **rec})
    with Meter() as m:
        rec = measure_peer("FAISS (langchain-community)", lambda i: len(
            fs.similarity_search_with_score_by_vector(q[i % 64].tolist(), k=k)), 50, "none")
    rec.update(m.fields())
    emit({"op": "search", **rec})
    print(f"  search    none Store.search {lines[-2]['median_us']:>9.0f} us, FAISS "
          f"{rec['median_us']:.0f} us", flush=True)

    for label, (field, value) in FILTERS.items():
        flt = {field: value}
        li_f = MetadataFilters(filters=[MetadataFilter(key=field, value=value)])
        m0_f = {field: value}

        def cases(sets: Dict[str, Any]) -> List[Tuple[str, Any, Callable[[int], int], Any]]:
            lc, lg, li, m0_vs = sets["langchain"], sets["langgraph"], sets["llama_index"], sets["mem0"]

            def lc_call(i: int) -> int:
                return len(lc.similarity_search_with_score_by_vector(q[i % 64], k=k, filter=flt))

            def lg_call(i: int) -> int:
                return len(lg.search(("docs",), query=f"q{i % 64}", filter=flt, limit=k))

            def li_call(i: int) -> int:
                return len(li.query(VectorStoreQuery(query_embedding=q[i % 64].tolist(),
                                                     similarity_top_k=k, filters=li_f)).ids)

            def m0_call(i: int) -> int:
                return len(m0_vs.search("q", q[i % 64].tolist(), top_k=k, filters=m0_f))

            return [("langchain", lc.store, lc_call, lc._plan(flt).where),
                    ("langgraph", lg.store, lg_call, lg._where(("docs",), flt, "vectors")),
                    ("llama_index", li.client, li_call, li._plan(None, li_f).where),
                    ("mem0", m0_vs._backing.store, m0_call, m0_vs._plan(m0_f).where)]

        fetch_k = 20
        while True:
            got = [len(fs.similarity_search_with_score_by_vector(q[i].tolist(), k=k, filter=flt,
                                                                fetch_k=fetch_k))
                   for i in range(64)]
            if min(got) == k or fetch_k >= args.n:
                break
            fetch_k *= 2

        def fs_call(fk: int) -> Callable[[int], int]:
            return lambda i: len(fs.similarity_search_with_score_by_vector(
                q[i % 64].tolist(), k=k, filter=flt, fetch_k=fk))

        def mem_call(i: int) -> int:
            return len(mem.similarity_search_with_score_by_vector(
                q[i % 64].tolist(), k=k, filter=lambda d: d.metadata[field] == value))

        # Every contender in turn, call by call, so that the machine's other
        # work falls on all of them alike; InMemoryVectorStore (a second or
        # so a call) every calls / peer_calls rounds.
        contenders = [Contender(name, call, store, where) for name, store, call, where in cases(made)]
        peers = [Contender("FAISS (langchain-community)", fs_call(20), extra={"fetch_k": 20}),
                 Contender("FAISS (langchain-community)", fs_call(fetch_k),
                           extra={"fetch_k": fetch_k})]
        inmem = Contender("InMemoryVectorStore", mem_call,
                          extra={"note": "filter: a Python function (its only kind)"})
        for c_ in contenders + peers + [inmem]:
            c_.warm(q, k)
        every = max(1, args.calls // args.peer_calls)
        with Meter() as m:
            for i in range(args.calls):
                for c_ in contenders + peers:
                    c_.run(i, q, k)
                if i % every == 0:
                    inmem.run(i, q, k)
        # The same adapters, call against Store.search alone in the same
        # state: cold (after a sweep) and warm.
        with Meter() as pm:
            for i in range(args.pair_calls):
                for c_ in contenders:
                    c_.run_pairs(i, q, k, sweep)
        with Meter() as paths_m:
            paths = measure_paths(cases(made), q, k, args.paths, sweep) if args.paths else {}
        for name, got in paths.items():
            emit({"op": "search-paths", "adapter": name, "filter": label, "rounds": args.paths,
                  "sweep_mb": args.sweep_mb, **{f"{p}_median_us": v for p, v in got.items()},
                  **paths_m.fields()})
            print(f"  paths  {label:>7} {name:<12} one call {got['one_call']:6.0f} us, "
                  f"Store.search then read {got['separate']:6.0f} us, Store.search alone "
                  f"{got['store_search']:6.0f} us, its library search "
                  f"{got.get('library_search', float('nan')):6.0f} us (each after a "
                  f"{args.sweep_mb} MB sweep)", flush=True)
        mem_us = inmem.record(label)["median_us"]
        for c_ in peers + [inmem]:
            emit({"op": "search", **c_.record(label), **m.fields()})
        for c_ in contenders:
            rec = c_.record(label)
            rec["speedup_vs_inmemory"] = round(mem_us / rec["median_us"], 1)
            rec["speedup_vs_faiss_fetch20"] = round(peers[0].record(label)["median_us"]
                                                    / rec["median_us"], 2)
            rec["speedup_vs_faiss_k_results"] = round(peers[1].record(label)["median_us"]
                                                      / rec["median_us"], 2)
            rec["faiss_fetch_k_for_k_results"] = fetch_k
            rec["pairs_load"] = pm.fields()["load"]
            rec["pairs_others_cpu_share"] = pm.fields()["others_cpu_share"]
            rec["sweep_mb"] = args.sweep_mb
            emit({"op": "search", **rec, **m.fields()})
            print(f"  search {label:>7} {rec['adapter']:<12} A/B overhead cold "
                  f"{rec['overhead_cold_ab_us']:>6.1f} us ({rec['pair_cold_call_median_us']:.0f} - "
                  f"{rec['pair_cold_store_search_median_us']:.0f}), warm "
                  f"{rec['overhead_warm_ab_us']:>6.1f} us ({rec['pair_warm_call_median_us']:.0f} - "
                  f"{rec['pair_warm_store_search_median_us']:.0f})", flush=True)
            print(f"  search {label:>7} {rec['adapter']:<12} {rec['median_us']:>8.0f} us  "
                  f"overhead {rec['overhead_median_us']:>6.1f} us  (Store.search alone "
                  f"{rec['store_search_alone_median_us']:.0f} us)  x{rec['speedup_vs_inmemory']} "
                  f"InMemory, x{rec['speedup_vs_faiss_k_results']} FAISS", flush=True)
        for c_ in peers + [inmem]:
            r = c_.record(label)
            print(f"  search {label:>7} {r['adapter'][:12]:<12} {r['median_us']:>8.0f} us "
                  f"({r['results_mean']:.2f} results) {r.get('fetch_k', '')}", flush=True)
        # The same adapters over 1,000 memories: their own work with warm caches.
        small_cases = [Contender(name, call, store, where) for name, store, call, where in cases(small)]
        for c_ in small_cases:
            c_.warm(q, k)
        with Meter() as m:
            for i in range(args.calls):
                for c_ in small_cases:
                    c_.run(i, q, k)
        for c_ in small_cases:
            rec = c_.record(label)
            emit({"op": "search", **rec, "n": 1000, **m.fields(),
                  "note": "1,000 memories: the adapter's overhead with warm caches"})
            print(f"  search {label:>7} {rec['adapter']:<12} n=1000: overhead "
                  f"{rec['overhead_median_us']:>6.1f} us", flush=True)

    with open(args.out, "w") as f:
        for rec in lines:
            f.write(json.dumps(rec) + "\n")
    print(f"{len(lines)} lines to {args.out}")


if __name__ == "__main__":
    main()
