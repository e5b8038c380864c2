"""Table and scaling plot of mnemo_multi_bench results.

Usage: multi_report.py RESULTS.jsonl OUT_DIR
Writes OUT_DIR/multi-gpu-table.md (the figures against the goals) and, when
matplotlib is present, OUT_DIR/multi-gpu-scaling.png (speed-up over one GPU
by GPU count: strong scaling and add throughput; weak scaling and latency
as time ratios).
"""

import json
import os
import sys

# name: (what the ratio means, goal check on the ratio time(G GPUs) / time(1))
GOALS = {
    "latency_1q": ("time ratio (1M rows per GPU)", lambda r, g: r <= 1.15, "<= 1.15"),
    "weak_1000q": ("time ratio (2M rows per GPU)", lambda r, g: r <= 1.1, "<= 1.1"),
    "strong_1000q": ("speed-up", lambda r, g: 1 / r >= (3.4 if g >= 4 else 1.85), ">= 3.4 (x4), 1.85 (x2)"),
    "add": ("speed-up", lambda r, g: 1 / r >= (3.0 if g >= 4 else 1.8), ">= 3 (x4)"),
}
# Throughput rows: (what, goal on GB/s, goal text); None: no goal.
RATES = {
    "add_one_gpu": ("GB/s", lambda b: b >= 12.0, ">= 12 GB/s"),
    "add_host_only": ("GB/s (CPU store)", None, "-"),
}


def main() -> None:
    src, out_dir = sys.argv[1], sys.argv[2]
    rows = [json.loads(line) for line in open(src) if line.strip().startswith("{")]
    os.makedirs(out_dir, exist_ok=True)
    lines = ["| workload | GPUs | rows | nq | ms | one GPU ms | figure | goal | met |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["bench"] in RATES:
            what, ok, goal = RATES[r["bench"]]
            met = "-" if ok is None else ("yes" if ok(r.get("gbps", 0)) else "no")
            lines.append(f"| {r['bench']} | {r['gpus']} | {r['rows']:,} | - | {r['ms']:.3f} | {r['one_gpu_ms']:.3f} | "
                         f"{what} {r.get('gbps', 0):.2f} | {goal} | {met} |")
            continue
        what, ok, goal = GOALS.get(r["bench"], ("ratio", lambda *_: True, "-"))
        fig = 1 / r["ratio"] if what == "speed-up" else r["ratio"]
        lines.append(f"| {r['bench']} {r['precision']} | {r['gpus']} | {r['rows']:,} | {r['nq']} | {r['ms']:.3f} | "
                     f"{r['one_gpu_ms']:.3f} | {what} {fig:.2f} | {goal} | {'yes' if ok(r['ratio'], r['gpus']) else 'no'} |")
    with open(os.path.join(out_dir, "multi-gpu-table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no plot)")
        return
    plot(rows, os.path.join(out_dir, "multi-gpu-scaling.png"), plt)


def plot(rows, png, plt):
    """Relative to one GPU by GPU count (bench/report.py draws
    docs/multi-gpu-scaling.png with it from bench/results/h200x4-multi-gpu.jsonl)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, label in (("strong_1000q", "strong scaling, 1000q x 2M FAST"), ("add", "add throughput")):
        pts = sorted((r["gpus"], 1 / r["ratio"]) for r in rows if r["bench"] == name)
        if pts:
            ax.plot([1] + [p[0] for p in pts], [1] + [p[1] for p in pts], marker="o", label=label)
    for name, label in (("weak_1000q", "weak scaling (1 / time ratio)"), ("latency_1q", "1q latency (1 / time ratio)")):
        pts = sorted((r["gpus"], 1 / r["ratio"]) for r in rows if r["bench"] == name)
        if pts:
            ax.plot([1] + [p[0] for p in pts], [1] + [p[1] for p in pts], marker="s", linestyle="--", label=label)
    g = max([r["gpus"] for r in rows] + [2])
    ax.plot([1, g], [1, g], color="grey", linewidth=0.8, label="ideal speed-up")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("relative to one GPU")
    ax.set_title("mnemo sharded store, 768-d f32")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
