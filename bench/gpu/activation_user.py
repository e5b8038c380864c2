"""Activation search as users call it: Store.search from Python on a torch
CUDA query, plain against activation, and torch computing the same keys.

1 query, k = 10, cosine over 1M x 768 f32 memories with last-access times and
importances. Activation calls take Store.search's general path (an options
struct; the query check waited for before the search), plain calls with the
default options its fast path; plain through the general path is timed too. Wall clock with a device sync, medians; the modes alternate in
rounds so drift hits all alike. The torch peer forms every key per call
(relevance, recency from the f64 times, importance) and takes its top-k.
Run it once with MNEMO_ACT_TERMS unset and once with MNEMO_ACT_TERMS=0 to see
the memory terms formed ahead of the scan against inside it.

Usage: activation_user.py OUT.jsonl [N]
"""
import json
import os
import statistics
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from user_bench import host_rows, unit_rows, wall_ms  # noqa: E402

K, ROUNDS, REPS = 10, 4, 50
NOW, HALF_LIFE = 1.7e9, 3600.0
W_REL, W_REC, W_IMP = 1.0, 0.3, 0.02


def main() -> int:
    import torch
    import mnemo

    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
    sync = torch.cuda.synchronize
    rt = mnemo.Runtime(backend="cuda")
    x = unit_rows(torch, n, torch.float32)
    g = torch.Generator(device="cuda").manual_seed(3)
    times = NOW - 86400.0 * torch.rand(n, device="cuda", dtype=torch.float64, generator=g)
    imp = 10.0 * torch.rand(n, device="cuda", generator=g)
    store = mnemo.Store(rt, x.shape[1], "f32", "cosine")
    step = 100_000
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        store.add(np.arange(lo, hi, dtype=np.uint64), host_rows(torch, x[lo:hi]),
                  times=times[lo:hi].cpu().numpy(), importance=imp[lo:hi].cpu().numpy())
    q = unit_rows(torch, 1, torch.float32, seed=7)[0]
    act = mnemo.Activation(w_relevance=W_REL, w_recency=W_REC, w_importance=W_IMP,
                           half_life=HALF_LIFE)

    def plain():
        return store.search(q, K)

    def activation():
        return store.search(q, K, activation=act, now=NOW)

    def plain_general():
        # Plain search through the path every call with options takes
        # (activation among them): options struct, query check waited for.
        return store._search(q, K, None, None, None, False, None, None, False, None, None, None)

    def torch_activation():
        # x and q are unit length: x @ q is the cosine.
        rec = torch.exp2(-(NOW - times) / HALF_LIFE).float()
        return torch.topk(W_REL * (x @ q) + W_REC * rec + W_IMP * imp, K)

    got, _ = activation()
    want = torch_activation().indices
    sync()
    agree = len(set(got.tolist()) & set(want.tolist())) / K
    modes = {"mnemo plain": plain, "mnemo plain (general path)": plain_general,
             "mnemo activation": activation,
             "torch activation (matmul + terms + topk)": torch_activation}
    ms = {name: [] for name in modes}
    for _ in range(ROUNDS):
        for name, fn in modes.items():
            ms[name].append(wall_ms(fn, sync, REPS))
    terms = os.environ.get("MNEMO_ACT_TERMS", "default")
    workload = f"activation 1q x {n} x 768 f32 cosine k={K} (Python, torch query)"
    plain_ms = statistics.median(ms["mnemo plain"])
    with open(out, "a") as f:
        for name, v in ms.items():
            med = statistics.median(v)
            row = {"workload": workload, "impl": name, "median_ms": round(med, 4),
                   "rounds_ms": [round(t, 4) for t in v], "ratio_to_plain": round(med / plain_ms, 4),
                   "MNEMO_ACT_TERMS": terms, "top10_overlap_with_torch": agree,
                   "device": torch.cuda.get_device_name()}
            f.write(json.dumps(row) + "\n")
            print(f"{name:42s} {med:8.4f} ms  / plain {med / plain_ms:6.3f}  "
                  f"(rounds {', '.join(f'{t:.4f}' for t in v)})", flush=True)
    print(f"MNEMO_ACT_TERMS={terms}; top-{K} overlap with torch: {agree:.2f}")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
