"""Joins the mnemo and PyTorch GPU rows of one run into the results table:
JSON lines (workload, impl, median_ms, floor_ms, pct_of_floor, ratio_vs), a
markdown table and a bar chart of the speed-up over the best torch variant.
Usage: report.py MNEMO_JSONL TORCH_JSONL OUT_DIR"""
import json
import os
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# The targets of the GPU issues: (workload, mnemo impl, target ms). The
# recall rows also must beat the fastest torch peer by 1.1x (checked below).
TARGETS = [
    ("recall 1q x 1M x 768 f32 cosine k=10", "mnemo", 0.74),
    ("recall 1q x 1M x 768 f16 cosine k=10", "mnemo", 0.38),
    ("recall 1q x 1M x 768 bf16 cosine k=10", "mnemo", 0.38),
    ("recall 1q x 100k x 768 f32 cosine k=10", "mnemo", 0.09),
    ("recall 1q x 10k x 768 f32 cosine k=10", "mnemo", 0.015),
    ("recall 1q x 10k x 768 f32 cosine k=10 (host call)", "mnemo", 0.035),
    ("recall 1q x 1M x 768 f32 cosine k=1000", "mnemo", 1.0),
    ("recall 100q x 1M x 768 f32 k=10", "mnemo (FAST)", 1.2),
    ("recall 100q x 1M x 768 f32 k=10", "mnemo", 4.0),
    ("recall 10000q x 1M x 128 f32 k=10", "mnemo (FAST)", 20.0),
    ("recall 10000q x 1M x 128 f16 k=10", "mnemo (FAST)", 12.0),
    ("pairs 10M over 1M x 1024 f16 cosine", "mnemo (sorted)", 8.0),
    ("pairs 100k over 10k x 1024 f16 cosine", "mnemo (gather)", 0.060),
    ("resample 4096 x 512 -> 256 x 64 f32", "mnemo", 0.24),
    ("resample 4096 x 512 -> 256 x 64 bf16", "mnemo", 0.14),
    ("resample 256 x 100 -> 50 x 32 f32", "mnemo", 0.015),
    ("resample 1024 x 4096 -> 1024 x 256 f32", "mnemo", 0.85),
    ("layer_norm 1M x 768 f16", "mnemo", 0.85),
    ("l2-normalize 1M x 768 f16", "mnemo", 0.85),
]
# Ratio targets: (workload, impl, reference workload, reference impl, max ratio).
RATIO_TARGETS = [
    ("recall 100q x 1M x 768 f32 k=1024", "mnemo (FAST)", "recall 100q x 1M x 768 f32 k=10", "mnemo (FAST)", 1.5),
]


def main(mnemo_path, torch_path, out_dir):
    mn = load(mnemo_path)
    tr = load(torch_path) if os.path.exists(torch_path) else []
    device = next((r["impl"] for r in mn if r["workload"] == "device"), "GPU")
    floors = next((r for r in mn if r["workload"] == "floors"), {})
    rows = []
    for r in mn:
        if r["workload"] in ("device", "floors") or r["workload"].startswith("break-even"):
            continue
        base = r["workload"].replace(" (host call)", "")
        peers = {t["impl"]: t["median_ms"] for t in tr if t["workload"] == base}
        # Like for like: EXACT rows against full-precision peers only.
        if "(FAST)" not in r["impl"]:
            peers = {k: v for k, v in peers.items() if "TF32" not in k and "FP16" not in k} or peers
        r["ratio_vs"] = {k: round(v / r["median_ms"], 3) for k, v in peers.items()}
        r["device"] = device
        rows.append(r)
    for t in tr:
        floor = next((r["floor_ms"] for r in rows if r["workload"] == t["workload"]), None)
        rows.append({"workload": t["workload"], "impl": t["impl"], "median_ms": t["median_ms"],
                     "floor_ms": floor, "pct_of_floor": round(100 * floor / t["median_ms"], 1) if floor else None,
                     "ratio_vs": {}, "device": device})
    with open(os.path.join(out_dir, "h200-latest.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    lines = [f"Device: {device}. Floors measured in the same run: read {floors.get('read_gbs', 0):.0f} GB/s, "
             f"copy {floors.get('copy_gbs', 0):.0f} GB/s (read+write), FP32 {floors.get('fp32_tflops', 0):.1f}, "
             f"TF32 {floors.get('tf32_tflops', 0):.1f}, FP16 {floors.get('fp16_tflops', 0):.1f} TFLOP/s.", "",
             "| workload | impl | median ms | floor ms | % of floor | best torch ms | speed-up vs torch |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["impl"].startswith("torch"):
            continue
        best = min(r["ratio_vs"].items(), key=lambda kv: kv[1]) if r["ratio_vs"] else None
        tms = f"{best[1] * r['median_ms']:.3f} ({best[0]})" if best else "-"
        sp = f"{best[1]:.2f}x" if best else "-"
        lines.append(f"| {r['workload']} | {r['impl']} | {r['median_ms']:.4f} | {r['floor_ms']:.4f} | "
                     f"{r['pct_of_floor']:.0f}% | {tms} | {sp} |")
    lines += ["", "Targets (median kernel time unless noted; met when at or under the target):", "",
              "| workload | impl | target ms | measured ms | torch ms | verdict |", "|---|---|---|---|---|---|"]
    for workload, impl, target in TARGETS:
        r = next((r for r in rows if r["workload"] == workload and r["impl"] == impl), None)
        if r is None:
            lines.append(f"| {workload} | {impl} | {target} | not measured | - | - |")
            continue
        ms = r["median_ms"]
        best = min(r["ratio_vs"].items(), key=lambda kv: kv[1]) if r["ratio_vs"] else None
        tms = f"{best[1] * ms:.3f}" if best else "-"
        verdict = "met" if ms <= target else f"missed by {100 * (ms / target - 1):.0f}%"
        if workload.startswith("recall") and best:
            verdict += f"; {best[1]:.2f}x torch ({'met' if best[1] >= 1.1 else 'under'} 1.1x)"
        lines.append(f"| {workload} | {impl} | {target} | {ms:.4f} | {tms} | {verdict} |")
    for workload, impl, ref_w, ref_i, limit in RATIO_TARGETS:
        r = next((r for r in rows if r["workload"] == workload and r["impl"] == impl), None)
        ref = next((r for r in rows if r["workload"] == ref_w and r["impl"] == ref_i), None)
        if r is None or ref is None:
            lines.append(f"| {workload} | {impl} | <= {limit}x its k=10 time | not measured | - | - |")
            continue
        ratio = r["median_ms"] / ref["median_ms"]
        best = min(r["ratio_vs"].items(), key=lambda kv: kv[1]) if r["ratio_vs"] else None
        verdict = ("met" if ratio <= limit else "missed") + f" ({ratio:.2f}x)"
        if best:
            verdict += f"; {best[1]:.2f}x torch ({'met' if best[1] >= 1.1 else 'under'} 1.1x)"
        lines.append(f"| {workload} | {impl} | <= {limit}x its k=10 time | {r['median_ms']:.4f} | "
                     f"{best[1] * r['median_ms']:.3f} | {verdict} |" if best else
                     f"| {workload} | {impl} | <= {limit}x its k=10 time | {r['median_ms']:.4f} | - | {verdict} |")
    table = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "gpu-table.md"), "w") as f:
        f.write(table)
    print(table)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plot(rows, device, os.path.join(out_dir, "gpu-speedup.png"), plt)
    except Exception as e:  # the table is the result; the plot is a view of it
        print(f"plot skipped: {e}")


def plot(rows, device, png, plt):
    """Speed-up over the best torch variant, a bar a mnemo row (bench/report.py
    draws docs/gpu-speedup.png with it from bench/results/h200-latest.jsonl)."""
    labels, vals = [], []
    for r in rows:
        if r["impl"].startswith("torch") or not r["ratio_vs"]:
            continue
        labels.append(f"{r['workload']}\n{r['impl']}")
        vals.append(min(r["ratio_vs"].values()))
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(labels) + 1.5))
    ax.barh(range(len(vals)), vals, color=["#2a7" if v >= 1 else "#c44" for v in vals])
    ax.set_yticks(range(len(vals)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xlabel("speed-up over the best torch variant (torch time / mnemo time)")
    ax.set_title(f"mnemo vs PyTorch on {device}")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:4])
