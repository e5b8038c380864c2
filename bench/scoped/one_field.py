#!/usr/bin/env python3
"""One query's filtered search by one field, as an agent's memory asks it:
100k x 384 f32 memories with an int and a string attribute, k = 4, the
median of 200 Store.search calls per filter (1% int equality, 1% string
equality, a 10% int range).

    MNEMO_LIBRARY=build/lib/libmnemo.so PYTHONPATH=python python3 bench/scoped/one_field.py
"""
import time

import numpy as np

import mnemo


def main() -> None:
    rt = mnemo.Runtime("cpu", threads=2)
    n, d = 100_000, 384
    st = mnemo.Store(rt, d, "f32", "cosine")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, d), dtype=np.float32)
    st.add(np.arange(n, dtype=np.uint64), x,
           attributes=[{"n": int(i % 100), "s": f"v{i % 100}"} for i in range(n)])
    q = rng.standard_normal(d, dtype=np.float32)
    for name, w in [("1% int", {"n": 7}), ("1% str", {"s": "v7"}), ("10% int range", {"n": {"$gte": 90}})]:
        st.search(q, 4, where=w)
        ts = []
        for _ in range(200):
            t = time.perf_counter()
            st.search(q, 4, where=w)
            ts.append(time.perf_counter() - t)
        print(f"{name}: median {np.median(ts) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
