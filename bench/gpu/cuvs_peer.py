"""The cuVS peer: cuvs.neighbors.brute_force as a GPU user would set it up for
repeated single queries: an RMM pool for its allocations, one Resources kept
across calls, preallocated outputs, inner product on unit rows (the cosine of
unit vectors). Used by user_bench.py; on its own it times the recall rows of
torch_peer.py and writes JSON lines:

    python3 bench/gpu/cuvs_peer.py [OUT.jsonl]

cuVS takes float32 and float16 data (no bfloat16); neighbors are int64.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any, List, Optional, Tuple

_POOL_SET = False


def load() -> Tuple[Optional[Any], str]:
    """(the cuvs.neighbors.brute_force module, "") or (None, why not)."""
    try:
        from cuvs.neighbors import brute_force
    except Exception as exc:  # ImportError, or a CUDA / library mismatch
        return None, f"cuVS not available ({type(exc).__name__}: {exc})"
    return brute_force, ""


def use_rmm_pool(initial_bytes: int = 1 << 30) -> str:
    """An RMM pool as the current device resource (once); returns what was set."""
    global _POOL_SET
    if _POOL_SET:
        return "rmm pool"
    try:
        import rmm
        pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=initial_bytes)
        rmm.mr.set_current_device_resource(pool)
    except Exception as exc:
        return f"no rmm pool ({type(exc).__name__}: {exc})"
    _POOL_SET = True
    return "rmm pool"


class BruteForce:
    """One brute_force index over `dataset` (a torch CUDA tensor [n, dim],
    float32 or float16, unit rows), searched with preallocated outputs."""

    def __init__(self, dataset: Any, metric: str = "inner_product", stream: Optional[int] = None) -> None:
        brute_force, why = load()
        if brute_force is None:
            raise RuntimeError(why)
        from cuvs.common import Resources
        self.pool = use_rmm_pool()
        self._bf = brute_force
        # stream: a cudaStream_t (e.g. torch's current stream) for its work,
        # so that CUDA events on that stream time it.
        # (torch's default stream is handle 0: tested against None, not 0.)
        self.resources = Resources(stream=stream) if stream is not None else Resources()
        self.on_torch_stream = stream is not None
        self.dataset = dataset  # cuVS keeps a view: the tensor must outlive the index
        self.index = brute_force.build(dataset, metric=metric, resources=self.resources)
        self.resources.sync()
        self._outs: dict = {}

    def outputs(self, nq: int, k: int) -> Tuple[Any, Any]:
        import torch
        key = (nq, k)
        if key not in self._outs:
            dev = self.dataset.device
            self._outs[key] = (torch.empty((nq, k), dtype=torch.int64, device=dev),
                               torch.empty((nq, k), dtype=torch.float32, device=dev))
        return self._outs[key]

    def search(self, queries: Any, k: int) -> Tuple[Any, Any]:
        """Queues the search (queries [nq, dim] of the dataset's dtype); the
        caller synchronises (resources.sync() or a device sync)."""
        neighbors, distances = self.outputs(queries.shape[0], k)
        self._bf.search(self.index, queries, k, neighbors=neighbors, distances=distances,
                        resources=self.resources)
        return neighbors, distances


def _median_ms(fn: Any, reps: int = 50, warm: int = 10) -> float:
    import torch
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times: List[float] = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(path: str) -> int:
    try:
        import torch
    except ImportError:
        print("cuvs_peer: torch is not installed", file=sys.stderr)
        return 77
    bf, why = load()
    if bf is None:
        print(why, file=sys.stderr)
        return 77
    rows = []
    for name, n, dt, k in [("recall 1q x 10k x 768 f32 k=10", 10_000, torch.float32, 10),
                           ("recall 1q x 100k x 768 f32 k=10", 100_000, torch.float32, 10),
                           ("recall 1q x 1M x 768 f32 k=10", 1_000_000, torch.float32, 10),
                           ("recall 1q x 1M x 768 f16 k=10", 1_000_000, torch.float16, 10),
                           ("recall 1q x 1M x 768 f32 k=1000", 1_000_000, torch.float32, 1000)]:
        g = torch.Generator(device="cuda").manual_seed(100)
        x = torch.randn(n, 768, device="cuda", generator=g)
        x = (x / x.norm(dim=1, keepdim=True)).to(dt)
        q = x[:1].clone()
        peer = BruteForce(x)
        ms = _median_ms(lambda: peer.search(q, k))
        rows.append({"workload": name, "impl": f"cuvs brute_force ({peer.pool})", "median_ms": ms})
        print(f"{name:40s} cuvs brute_force {ms:9.4f} ms", flush=True)
        peer = x = q = None  # freed before the next row's data
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "cuvs_gpu.jsonl"))
