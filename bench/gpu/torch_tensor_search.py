"""Time of a 1 query x 1M x 768 f32 top-10 search from a torch CUDA tensor:
mnemo (Store.search on the device, torch tensors in and out) against
torch.topk(q @ X.T, 10) in the same process. CUDA events, median of 50
after 5 warm-up runs. Usage: torch_tensor_search.py [OUT.jsonl]"""

from __future__ import annotations

import json
import statistics
import sys

import numpy as np
import torch

import mnemo

N, DIM, K, REPS = 1_000_000, 768, 10, 50


def timed(fn) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(N, DIM, device="cuda", generator=gen)
    q = torch.randn(1, DIM, device="cuda", generator=gen)
    rt = mnemo.Runtime(backend="cuda", validate=False)
    store = mnemo.Store(rt, DIM, "f32", "dot")
    store.add(np.arange(N, dtype=np.uint64), x.cpu().numpy())
    ids, _ = store.search(q, K)
    want = torch.topk(q @ x.T, K).indices
    same = set(ids.cpu().numpy().astype(np.int64).ravel().tolist()) == set(
        want.cpu().numpy().ravel().tolist())
    rows = [
        {"case": "1q x 1M x 768 f32 top-10, torch CUDA tensor", "impl": "mnemo Store.search",
         "median_ms": timed(lambda: store.search(q, K))},
        {"case": "1q x 1M x 768 f32 top-10, torch CUDA tensor", "impl": "torch.topk(q @ X.T, 10)",
         "median_ms": timed(lambda: torch.topk(q @ x.T, K))},
    ]
    for row in rows:
        row["same_ids"] = same
        print(json.dumps(row))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)


if __name__ == "__main__":
    main()
