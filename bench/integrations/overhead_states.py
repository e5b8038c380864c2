"""The LangChain adapter's search against Store.search, call by call, in
three states of the machine (100k x 384 f32 by default, k = 4, the
benchmark's one-field filters):

  back to back   each call right after the one before it (the caches and
                 the library's worker threads warm);
  after a sweep  a numpy read of --sweep-mb before each pair;
  after FAISS    one FAISS IndexFlatIP search (its own OpenMP runtime, --threads
                 threads) before each pair, as in bench.py, where the peers
                 are called between the adapter's calls.

Each state's pairs run in both orders (adapter first, then Store.search
first), and each figure is a median over --calls pairs. The adapter's
overhead is its median minus Store.search's. Needs the integrations' venv
(faiss-cpu, langchain-core); results as JSON lines (--out).

    python bench/integrations/overhead_states.py --threads 2 --out F
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sweep-mb", type=int, default=64)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench as B  # the benchmark's data and filters
    import faiss
    import mnemo
    import numpy as np
    from mnemo.integrations.langchain import MnemoVectorStore

    faiss.omp_set_num_threads(args.threads)
    data = B.make_data(args.n, args.dim)

    class NoEmbeddings:
        def embed_documents(self, texts: List[str]) -> List[List[float]]:
            raise RuntimeError("vectors are given")

        def embed_query(self, text: str) -> List[float]:
            raise RuntimeError("vectors are given")

    rt = mnemo.Runtime(backend="cpu", threads=args.threads)
    vs = MnemoVectorStore(NoEmbeddings(), runtime=rt)
    vs.add_embeddings(data["texts"], data["v"], data["metas"], ids=data["ids"])
    store = vs.store
    q = data["q"]
    index = faiss.IndexFlatIP(args.dim)
    index.add(data["v"])
    swept = np.ones((args.sweep_mb << 20) // 4, dtype=np.float32)
    befores: Dict[str, Callable[[int], Any]] = {
        "back to back": lambda i: None,
        "after a sweep": lambda i: float(swept.sum()),
        "after FAISS": lambda i: index.search(q[i % 64:i % 64 + 1], args.k),
    }
    rows = []
    for label, (field, value) in B.FILTERS.items():
        flt = {field: value}
        where = vs._plan(flt).where

        def adapter(i: int) -> Any:
            return vs.similarity_search_with_score_by_vector(q[i % 64], k=args.k, filter=flt)

        def direct(i: int) -> Any:
            return store.search(q[i % 64], args.k, where=where)

        adapter(0)
        direct(0)
        for state, before in befores.items():
            a_first: List[float] = []
            d_second: List[float] = []
            d_first: List[float] = []
            a_second: List[float] = []
            for i in range(args.calls):
                for order in (0, 1):
                    before(i)
                    pair = [(adapter, a_first), (direct, d_second)] if order == 0 else \
                        [(direct, d_first), (adapter, a_second)]
                    for fn, out in pair:
                        t = time.perf_counter()
                        fn(i)
                        out.append(time.perf_counter() - t)

            def med(x: List[float]) -> float:
                return round(statistics.median(x) * 1e6, 1)

            row = {"filter": label, "state": state, "n": args.n, "dim": args.dim, "k": args.k,
                   "threads": args.threads, "calls": args.calls,
                   "adapter_first_us": med(a_first), "store_search_second_us": med(d_second),
                   "store_search_first_us": med(d_first), "adapter_second_us": med(a_second),
                   "overhead_adapter_first_us": round(med(a_first) - med(d_second), 1),
                   "overhead_adapter_second_us": round(med(a_second) - med(d_first), 1)}
            rows.append(row)
            print(f"{label:8s} {state:14s} adapter then Store.search {row['adapter_first_us']:7.1f} "
                  f"{row['store_search_second_us']:7.1f} (+{row['overhead_adapter_first_us']:.1f}); "
                  f"Store.search then adapter {row['store_search_first_us']:7.1f} "
                  f"{row['adapter_second_us']:7.1f} (+{row['overhead_adapter_second_us']:.1f}) us", flush=True)
    if args.out:
        with open(args.out, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
