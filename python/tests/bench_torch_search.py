"""One query against 1M x 768 float32 vectors on the GPU, from a torch CUDA
tensor: mnemo's Store.search (mnemo_store_search_device on torch's current
stream) against torch.topk(q @ X.T, 10) in the same process. CUDA events,
median of 20 after warm-up. Not a pytest module (no test_ prefix).

    MNEMO_LIBRARY=.../libmnemo.so PYTHONPATH=python python3 python/tests/bench_torch_search.py [OUT]

Prints one line per row and, with OUT, writes them there too.
"""

from __future__ import annotations

import statistics
import sys
from typing import Callable, List

import numpy as np
import torch

import mnemo

ROWS, DIM, K, REPS, WARMUP = 1_000_000, 768, 10, 20, 5


def median_ms(fn: Callable[[], object]) -> float:
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times: List[float] = []
    for _ in range(REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> int:
    if not torch.cuda.is_available():
        print("bench_torch_search: torch sees no GPU", file=sys.stderr)
        return 77
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(ROWS, DIM, device="cuda", generator=gen)
    q = torch.randn(1, DIM, device="cuda", generator=gen)
    lines = [f"device: {torch.cuda.get_device_name()}; {ROWS} x {DIM} f32, 1 query, k={K}, "
             f"median of {REPS} (CUDA events)"]
    want = torch.topk(q @ x.T, K).indices[0].tolist()
    for validate in (True, False):
        with mnemo.Runtime(backend="cuda", validate=validate) as rt:
            store = mnemo.Store(rt, DIM, "f32", "dot")
            step = 100_000
            for lo in range(0, ROWS, step):  # through the host: the library's add takes host data
                store.add(np.arange(lo, lo + step, dtype=np.uint64), x[lo:lo + step])
            ids, _ = store.search(q, K)
            torch.cuda.synchronize()
            got = ids[0].tolist()
            ms = median_ms(lambda: store.search(q, K))
            lines.append(f"mnemo Store.search(torch tensor), validate={int(validate)}: {ms:.3f} ms"
                         f" (top-{K} equal to torch: {sorted(got) == sorted(want)})")
            store.close()
    ms = median_ms(lambda: torch.topk(q @ x.T, K))
    lines.append(f"torch.topk(q @ X.T, {K}): {ms:.3f} ms")
    text = "\n".join(lines)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
