"""Turns the index benchmarks' rows (cpu_ivf_bench.py, bench/gpu/ivf_bench.py)
into tables (printed) and the recall / speed plot; then bench/report.py notes
the CPU runs in bench/results/runs.json and rewrites the page (BENCHMARKS_MD,
whose index section it renders from the results in bench/results/).
Usage: report.py BENCHMARKS_MD PLOT_PNG [TAG RESULTS.jsonl COMMAND PEER]..."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cpu_ivf_bench import at_recall  # noqa: E402

def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def table(rows, peer, cmd, single_target, qps_of_peer):
    ex = next(r for r in rows if r["impl"] == "mnemo" and r["kind"] == "exact")
    mi = [r for r in rows if r["impl"] == "mnemo" and r["kind"] == "ivf"]
    pe = [r for r in rows if r["impl"] == peer and r["kind"] == "ivf"]
    builds = {r["impl"]: r for r in rows if r["kind"] == "build"}
    n, dim = ex["n"], ex["dim"]
    out = [f"{n:,} x {dim}, {len(mi) and 'k = 10'}; `{cmd}`", ""]
    out.append(f"| nprobe | mnemo recall@10 | mnemo 1 query, ms | mnemo batch, queries/s | {peer} recall@10 | "
               f"{peer} 1 query, ms | {peer} batch, queries/s |")
    out.append("|---|---|---|---|---|---|---|")
    for i, m in enumerate(mi):
        p = pe[i] if i < len(pe) else None
        ps = f"{p['recall']:.4f} | {p['single_ms']:.3f} | {p['batch_qps']:,.0f}" if p else "- | - | -"
        out.append(f"| {m['nprobe']} | {m['recall']:.4f} | {m['single_ms']:.3f} | {m['batch_qps']:,.0f} | {ps} |")
    out.append(f"| exact scan | 1 | {ex['single_ms']:.3f} | {ex['batch_qps']:,.1f} | | | |")
    out.append("")
    first = next((m for m in mi if m["recall"] >= 0.95), None)
    lines = []
    if first:
        lines.append(f"- 1 query at recall@10 >= 0.95: nprobe {first['nprobe']} (recall {first['recall']:.4f}), "
                     f"{first['single_ms']:.3f} ms, {first['qps'] / ex['qps']:.1f}x the exact scan's queries/s "
                     f"({single_target}).")
    else:
        lines.append("- no nprobe reached recall@10 0.95.")
    if pe:
        for key, label in (("batch_qps", "batch"), ("qps", "one query at a time")):
            qm = at_recall([{"recall": r["recall"], "qps": r[key]} for r in mi], 0.95)
            qp = at_recall([{"recall": r["recall"], "qps": r[key]} for r in pe], 0.95)
            if qm and qp:
                lines.append(f"- queries/s at recall 0.95 ({label}, interpolated between nprobe points): mnemo "
                             f"{qm:,.0f}, {peer} {qp:,.0f}: {qm / qp:.2f}x ({qps_of_peer}).")
    for impl, b in builds.items():
        lines.append(f"- build (train + add) {impl}: {b['build_s']:.1f} s.")
    return "\n".join(out + lines)


def plot(png, sets):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    cols = min(2, len(sets))
    rows_n = (len(sets) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(6.5 * cols, 4.4 * rows_n), squeeze=False)
    for ax in axes.flat[len(sets):]:
        ax.set_visible(False)
    for ax, (title, rows, peer) in zip(axes.flat, sets):
        for impl, style in (("mnemo", "o-"), (peer, "s--")):
            pts = [r for r in rows if r["impl"] == impl and r["kind"] == "ivf"]
            if pts:
                ax.plot([r["recall"] for r in pts], [r["batch_qps"] for r in pts], style, label=f"{impl} batch")
                ax.plot([r["recall"] for r in pts], [r["qps"] for r in pts], style, alpha=0.45,
                        label=f"{impl} one query at a time")
        ex = next(r for r in rows if r["impl"] == "mnemo" and r["kind"] == "exact")
        ax.axhline(ex["batch_qps"], color="grey", lw=0.8, ls=":", label="mnemo exact scan, batch")
        ax.set_yscale("log")
        ax.set_xlabel("recall@10")
        ax.set_ylabel("queries/s")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main(argv):
    """argv: BENCHMARKS_MD PLOT_PNG, then groups TAG PATH COMMAND PEER (peer:
    faiss or cuvs); each group's table is printed under its TAG."""
    md_path, png = argv[0], argv[1]
    sets, measured = [], []
    for i in range(2, len(argv), 4):
        tag, path, cmd, peer = argv[i:i + 4]
        rows = load(path)
        r0 = rows[0]
        if peer == "faiss":
            print(f"== {tag}\n" + table(rows, peer, cmd, "target >= 20x", "target >= 1, same threads") + "\n")
            what = "image patches" if r0.get("data") == "patches" else "mixture"
            sets.append((f"CPU {r0['threads']} threads: {r0['n']:,} x {r0['dim']} f32 {what}", rows, peer))
            measured.append((path, cmd))  # the CPU groups are this run's; a GPU group is the last GPU run
        else:
            print(f"== {tag}\n" + table(rows, peer, cmd, "target <= 0.15 ms and >= 20x", "target >= 1, same run")
                  + "\n")
            sets.append((f"{r0['gpu']}: {r0['n']:,} x {r0['dim']} f16, centre scale {r0.get('centre_scale', 1)}",
                         rows, peer))
    if sets:
        plot(png, sets)
    # The page is rendered from bench/results/ by bench/report.py.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = [sys.executable, os.path.join(root, "bench", "report.py"), "--page", md_path, "--no-pictures"]
    for path, cmd in measured:
        if os.path.dirname(os.path.abspath(path)) == os.path.join(root, "bench", "results"):
            args += ["--record", os.path.basename(path), cmd]
    subprocess.run(args, check=True)


if __name__ == "__main__":
    main(sys.argv[1:])
