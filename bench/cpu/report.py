"""Turns the rows of one CPU benchmark run (mnemo, FAISS, numpy, floors) into
the results: JSON lines with the ratios to each peer, the markdown table
(printed) and a bar chart of the ratios; then bench/report.py notes the run in
bench/results/runs.json and rewrites the page (BENCHMARKS_MD) from the results.
Usage: report.py RUN_JSONL RESULTS_JSONL BENCHMARKS_MD PLOT_PNG COMMAND"""
import json
import os
import re
import subprocess
import sys

# Issue targets: (kind, threshold). pct: % of the measured floor; peer name:
# peer time / mnemo time.
TARGETS = {
    "recall 1q x 100k x 768 f32 cosine k=10": [("pct", 75), ("numpy", 2), ("FAISS IndexFlatIP", 3)],
    "recall 1q x 100k x 768 f16 cosine k=10": [("pct", 75)],
    "recall 1q x 100k x 768 bf16 cosine k=10": [("pct", 75)],
    "recall 100q x 100k x 768 f32 cosine k=10": [("pct", 100 / 1.15), ("FAISS IndexFlatIP", 2)],
    "pairs 100k over 10k x 1024 f16 cosine": [("numpy", 40)],
    "resample 1024 x 512 -> 256 x 64 f32": [("pct", 70), ("numpy", 5)],
    "normalize 1M x 768 f32": [("pct", 70)],
    "layer_norm 1M x 768 f32": [("pct", 70)],
}


def short_peer(name):
    return "numpy" if name == "numpy" else "FAISS"


def main(run_path, results_path, md_path, png_path, command):
    with open(run_path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    floors = next(r for r in rows if r["workload"] == "floors")
    data = [r for r in rows if r["workload"] != "floors"]
    mnemo = [r for r in data if r["impl"] == "mnemo"]
    peers = [r for r in data if r["impl"] not in ("mnemo",) and not r["impl"].startswith("mnemo ")
             and not r["workload"].startswith("floor")]
    out = []
    for r in mnemo:
        r["ratio_vs"] = {p["impl"]: round(p["median_ms"] / r["median_ms"], 3) for p in peers
                         if p["workload"] == r["workload"]}
        out.append(r)
    for p in peers:
        m = next((r for r in mnemo if r["workload"] == p["workload"]), None)
        if m:
            p.setdefault("floor_ms", m["floor_ms"])
            p["pct_of_floor"] = round(100 * m["floor_ms"] / p["median_ms"], 1)
        p["ratio_vs"] = {}
        out.append(p)
    others = [r for r in data if r not in out]
    for r in others:
        r.setdefault("ratio_vs", {})
    with open(results_path, "w") as f:
        f.write(json.dumps(floors) + "\n")
        for r in out + others:
            f.write(json.dumps(r) + "\n")

    # The table: one line per workload, peers side by side.
    lines = [f"Machine: {floors['device']}; {floors['threads']} threads. Floors measured in the same run: "
             f"read bandwidth {floors['read_gbs']:.1f} GB/s (a {floors['threads']}-thread sum over 2 GiB); "
             f"sgemm: the bare OpenBLAS sgemm of the 100-query shape (row `floor: sgemm`).", "",
             "| workload | mnemo ms | rate | floor ms | % of floor | FAISS ms | x FAISS | numpy ms | x numpy | target |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for r in mnemo:
        fa = {k: v for k, v in r["ratio_vs"].items() if k != "numpy"}
        fa_name, fa_ratio = next(iter(fa.items())) if fa else (None, None)
        np_ratio = r["ratio_vs"].get("numpy")
        checks = []
        for kind, thr in TARGETS.get(r["workload"], []):
            if kind == "pct":
                got, ok = f"{r['pct_of_floor']:.0f}% of floor", r["pct_of_floor"] >= thr
                want = f">= {thr:.0f}%"
            else:
                v = r["ratio_vs"].get(kind)
                got, ok = (f"{v:.2f}x {short_peer(kind)}" if v else "no peer"), bool(v and v >= thr)
                want = f">= {thr:g}x"
            checks.append(f"{'met' if ok else 'MISSED'} ({got}; {want})")
            verdicts.append((r["workload"], ok, got, want))

        def ms(ratio):
            return f"{ratio * r['median_ms']:.2f}" if ratio else "-"

        lines.append(
            f"| {r['workload']} | {r['median_ms']:.2f} | {r['rate']:.1f} {r['rate_unit']} | {r['floor_ms']:.2f} | "
            f"{r['pct_of_floor']:.0f}% | {ms(fa_ratio)}{' (' + fa_name.replace('FAISS ', '') + ')' if fa_name else ''}"
            f" | {f'{fa_ratio:.2f}x' if fa_ratio else '-'} | {ms(np_ratio)} | {f'{np_ratio:.2f}x' if np_ratio else '-'}"
            f" | {'; '.join(checks) or '-'} |")
    sg = next((r for r in data if r["workload"].startswith("floor: sgemm")), None)
    if sg:
        lines.append(f"| {sg['workload']} (floor) | {sg['median_ms']:.2f} | {sg['rate']:.1f} GFLOP/s | - | - | - | - |"
                     f" - | - | - |")
    sw = [r for r in data if r["workload"].startswith("switch point")]
    if sw:
        lines += ["", "Streaming vs sgemm path by batch size (same run, 100k x 768 f32 cosine, k = 10):", "",
                  "| queries | streaming ms | sgemm ms |", "|---|---|---|"]
        for w in dict.fromkeys(r["workload"] for r in sw):
            st = next(r for r in sw if r["workload"] == w and r["impl"] == "mnemo streaming")
            ge = next(r for r in sw if r["workload"] == w and r["impl"] == "mnemo sgemm")
            nq = re.search(r"(\d+)q", w).group(1)
            lines.append(f"| {nq} | {st['median_ms']:.2f} | {ge['median_ms']:.2f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    missed = [v for v in verdicts if not v[1]]
    print(f"targets: {len(verdicts) - len(missed)} met, {len(missed)} missed")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        plot(mnemo, floors["threads"], png_path, plt)
    except ImportError:
        print("matplotlib missing: no plot written")

    # The page is rendered from bench/results/ by bench/report.py, which
    # notes this run (date, command) in bench/results/runs.json.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = [sys.executable, os.path.join(root, "bench", "report.py"), "--page", md_path, "--no-pictures"]
    if os.path.dirname(os.path.abspath(results_path)) == os.path.join(root, "bench", "results"):
        args += ["--record", os.path.basename(results_path), command]
    subprocess.run(args, check=True)


def plot(mnemo, threads, png_path, plt):
    """The bar chart of the ratios: peer time / mnemo time, a bar a peer."""
    labels, series = [], {}
    for r in mnemo:
        if not r["ratio_vs"]:
            continue
        labels.append(r["workload"].replace(" x 100k x 768", "").replace(" k=10", ""))
        for k in r["ratio_vs"]:
            series.setdefault(short_peer(k), [])
        for name in series:
            series[name].append(next((v for k, v in r["ratio_vs"].items() if short_peer(k) == name), 0))
        for name in series:
            series[name] += [0] * (len(labels) - len(series[name]))
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / max(1, len(series))
    for i, (name, vals) in enumerate(series.items()):
        xs = [j + i * width for j in range(len(labels))]
        ax.bar(xs, vals, width, label=f"vs {name}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(labels))])
    ax.set_xticklabels(labels, rotation=25, ha="right", fontsize=8)
    ax.set_ylabel("peer time / mnemo time (log)")
    ax.set_title(f"mnemo CPU backend vs peers, {threads} threads, same run")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:6])
