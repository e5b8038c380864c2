"""One search shape under a profiler: builds a store of unit rows, warms the
search up, then runs it between cudaProfilerStart and cudaProfilerStop, so
that `ncu --profile-from-start off` sees only the search's kernels.

    ncu --clock-control none --profile-from-start off --print-summary per-kernel \\
        python3 bench/gpu/profile_search.py DIM DTYPE K [NQ] [STORE_MB] [REPS]
"""

from __future__ import annotations

import sys

import numpy as np


def main(argv: list) -> int:
    import torch
    import mnemo
    dim, dt, k = int(argv[1]), argv[2], int(argv[3])
    nq = int(argv[4]) if len(argv) > 4 else 1
    mb = int(argv[5]) if len(argv) > 5 else 1024
    reps = int(argv[6]) if len(argv) > 6 else 3
    esz = 4 if dt == "f32" else 2
    n = (mb << 20) // (dim * esz)
    tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dt]
    rt = mnemo.Runtime(backend="cuda", precision="fast" if nq >= 16 else "exact")
    store = mnemo.Store(rt, dim, dt, "cosine")
    g = torch.Generator(device="cuda").manual_seed(1)
    step = max(1, (256 << 20) // (dim * 4))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        x = torch.randn(hi - lo, dim, device="cuda", generator=g)
        x = (x / x.norm(dim=1, keepdim=True)).to(tdt)
        host = x.view(torch.int16).cpu().numpy().view(np.uint16) if dt == "bf16" else x.cpu().numpy()
        store.add(np.arange(lo, hi, dtype=np.uint64), host)
    q = torch.randn(nq, dim, device="cuda", generator=g)
    ids = torch.empty((nq, k), dtype=torch.int64, device="cuda")
    sc = torch.empty((nq, k), dtype=torch.float32, device="cuda")
    for _ in range(5):
        store.search(q, k, out_ids=ids, out_scores=sc)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(reps):
        store.search(q, k, out_ids=ids, out_scores=sc)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"profiled {reps} searches: {n} x {dim} {dt}, k={k}, {nq} queries", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
