"""The PyTorch peer of the GPU benchmark: the same workloads as gpu_bench.cu,
the way a user would write them in torch (matmul + topk, cosine_similarity +
topk, cdist + topk), timed with CUDA events (median of repeats after warm-up),
data resident on the device, inputs rotated where they would sit in L2.
Writes JSON lines to the file named by argv[1]."""
import json
import sys
import time

import torch
import torch.nn.functional as F


def median_ms(fn, reps=20, warm=3):
    """Runs are queued back to back, each between its own events, with one
    wait at the end, so the GPU does not idle (and drop clocks) between runs.
    The timed runs start after at least 0.25 s of the same workload."""
    for i in range(warm):
        fn(i)
    # And at least 0.25 s of this workload (gpu_bench.cu's time_ms says why).
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    i = warm
    while time.perf_counter() - t0 < 0.25:
        for _ in range(8):
            fn(i)
            i += 1
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for i, (a, b) in enumerate(events):
        a.record()
        fn(i)
        b.record()
    events[-1][1].synchronize()
    times = sorted(a.elapsed_time(b) for a, b in events)
    return times[len(times) // 2]


def store(n, dim, dtype, copies=1):
    out = []
    for c in range(copies):
        g = torch.Generator(device="cuda").manual_seed(100 + c)
        x = torch.rand(n, dim, device="cuda", generator=g) * 2 - 1
        out.append(x.to(dtype))
    return out


def copies_for(n, dim, esz):
    b = n * dim * esz
    return min(8, (600 << 20) // b + 1) if b < (180 << 20) else 1


def main(path):
    rows = []

    def emit(workload, impl, ms):
        rows.append({"workload": workload, "impl": impl, "median_ms": ms})
        print(f"{workload:44s} {impl:28s} {ms:9.4f} ms", flush=True)

    torch.backends.cuda.matmul.allow_tf32 = False
    # Single-query recall: cosine over unit-normalised rows is a matvec.
    for name, n, dim, dt in [
        ("recall 1q x 1M x 768 f32 cosine k=10", 1_000_000, 768, torch.float32),
        ("recall 1q x 1M x 768 f16 cosine k=10", 1_000_000, 768, torch.float16),
        ("recall 1q x 1M x 768 bf16 cosine k=10", 1_000_000, 768, torch.bfloat16),
        ("recall 1q x 100k x 768 f32 cosine k=10", 100_000, 768, torch.float32),
        ("recall 1q x 10k x 768 f32 cosine k=10", 10_000, 768, torch.float32),
        ("recall 1q x 1k x 768 f32 cosine k=10", 1_000, 768, torch.float32),
    ]:
        xs = store(n, dim, dt, copies_for(n, dim, 4 if dt == torch.float32 else 2))
        if dt == torch.float32 and n == 1_000_000:
            q1 = (torch.rand(dim, device="cuda") * 2 - 1)
            xn1 = xs[0] / xs[0].norm(dim=1, keepdim=True)
            emit("recall 1q x 1M x 768 f32 cosine k=1000", "torch matmul+topk",
                 median_ms(lambda i: torch.topk(xn1 @ q1, 1000)))
            del xn1
        q = (torch.rand(dim, device="cuda") * 2 - 1).to(dt)
        xn = [x / x.float().norm(dim=1, keepdim=True).to(dt) for x in xs]
        emit(name, "torch matmul+topk", median_ms(lambda i: torch.topk(xn[i % len(xn)] @ q, 10)))
        emit(name, "torch cosine_similarity+topk",
             median_ms(lambda i: torch.topk(F.cosine_similarity(xs[i % len(xs)], q[None, :], dim=1), 10)))
        del xs, xn
    # L2 single query.
    xs = store(1_000_000, 768, torch.float32)
    q = torch.rand(1, 768, device="cuda") * 2 - 1
    emit("recall 1q x 1M x 768 f32 l2 k=10", "torch cdist+topk",
         median_ms(lambda i: torch.topk(torch.cdist(q, xs[0]), 10, largest=False)))
    # The fastest way a torch user computes L2 top-k: |x|^2 - 2 x.q (|q|^2 is
    # the same for every row), with the row norms computed once beforehand.
    xsq = (xs[0] * xs[0]).sum(dim=1)
    emit("recall 1q x 1M x 768 f32 l2 k=10", "torch matmul-expansion+topk",
         median_ms(lambda i: torch.topk(xsq - 2.0 * (xs[0] @ q[0]), 10, largest=False)))
    del xsq
    # Batches: TF32 (FAST) and FP32 (EXACT).
    qs = torch.rand(100, 768, device="cuda") * 2 - 1
    for tf32, impl in [(True, "torch matmul+topk (TF32)"), (False, "torch matmul+topk (FP32)")]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        emit("recall 100q x 1M x 768 f32 k=10", impl, median_ms(lambda i: torch.topk(qs @ xs[0].T, 10, dim=1)))
    torch.backends.cuda.matmul.allow_tf32 = True
    emit("recall 100q x 1M x 768 f32 k=1024", "torch matmul+topk (TF32)",
         median_ms(lambda i: torch.topk(qs @ xs[0].T, 1024, dim=1), reps=10))
    del xs
    # 10000 queries over 1M x 128: chunks of 1000 queries keep the score
    # matrix at 4 GB.
    for dt, name in [(torch.float32, "recall 10000q x 1M x 128 f32 k=10"),
                     (torch.float16, "recall 10000q x 1M x 128 f16 k=10")]:
        x = store(1_000_000, 128, dt)[0]
        qb = (torch.rand(10000, 128, device="cuda") * 2 - 1).to(dt)

        def run(i):
            for c in range(0, 10000, 1000):
                torch.topk(qb[c:c + 1000] @ x.T, 10, dim=1)

        emit(name, "torch matmul+topk (TF32)" if dt == torch.float32 else "torch matmul+topk (FP16)",
             median_ms(run, reps=5, warm=1))
        del x, qb
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "torch_gpu.jsonl")
