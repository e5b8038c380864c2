"""The shape grid's picture and table from its JSON lines (shape_grid.py):

    python3 bench/gpu/shape_grid_plot.py bench/results/shape-grid-h200.jsonl docs/shape-grid.png [table.md]

Left: the best peer's time over mnemo's (above 1: mnemo ahead), from Python
(wall clock) per cell; right: single queries' kernel time as a share of the
read floor. Rows are (dtype, metric, store, nq, k), columns row widths. The
table (markdown) lists every cell with both ratios.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Optional, Tuple


def load(path: str) -> List[Dict[str, Any]]:
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                r = json.loads(line)
                if "mnemo_wall_ms" in r:
                    rows.append(r)
    # The last measurement of a cell wins (a rerun appends).
    last: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
    for r in rows:
        last[key(r)] = r
    return list(last.values())


def key(r: Dict[str, Any]) -> Tuple[Any, ...]:
    return (r["dim"], r["dtype"], r["metric"], r["store_bytes"], r["nq"], r["k"])


def best(r: Dict[str, Any], kind: str) -> Optional[float]:
    v = [r.get(f"{p}_{kind}_ms") for p in ("torch", "cuvs")]
    v = [x for x in v if x]
    return min(v) if v else None


def ratio(r: Dict[str, Any], kind: str) -> Optional[float]:
    b, m = best(r, kind), r.get(f"mnemo_{kind}_ms")
    return b / m if b and m else None


def store_name(b: int) -> str:
    return f"{b >> 30} GB" if b >= 1 << 30 else f"{b >> 20} MB"


def row_label(r: Dict[str, Any]) -> str:
    return f"{r['dtype']} {r['metric']} {store_name(r['store_bytes'])} nq={r['nq']} k={r['k']}"


def table(rows: List[Dict[str, Any]]) -> str:
    out = ["| dim | dtype | metric | store | nq | k | mnemo ms (kernel) | torch ms (kernel) | cuVS ms (kernel) | "
           "best peer / mnemo, wall | same, kernel | % of floor (1q) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def f(x: Optional[float]) -> str:
        return f"{x:.3f}" if x else "-"

    def x(v: Optional[float]) -> str:
        return f"{v:.2f}x" if v else "-"

    for r in sorted(rows, key=lambda r: (r["dtype"], r["metric"], r["store_bytes"], r["nq"], r["k"], r["dim"])):
        pct = f"{100 * r['floor_ms'] / r['mnemo_kernel_ms']:.0f}%" if r["nq"] == 1 else "-"
        out.append(f"| {r['dim']} | {r['dtype']} | {r['metric']} | {store_name(r['store_bytes'])} | {r['nq']} | "
                   f"{r['k']} | {f(r['mnemo_wall_ms'])} ({f(r['mnemo_kernel_ms'])}) | "
                   f"{f(r.get('torch_wall_ms'))} ({f(r.get('torch_kernel_ms'))}) | "
                   f"{f(r.get('cuvs_wall_ms'))} ({f(r.get('cuvs_kernel_ms'))}) | "
                   f"{x(ratio(r, 'wall'))} | {x(ratio(r, 'kernel'))} | {pct} |")
    return "\n".join(out) + "\n"


def picture(rows: List[Dict[str, Any]], png: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    dims = sorted({r["dim"] for r in rows})
    col = {d: j for j, d in enumerate(dims)}
    labels = sorted({row_label(r) for r in rows})
    single = sorted({row_label(r) for r in rows if r["nq"] == 1})
    sp = np.full((len(labels), len(dims)), np.nan)
    fl = np.full((len(single), len(dims)), np.nan)
    for r in rows:
        j = col[r["dim"]]
        v = ratio(r, "wall")
        if v:
            sp[labels.index(row_label(r)), j] = v
        if r["nq"] == 1 and r.get("mnemo_kernel_ms"):
            fl[single.index(row_label(r)), j] = 100 * r["floor_ms"] / r["mnemo_kernel_ms"]
    fig, axes = plt.subplots(1, 2, figsize=(22, 0.32 * len(labels) + 2.5),
                             gridspec_kw={"height_ratios": [1]}, squeeze=True)
    for ax, data, names, title, cmap, lo, hi in (
            (axes[0], sp, labels, "best peer (torch, cuVS) time / mnemo time, from Python (>1: mnemo ahead)",
             "RdYlGn", 0.3, 3.0),
            (axes[1], fl, single, "single queries: read floor / mnemo kernel time (%)", "viridis", 0, 100)):
        im = ax.imshow(data, aspect="auto", cmap=cmap, vmin=lo, vmax=hi)
        ax.set_xticks(range(len(dims)), [str(d) for d in dims], rotation=90)
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.set_xlabel("row width")
        ax.set_title(title, fontsize=9)
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                if not np.isnan(data[i, j]):
                    ax.text(j, i, f"{data[i, j]:.2f}" if hi < 10 else f"{data[i, j]:.0f}", ha="center",
                            va="center", fontsize=5)
        fig.colorbar(im, ax=ax, fraction=0.03)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


def main(argv: List[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = load(argv[1])
    picture(rows, argv[2])
    if len(argv) > 3:
        with open(argv[3], "w") as f:
            f.write(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
