"""The PyTorch peer of ops_bench.cu: pair scoring, resampling and row
normalisation written the way a torch user would (gather + cosine_similarity,
searchsorted + gather + lerp, F.layer_norm, F.normalize), timed with CUDA
events on device-resident data, same shapes and times as the mnemo rows.
Writes JSON lines to the file named by argv[1]."""
import json
import sys

import torch
import torch.nn.functional as F

from torch_peer import median_ms


def rand(shape, dtype, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.rand(*shape, device="cuda", generator=g) * 2 - 1).to(dtype)


def resample(x, src_t, tgt_t):
    """Linear interpolation per row: x [B, S, D], src_t [B, S], tgt_t [B, T]."""
    S = x.shape[1]
    i = torch.searchsorted(src_t, tgt_t, right=True) - 1
    i = i.clamp(0, S - 2)
    t0 = torch.gather(src_t, 1, i)
    t1 = torch.gather(src_t, 1, i + 1)
    w = ((tgt_t - t0) / (t1 - t0)).clamp(0, 1).unsqueeze(-1)
    idx = i.unsqueeze(-1).expand(-1, -1, x.shape[2])
    a = torch.gather(x, 1, idx).float()
    b = torch.gather(x, 1, idx + 1).float()
    return torch.lerp(a, b, w).to(x.dtype)


def main(path):
    rows = []

    def emit(workload, impl, ms):
        rows.append({"workload": workload, "impl": impl, "median_ms": ms})
        print(f"{workload:44s} {impl:28s} {ms:9.4f} ms", flush=True)

    for name, n_items, n in [("pairs 10M over 1M x 1024 f16 cosine", 1_000_000, 10_000_000),
                             ("pairs 100k over 10k x 1024 f16 cosine", 10_000, 100_000)]:
        table = rand((n_items, 1024), torch.float16, 11)
        g = torch.Generator(device="cuda").manual_seed(5)
        src = torch.randint(0, n_items, (n,), device="cuda", generator=g)
        tgt = torch.randint(0, n_items, (n,), device="cuda", generator=g)
        # One call holds about four [n x 1024] f16 tensors at its peak (the two
        # gathers and cosine_similarity's temporaries: 80 GB for 10M pairs).
        # Where that does not fit in what the card has free, the pairs go in
        # chunks, as a torch user would have to write it; the name says so.
        peak = n * 1024 * 2 * 4 * 5 // 4  # four [n x 1024] f16 tensors, and a quarter spare
        parts = max(1, -(-peak // torch.cuda.mem_get_info()[0]))
        step = -(-n // parts)

        def pairs(i):
            if parts == 1:
                return F.cosine_similarity(table[src], table[tgt], dim=1)
            return torch.cat([F.cosine_similarity(table[src[a:a + step]], table[tgt[a:a + step]], dim=1)
                              for a in range(0, n, step)])

        impl = "torch gather+cosine_similarity" + (f" ({parts} chunks)" if parts > 1 else "")
        emit(name, impl, median_ms(pairs, reps=10 if n > 1e6 else 20))
        del table, src, tgt
        torch.cuda.empty_cache()

    for name, dt, B, S, T, D in [("resample 4096 x 512 -> 256 x 64 f32", torch.float32, 4096, 512, 256, 64),
                                 ("resample 4096 x 512 -> 256 x 64 bf16", torch.bfloat16, 4096, 512, 256, 64),
                                 ("resample 256 x 100 -> 50 x 32 f32", torch.float32, 256, 100, 50, 32),
                                 ("resample 1024 x 4096 -> 1024 x 256 f32", torch.float32, 1024, 4096, 1024, 256)]:
        nbytes = B * S * D * (4 if dt == torch.float32 else 2)
        copies = min(16, (600 << 20) // nbytes + 1) if nbytes < (180 << 20) else 1
        xs = [rand((B, S, D), dt, 31 + c) for c in range(copies)]
        src_t = (torch.arange(S, device="cuda", dtype=torch.float32) / (S - 1)).expand(B, S).contiguous()
        tgt_t = (torch.arange(T, device="cuda", dtype=torch.float32) / (T - 1)).expand(B, T).contiguous()
        emit(name, "torch searchsorted+gather+lerp", median_ms(lambda i: resample(xs[i % copies], src_t, tgt_t)))
        del xs

    x = rand((1_000_000, 768), torch.float16, 41)
    g = rand((768,), torch.float16, 42)
    b = rand((768,), torch.float16, 43)
    emit("layer_norm 1M x 768 f16", "torch F.layer_norm", median_ms(lambda i: F.layer_norm(x, (768,), g, b, 1e-5)))
    emit("l2-normalize 1M x 768 f16", "torch F.normalize", median_ms(lambda i: F.normalize(x, dim=1)))

    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch_ops.jsonl")
