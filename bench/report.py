#!/usr/bin/env python3
"""Renders the benchmarks page, docs/benchmarks.md, from the results in
bench/results/: every figure on the page is read from a results file here, so
the page cannot drift from the data. It also rewrites the "How fast" rows of
README.md and the file table of bench/results/README.md (between their
markers), and redraws the page's pictures when matplotlib is importable
(without it the pictures already in docs/ are kept).

    python3 bench/report.py                 rewrite the page (the same data gives the same page)
    python3 bench/report.py --check         exit 1 if the page, README or results README would change
    python3 bench/report.py --record FILE COMMAND [--date YYYY-MM-DD]
                                            note in bench/results/runs.json that FILE (a name in
                                            bench/results/) was written today by COMMAND, then rewrite

bench/results/runs.json names the current file of each area with the machine,
date and command of its run. The page has one section a function (SECTIONS
below): each takes the results it needs, renders what is there, and says
"not yet measured" for what is missing. Python 3 standard library only.
"""

import argparse
import datetime
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
DOCS = os.path.join(ROOT, "docs")
PAGE = os.path.join(DOCS, "benchmarks.md")
README = os.path.join(ROOT, "README.md")
RESULTS_README = os.path.join(RESULTS, "README.md")
RUNS = os.path.join(RESULTS, "runs.json")
NOT_MEASURED = "Not yet measured."


# ---------------------------------------------------------------- helpers

def load(name):
    """The rows of a results file in bench/results/ (JSON lines), or None."""
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def runs():
    if not os.path.exists(RUNS):
        return []
    with open(RUNS) as f:
        return json.load(f)


def run_of(name):
    return next((r for r in runs() if r["file"] == name), {})


def ms(x):
    """A time in ms with the digits its size earns (the same every run)."""
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:,.1f}"
    if x >= 10:
        return f"{x:.2f}"
    if x >= 1:
        return f"{x:.3f}"
    return f"{x:.4f}"


def times(x):
    return "-" if x is None else f"{x:.2f}x"


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# Commands longer than this are left to bench/results/README.md's table.
SOURCE_COMMAND_MAX = 200


def source(*names):
    """The line under a section's title: which run its figures come from,
    and the command that wrote it where that is short."""
    parts, long_ = [], False
    for n in names:
        r = run_of(n)
        what = f"`bench/results/{n}`"
        if r:
            cmd = r.get("command", "?")
            shown = f"; `{cmd}`" if len(cmd) <= SOURCE_COMMAND_MAX else ""
            long_ = long_ or not shown
            what += f" ({r.get('machine', '?')}, {r.get('date', '?')}{shown})"
        parts.append(what)
    tail = (" The commands are in [bench/results/README.md](../bench/results/README.md#the-current-files)." if long_ else "")
    return "Figures from " + "; ".join(parts) + "." + tail


def picture(png, alt):
    """A picture's line, where the picture exists."""
    return f"![{alt}]({png})" if os.path.exists(os.path.join(DOCS, png)) else ""


def overlap(note):
    m = re.search(r"overlap with torch f32(?: \(\d+ queries\))? ([0-9.]+)", note or "")
    return m.group(1) if m else "-"


def anchor(title):
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


# ------------------------------------------------- GPU recall from Python

def user_rows():
    """(workload, mnemo row, cuvs row, torch row) of the Python runs, one
    query first, then batches, in the files' order."""
    out = []
    for name in ("h200-user.jsonl", "h200-user-batches.jsonl"):
        rows = load(name) or []
        for w in dict.fromkeys(r["workload"] for r in rows):
            rs = [r for r in rows if r["workload"] == w]
            mn = next((r for r in rs if r["impl"].startswith("mnemo Store.search")), None)
            if mn is None:
                continue
            cu = next((r for r in rs if r["impl"].startswith("cuvs")), None)
            to = next((r for r in rs if r["impl"].startswith("torch")), None)
            out.append((w, mn, cu, to))
    return out


def best_peer(*peers):
    got = [(p["median_ms"], label) for p, label in peers if p and p.get("median_ms")]
    return min(got) if got else (None, None)


def gpu_user():
    title = "GPU recall as users call it"
    rows = user_rows()
    text = [f"## {title}", ""]
    if not rows:
        return "\n".join(text + [NOT_MEASURED])
    text += [
        "One Python process, the same unit-length rows resident on the GPU for every library, queries as a",
        "torch CUDA tensor, k = 10 unless named. Each figure is the median wall clock of a call including the",
        "`torch.cuda.synchronize()` a user needs to read the result (100 calls after 20 warm-up calls; fewer",
        "for the batches). mnemo: `Store.search` on a CUDA runtime, validation on; cuVS: `brute_force` with",
        "an RMM pool, inner product, outputs preallocated; torch: `torch.topk(x @ q, k)`. Batches run mnemo",
        "in FAST mode (tensor-core products, the top lists re-scored exactly) against torch in the same",
        "precision (TF32 for f32 rows, FP16 for f16 rows, chunks of 1000 queries). \"numpy\" is a host",
        "query and host results on the same GPU store. \"GPU part\" is mnemo's time on the GPU (CUDA events);",
        "the rest of its wall clock is the call. \"top-k\" is the overlap of mnemo's top-k with torch's in",
        "float32 (1.00: the same rows).",
        "",
        source("h200-user.jsonl", "h200-user-batches.jsonl"),
        "",
    ]
    body = []
    for w, mn, cu, to in rows:
        best, who = best_peer((cu, "cuVS"), (to, "torch"))
        lead = times(best / mn["median_ms"]) + f" ({who})" if best else "-"
        body.append([w, ms(mn["median_ms"]), ms(mn.get("kernel_ms")), ms(cu and cu["median_ms"]),
                     ms(to and to["median_ms"]), lead, overlap(mn.get("note"))])
    text.append(table(["workload", "mnemo ms", "GPU part ms", "cuVS ms", "torch ms",
                       "mnemo vs the fastest peer", "top-k"], body))
    pic = picture("gpu-user.png", "mnemo against cuVS and torch from Python")
    if pic:
        text += ["", pic]
    prof = load("h200-user-profile.jsonl")
    if prof:
        text += ["", "Where a one-query call's time goes (1k x 768 f32 rows, medians; "
                 "`bench/results/h200-user-profile.jsonl`):", ""]
        text.append(table(["stage", "ms"], [[r["impl"], ms(r["median_ms"])] for r in prof
                                            if r["workload"] == "profile 1q x 1000"]))
    return "\n".join(text)


def draw_gpu_user(plt, png):
    rows = user_rows()
    if not rows:
        return False
    labels = [w for w, *_ in rows]
    series = {"cuVS": [], "torch": []}
    for _, mn, cu, to in rows:
        series["cuVS"].append(cu["median_ms"] / mn["median_ms"] if cu and cu.get("median_ms") else 0)
        series["torch"].append(to["median_ms"] / mn["median_ms"] if to and to.get("median_ms") else 0)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(labels) + 1.6))
    h = 0.38
    for i, (name, vals) in enumerate(series.items()):
        ax.barh([j + i * h for j in range(len(labels))], vals, h, label=f"{name} time / mnemo time")
    ax.set_yticks([j + h / 2 for j in range(len(labels))])
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
    ax.set_xlabel("peer time / mnemo time, from Python with a device sync (log; right of 1: mnemo faster)")
    ax.set_title("Recall as users call it, one H200")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return True


# ----------------------------------------------------------- activation

def activation():
    title = "Activation: recall weighted by recency and importance"
    gpu, user, cpu = load("h200-activation.jsonl"), load("h200-activation-user.jsonl"), load("activation-cpu.jsonl")
    text = [f"## {title}", ""]
    if not (gpu or user or cpu):
        return "\n".join(text + [NOT_MEASURED])
    text += [
        "One store, one query, k = 10, cosine over 768-dim f32 rows with random last-access times over a year",
        "and importances: plain search, activation (relevance + recency + importance,",
        "[docs/activation.md](activation.md)) and its min-max normalised form, called in turn; medians. From",
        "Python the torch peer computes the same terms over the whole store and takes its top-k.",
        "",
        source(*[n for n, d in (("h200-activation.jsonl", gpu), ("h200-activation-user.jsonl", user),
                                ("activation-cpu.jsonl", cpu)) if d]),
        "",
    ]

    def pick(rows, impl):
        r = next((r for r in rows if r["impl"] == impl), None)
        return r and r["median_ms"]

    def cell(v, plain):
        return "-" if v is None else f"{ms(v)} ({v / plain:.3f}x)"

    body = []
    for rows, where in ((gpu, "GPU time (CUDA events), H200"), (cpu, "host call, 2-core CPU, 2 threads")):
        if not rows:
            continue
        n = re.search(r"x (\d+) x", rows[0]["workload"])
        plain = pick(rows, "mnemo plain")
        body.append([where, f"{int(n.group(1)):,}" if n else "?", ms(plain),
                     cell(pick(rows, "mnemo activation"), plain),
                     cell(pick(rows, "mnemo activation normalized"), plain), "-"])
    if user:
        for run in sorted({r.get("run", 1) for r in user}):
            rs = [r for r in user if r.get("run", 1) == run and r.get("MNEMO_ACT_TERMS", "default") == "default"]
            plain = pick(rs, "mnemo plain")
            if plain is None:
                continue
            body.append([f"from Python with a sync, H200, run {run}", "1,000,000", ms(plain),
                         cell(pick(rs, "mnemo activation"), plain), "-",
                         cell(pick(rs, "torch activation (matmul + terms + topk)"), plain)])
    text.append(table(["where", "rows", "plain ms", "activation ms (x plain)", "normalised ms (x plain)",
                       "torch, the same terms ms (x plain)"], body))
    return "\n".join(text)


# ------------------------------------------------- kernels against the floor

def gpu_rows(recall):
    rows = load("h200-latest.jsonl") or []
    return [r for r in rows if r["impl"].startswith("mnemo") and r["workload"].startswith("recall") == recall]


def floors_line():
    raw = load("h200-mnemo-gpu.jsonl") or []
    dev = next((r["impl"] for r in raw if r["workload"] == "device"), None)
    f = next((r for r in raw if r["workload"] == "floors"), None)
    if not f:
        return ""
    return (f"Floors measured in the same run on the {dev or 'GPU'}: read {f['read_gbs']:,.0f} GB/s, copy "
            f"{f['copy_gbs']:,.0f} GB/s (read + write), cuBLAS FP32 {f['fp32_tflops']:.1f}, TF32 "
            f"{f['tf32_tflops']:.1f}, FP16 {f['fp16_tflops']:.1f} TFLOP/s (`bench/results/h200-mnemo-gpu.jsonl`).")


def floor_table(rows, what):
    body = []
    for r in rows:
        mode = re.search(r"\((.*)\)", r["impl"])
        mode = mode.group(1) if mode else ("EXACT" if r["workload"].startswith("recall") else "-")
        best = min(r["ratio_vs"].items(), key=lambda kv: kv[1]) if r.get("ratio_vs") else None
        variant = best[0].replace("torch ", "").replace(" (", ", ").replace(")", "") if best else ""
        peer = f"{ms(best[1] * r['median_ms'])} ({variant})" if best else "-"
        body.append([r["workload"], mode, ms(r["median_ms"]), ms(r.get("floor_ms")),
                     f"{r['pct_of_floor']:.0f}%" if r.get("pct_of_floor") is not None else "-",
                     peer, times(best[1]) if best else "-"])
    return table(["workload", what, "mnemo ms", "floor ms", "% of floor", "fastest torch ms", "mnemo vs torch"], body)


METHOD = (
    "Data resident on the device; mnemo's device part of each call timed with CUDA events (for a search:",
    "every kernel from the scan or GEMM to the user ids and scores; for the operations: the `*_device`",
    "entry point on device pointers and a caller stream), median of 20 runs after at least 0.25 s of the",
    "same workload; inputs under 180 MB rotated among copies so they are not served from L2. The \"host",
    "call\" row is the whole C call with host queries and results. The floor is the bytes moved at the",
    "measured read bandwidth, or the GEMM's flops at the measured cuBLAS rate, whichever is larger.",
    "PyTorch (`bench/gpu/torch_peer.py`, `bench/gpu/torch_ops_peer.py`) runs the same workloads timed the",
    "same way in the same run; the fastest torch variant is shown, like for like: EXACT rows against FP32",
    "torch, FAST rows (tensor-core products, the top lists re-scored exactly) against TF32/FP16 torch.",
)


def gpu_kernels():
    title = "GPU kernels against the floor"
    rows = gpu_rows(True)
    text = [f"## {title}", ""]
    if not rows:
        return "\n".join(text + [NOT_MEASURED])
    text += list(METHOD) + ["", source("h200-latest.jsonl"), floors_line(), "", floor_table(rows, "mode")]
    pic = picture("gpu-speedup.png", "speed-up over the fastest torch variant, every row of the run")
    if pic:
        text += ["", pic]
    return "\n".join(text)


def gpu_ops():
    title = "Pairs, resampling and normalisation on the GPU"
    rows = gpu_rows(False)
    text = [f"## {title}", ""]
    if not rows:
        return "\n".join(text + [NOT_MEASURED])
    text += [
        "Pair scoring (an embeddings table and (source, target) index pairs, one score a pair; `sorted`: pairs",
        "grouped by source, `gather`: in input order), trajectory resampling (B x S samples at per-row times to",
        "T target times, linear interpolation) and row normalisation, on device pointers; the same method and",
        "run as the section above. torch: `index_select` of both sides + `cosine_similarity`;",
        "`searchsorted` + `gather` + `lerp`; `F.layer_norm` and `F.normalize`.",
        "",
        source("h200-latest.jsonl"), "", floor_table(rows, "path"),
    ]
    return "\n".join(text)


def draw_gpu_speedup(plt, png):
    rows = load("h200-latest.jsonl")
    if not rows:
        return False
    mod = _module("gpu_report", "bench/gpu/report.py")
    raw = load("h200-mnemo-gpu.jsonl") or []
    dev = next((r["impl"] for r in raw if r["workload"] == "device"), rows[0].get("device", "GPU"))
    mod.plot(rows, dev, png, plt)
    return True


# ------------------------------------------------------------------ CPU

def cpu():
    title = "CPU against FAISS and numpy"
    rows = load("cpu-latest.jsonl")
    text = [f"## {title}", ""]
    if not rows:
        return "\n".join(text + [NOT_MEASURED])
    fl = next((r for r in rows if r["workload"] == "floors"), {})
    run = run_of("cpu-latest.jsonl")
    text += [
        "`make bench` runs, in one process: mnemo through its C ABI, FAISS (Debian's libfaiss-dev, linked into",
        "the benchmark only: IndexFlatIP, IndexFlatL2, IndexScalarQuantizer fp16) and numpy (Debian's",
        "python3-numpy, `bench/cpu/numpy_peer.py`, the same threads). Every time is the median of 9 runs after",
        "two warm-ups. The floor of a search or normalisation row is its bytes at the read bandwidth measured",
        "in the same run; the 100-query rows' floor is the bare OpenBLAS sgemm of the same shape, so over 100%",
        "means faster than that sgemm alone (with no top-k). The machine is shared: the read floor moves by",
        "about a fifth between runs.",
        "",
        source("cpu-latest.jsonl"),
        f"Machine: {fl.get('device', '?')}; read floor {fl.get('read_gbs', 0):.1f} GB/s; load average "
        f"before the run {fl.get('load', '?')}"
        + (f"; made by `{fl['command']}`" if fl.get("command") and fl.get("command") != run.get("command") else "")
        + ".",
        "",
    ]
    peers = {}
    for r in rows:
        if r.get("impl") not in (None, "mnemo") and not r["impl"].startswith("mnemo"):
            peers[(r["workload"], "numpy" if r["impl"] == "numpy" else "FAISS")] = r
    body = []
    for r in rows:
        if r.get("impl") != "mnemo":
            continue
        fa, nu = peers.get((r["workload"], "FAISS")), peers.get((r["workload"], "numpy"))
        fa_ms = f"{ms(fa['median_ms'])} ({fa['impl'].replace('FAISS ', '')})" if fa else "-"
        body.append([r["workload"], ms(r["median_ms"]), f"{r['pct_of_floor']:.0f}%", fa_ms,
                     times(fa and fa["median_ms"] / r["median_ms"]), ms(nu and nu["median_ms"]),
                     times(nu and nu["median_ms"] / r["median_ms"])])
    text.append(table(["workload", "mnemo ms", "% of floor", "FAISS ms", "mnemo vs FAISS", "numpy ms",
                       "mnemo vs numpy"], body))
    sg = next((r for r in rows if r["workload"].startswith("floor: sgemm")), None)
    if sg:
        text += ["", f"The bare sgemm of the 100-query shape ({sg['workload'][len('floor: sgemm '):]}) took "
                 f"{ms(sg['median_ms'])} ms ({sg['rate']:.1f} GFLOP/s). \"validation off\" rows skip the "
                 "NaN/Inf scan of the input that a call makes by default."]
    sw = [r for r in rows if r["workload"].startswith("switch point")]
    if sw:
        body = []
        for w in dict.fromkeys(r["workload"] for r in sw):
            st = next((r for r in sw if r["workload"] == w and r["impl"] == "mnemo streaming"), None)
            ge = next((r for r in sw if r["workload"] == w and r["impl"] == "mnemo sgemm"), None)
            body.append([re.search(r"(\d+)q", w).group(1), ms(st and st["median_ms"]), ms(ge and ge["median_ms"])])
        text += ["", "A batch streams through the store (up to four queries a pass) or takes the sgemm path; the "
                 "switch point by batch size, same run, 100k x 768 f32 cosine:", "",
                 table(["queries", "streaming ms", "sgemm ms"], body)]
    pic = picture("cpu-speedup.png", "mnemo's CPU backend against FAISS and numpy")
    if pic:
        text += ["", pic]
    return "\n".join(text)


def draw_cpu_speedup(plt, png):
    rows = load("cpu-latest.jsonl")
    if not rows:
        return False
    fl = next((r for r in rows if r["workload"] == "floors"), {})
    mod = _module("cpu_report", "bench/cpu/report.py")
    mod.plot([r for r in rows if r.get("impl") == "mnemo"], fl.get("threads", "?"), png, plt)
    return True


# ------------------------------------------------------------- the index

IVF = (  # file, what
    ("ivf-cpu.jsonl", "CPU, clustered mixture"),
    ("ivf-cpu-patches.jsonl", "CPU, real data: image patches (8 x 8 RGB of scikit-learn's two sample "
     "photographs, 192-dim, mean removed, unit)"),
    ("ivf-h100.jsonl", "GPU, clustered mixture"),
    ("ivf-h100-centre0.5.jsonl", "GPU, overlapping clusters (centre scale 0.5: a query's neighbours spread "
     "over many lists)"),
)


def at_recall(rows, target):
    """queries/s at `target` recall, interpolated in log(qps) between the two
    nprobe points that bracket it (None when no point reaches it); the rule
    of bench/ivf/cpu_ivf_bench.py."""
    pts = sorted((r["recall"], r["qps"]) for r in rows)
    for (r0, q0), (r1, q1) in zip(pts, pts[1:]):
        if r0 <= target <= r1 and r1 > r0:
            t = (target - r0) / (r1 - r0)
            return math.exp(math.log(q0) + t * (math.log(q1) - math.log(q0)))
    hit = [q for r, q in pts if r >= target]
    return max(hit) if hit else None


def ivf_table(rows):
    """The table of bench/ivf/report.py, from one results file."""
    peer = next((r["impl"] for r in rows if r["impl"] != "mnemo"), "peer")
    ex = next(r for r in rows if r["impl"] == "mnemo" and r["kind"] == "exact")
    mi = [r for r in rows if r["impl"] == "mnemo" and r["kind"] == "ivf"]
    pe = [r for r in rows if r["impl"] == peer and r["kind"] == "ivf"]
    builds = {r["impl"]: r for r in rows if r["kind"] == "build"}
    out = [f"{ex['n']:,} x {ex['dim']} stored, k = 10.", "",
           f"| nprobe | mnemo recall@10 | mnemo 1 query, ms | mnemo batch, queries/s | {peer} recall@10 | "
           f"{peer} 1 query, ms | {peer} batch, queries/s |", "|---|---|---|---|---|---|---|"]
    for i, m in enumerate(mi):
        p = pe[i] if i < len(pe) else None
        ps = f"{p['recall']:.4f} | {p['single_ms']:.3f} | {p['batch_qps']:,.0f}" if p else "- | - | -"
        out.append(f"| {m['nprobe']} | {m['recall']:.4f} | {m['single_ms']:.3f} | {m['batch_qps']:,.0f} | {ps} |")
    out += [f"| exact scan | 1 | {ex['single_ms']:.3f} | {ex['batch_qps']:,.1f} | | | |", ""]
    first = next((m for m in mi if m["recall"] >= 0.95), None)
    if first:
        out.append(f"- One query at recall@10 >= 0.95: nprobe {first['nprobe']} (recall {first['recall']:.4f}), "
                   f"{first['single_ms']:.3f} ms, {first['qps'] / ex['qps']:.1f}x the exact scan's queries/s.")
    else:
        out.append("- No nprobe measured reached recall@10 0.95, for either index: there is no equal-recall point.")
    if pe:
        for key, label in (("batch_qps", "a batch"), ("qps", "one query at a time")):
            qm = at_recall([{"recall": r["recall"], "qps": r[key]} for r in mi], 0.95)
            qp = at_recall([{"recall": r["recall"], "qps": r[key]} for r in pe], 0.95)
            if qm and qp:
                out.append(f"- Queries/s at recall@10 0.95 ({label}, interpolated between nprobe points): mnemo "
                           f"{qm:,.0f}, {peer} {qp:,.0f}: {qm / qp:.2f}x.")
    out.append("- Build (train + add): " + ", ".join(f"{impl} {b['build_s']:.1f} s" for impl, b in builds.items())
               + ".")
    return "\n".join(out)


def index():
    title = "The index against FAISS and cuVS"
    text = [f"## {title}", "",
            "Sublinear recall with mnemo's inverted-file index ([docs/index.md](index.md)) against FAISS's",
            "IndexIVFFlat (faiss-cpu, same process, same threads) and cuVS's IVF-Flat (float32 rows and queries",
            "for cuVS, same process). Data: a mixture of 10,000 Gaussian clusters (random centres, a random scale",
            "per cluster over a shared isotropic noise floor), unit rows (cosine; inner product for the peers),",
            "queries drawn from the same mixture and not stored (`bench/ivf/mixture.py`,",
            "`bench/gpu/ivf_bench.py`), and real image patches. Recall@10 is against mnemo's exact scan of the",
            "same store. One query: the median wall time of single calls (from numpy on the CPU, from torch",
            "tensors on the GPU, synchronised); batch: one call of every query. The GPU rows ran on an H100.",
            ""]
    have = [(n, w, load(n)) for n, w in IVF]
    have = [h for h in have if h[2]]
    if not have:
        return "\n".join(text + [NOT_MEASURED])
    pic = picture("ivf-recall.png", "recall against queries/s")
    if pic:
        text += [pic, ""]
    for name, what, rows in have:
        text += [f"### {what}", "", source(name), "", ivf_table(rows), ""]
    return "\n".join(text).rstrip()


def draw_ivf(plt, png):
    sets = []
    for name, what in IVF:
        rows = load(name)
        if not rows:
            continue
        r0 = rows[0]
        peer = next((r["impl"] for r in rows if r["impl"] != "mnemo"), "peer")
        if "gpu" in r0:
            title = f"{r0['gpu']}: {r0['n']:,} x {r0['dim']} f16, centre scale {r0.get('centre_scale', 1)}"
        else:
            kind = "image patches" if r0.get("data") == "patches" else "mixture"
            title = f"CPU {r0['threads']} threads: {r0['n']:,} x {r0['dim']} f32 {kind}"
        sets.append((title, rows, peer))
    if not sets:
        return False
    mod = _module("ivf_report", "bench/ivf/report.py")  # needs numpy, which matplotlib brings
    mod.plot(png, sets)
    return True


# --------------------------------------------------------- several GPUs

MULTI = {  # bench name: what it is
    "latency_1q": "one query, host buffers, 1M rows a GPU",
    "latency_1q_dev": "one query, device buffers, 1M rows a GPU",
    "weak_1000q": "1000 queries, 2M rows a GPU (weak scaling)",
    "strong_1000q": "1000 queries over 2M rows (strong scaling), host buffers",
    "strong_1000q_dev": "1000 queries over 2M rows (strong scaling), device buffers",
    "add": "add 768-dim f32 rows",
    "add_one_gpu": "add 768-dim f32 rows, one GPU",
    "add_host_only": "add 768-dim f32 rows to a CPU store (the host's share of an add)",
}


def multi_gpu():
    title = "Several GPUs"
    rows, user = load("h200x4-multi-gpu.jsonl"), load("h200x4-user.jsonl")
    text = [f"## {title}", ""]
    if not (rows or user):
        return "\n".join(text + [NOT_MEASURED])
    text += [
        "A store sharded over the GPUs of one host ([docs/distributed.md](distributed.md)): every shard",
        "searched at once from threads the store keeps, the lists merged on the first GPU, bit-identical to",
        "one device. Whole C calls (`mnemo_multi_bench`: wall clock, medians), each against one GPU of the",
        "same run; 768-dim f32 rows, k = 10. \"time ratio\" is the time over one GPU's time on its share",
        "(1.00: no cost for the extra GPUs); \"speed-up\" is one GPU's time over the time.",
        "",
    ]
    if rows:
        body = []
        for r in rows:
            b = r["bench"]
            if b.startswith("add_"):
                fig = f"{r.get('gbps', 0):.2f} GB/s"
            elif b.startswith("add") or b.startswith("strong"):
                fig = f"speed-up {1 / r['ratio']:.2f}x"
            else:
                fig = f"time ratio {r['ratio']:.3f}"
            body.append([MULTI.get(b, b), r["gpus"] or "none (CPU)", f"{r['rows']:,}", r["nq"] or "-", ms(r["ms"]),
                         ms(r["one_gpu_ms"]), fig])
        text += [source("h200x4-multi-gpu.jsonl"), "",
                 table(["workload", "GPUs", "rows", "queries", "ms", "one GPU ms", "figure"], body)]
        pic = picture("multi-gpu-scaling.png", "speed-up over one GPU by GPU count")
        if pic:
            text += ["", pic]
    if user:
        body = []
        for w in dict.fromkeys(r["workload"] for r in user):
            rs = [r for r in user if r["workload"] == w]
            one = next((r for r in rs if r["impl"].endswith("1 GPU")), None)
            many = next((r for r in rs if re.search(r"\d+ GPUs$", r["impl"])), None)
            to = next((r for r in rs if r["impl"].startswith("torch")), None)
            if not many:
                continue
            body.append([w, ms(one and one["median_ms"]), ms(many["median_ms"]), ms(to and to["median_ms"]),
                         times(to and to["median_ms"] / many["median_ms"]), overlap(many.get("note"))])
        text += ["", "From Python (queries a torch tensor on the first GPU, wall clock with a sync; torch with one "
                 "shard a GPU, the query copied to each and the lists merged on the first):", "",
                 source("h200x4-user.jsonl"), "",
                 table(["workload", "mnemo, one GPU ms", "mnemo, sharded ms", "torch, a shard a GPU ms",
                        "mnemo vs torch", "top-k"], body)]
    return "\n".join(text)


def draw_multi(plt, png):
    rows = load("h200x4-multi-gpu.jsonl")
    if not rows:
        return False
    mod = _module("multi_report", "bench/gpu/multi_report.py")
    mod.plot(rows, png, plt)
    return True


# ----------------------------------------------------------- build times

def build_times():
    title = "Build times"
    path = os.path.join(RESULTS, "cuda-compile-times.tsv")
    text = [f"## {title}", ""]
    if not os.path.exists(path):
        return "\n".join(text + [NOT_MEASURED])
    with open(path) as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    units = []
    for line in lines:
        if line.startswith("#"):
            continue
        name, wall, cpu_s = line.split("\t")[:3]
        units.append((name, float(wall), float(cpu_s)))
    units.sort(key=lambda u: -u[1])
    total = sum(u[1] for u in units)
    text += [
        "The CUDA module's translation units, compiled one at a time for sm_90; the end-to-end build times",
        "(`make demo`, `pip install .`, `cargo build`, CI) are in the README's",
        "[Building](../README.md#building) section.",
        "",
        source("cuda-compile-times.tsv"),
        "",
        f"{len(units)} translation units, {total:,.0f} s of compile time in all; the slowest:",
        "",
        table(["translation unit", "wall s", "CPU s"], [[n, f"{w:.1f}", f"{c:.1f}"] for n, w, c in units[:8]]),
    ]
    return "\n".join(text)


# ------------------------------------------------------------ shape grid

SHAPE_IMPLS = ("mnemo", "torch", "cuvs", "faiss", "numpy")
SHAPE_NAMES = {"mnemo": "mnemo", "torch": "torch", "cuvs": "cuVS", "faiss": "FAISS", "numpy": "numpy"}


def shape_time(row, impl, kind="wall"):
    """An implementation's time in a shape-grid row: `IMPL_ms` or
    `IMPL_wall_ms` (wall clock of a call), `IMPL_kernel_ms` (GPU time)."""
    if kind == "kernel":
        return row.get(f"{impl}_kernel_ms")
    v = row.get(f"{impl}_ms")
    return v if v is not None else row.get(f"{impl}_wall_ms")


def shape_lead(r, kind):
    """A GPU grid row's lead: the faster of torch and cuVS over mnemo
    ("wall" from Python, "kernel" in GPU time), None where a time is missing."""
    peers = [x for x in (shape_time(r, "torch", kind), shape_time(r, "cuvs", kind)) if x]
    mine = shape_time(r, "mnemo", kind)
    return min(peers) / mine if peers and mine else None


def shape_targets(rows):
    """The GPU grid against the shape targets (kernel time from CUDA events,
    the wall clock from Python); empty for a grid without GPU times."""
    if not any(r.get("mnemo_kernel_ms") for r in rows):
        return []

    def pct(r):
        return 100 * r["floor_ms"] / r["mnemo_kernel_ms"]

    out = ["Against the targets (a cell counts as met at or above the target):", ""]
    for kind, what in (("wall", "from Python"), ("kernel", "in GPU time")):
        v = [shape_lead(r, kind) for r in rows]
        v = [x for x in v if x]
        out.append(f"- every cell at least 1.1x the faster of torch and cuVS, {what}: {sum(x >= 1.1 for x in v)} of "
                   f"{len(v)} cells (lowest {min(v):.2f}x, median {sorted(v)[len(v) // 2]:.2f}x)")
    for label, cond, goal in (
            ("one query, stores of 1 GB and more, k up to 100", lambda r: r["store_bytes"] >= 1 << 30 and r["k"] <= 100, 85),
            ("one query, stores of 1 GB and more, k = 1000", lambda r: r["store_bytes"] >= 1 << 30 and r["k"] == 1000, 75),
            ("one query, stores of 64 MB", lambda r: r["store_bytes"] < 1 << 30, 50)):
        v = [pct(r) for r in rows if r["nq"] == 1 and cond(r)]
        if v:
            out.append(f"- {label}, kernel time at least {goal}% of the read floor: {sum(x >= goal for x in v)} of "
                       f"{len(v)} cells (lowest {min(v):.0f}%, median {sorted(v)[len(v) // 2]:.0f}%)")
    for nq, goal in ((100, 1.5), (1000, 1.1)):
        v = [shape_lead(r, "wall") for r in rows if r["nq"] == nq]
        v = [x for x in v if x]
        if v:
            out.append(f"- {nq} queries at least {goal}x the faster peer (from Python): {sum(x >= goal for x in v)} of "
                       f"{len(v)} cells (lowest {min(v):.2f}x, median {sorted(v)[len(v) // 2]:.2f}x)")
    return out + [""]


def shape_grid():
    """The shape grid: one row a shape (dim, dtype, k, nq, store size,
    metric), mnemo's time and each peer's where measured
    (shape-grid-h200.jsonl, shape-grid-cpu.jsonl); missing keys show as -."""
    title = "The shape grid"
    text = [f"## {title}", "",
            "Recall over a grid of shapes (dimension, dtype, k, queries, store size, metric), mnemo beside each",
            "peer measured on the same machine in the same run: the wall clock of a call, and where measured",
            "the GPU time of the same call (\"GPU\"). The floor is the store's bytes at the read bandwidth",
            "measured in the same run. How the GPU scans adapt to the row width and k, and what the profiles",
            "of the misses say: [shapes.md](shapes.md).", ""]
    found = False
    for name, where in (("shape-grid-h200.jsonl", "GPU (H200)"), ("shape-grid-cpu.jsonl", "CPU")):
        rows = load(name)
        if not rows:
            continue
        found = True
        cols = []  # (title, getter)
        for impl in SHAPE_IMPLS:
            if any(shape_time(r, impl) is not None for r in rows):
                cols.append((f"{SHAPE_NAMES[impl]} ms", lambda r, i=impl: shape_time(r, i)))
            if any(shape_time(r, impl, "kernel") is not None for r in rows):
                cols.append((f"{SHAPE_NAMES[impl]} GPU ms", lambda r, i=impl: shape_time(r, i, "kernel")))
        if any(r.get("floor_ms") is not None for r in rows):
            cols.append(("floor ms", lambda r: r.get("floor_ms")))
        body = []
        for r in rows:
            size = r.get("store_bytes")
            cells = [r.get("dim", "-"), r.get("dtype", "-"), r.get("metric", "-"), r.get("k", "-"),
                     r.get("nq", "-"), f"{size / 2 ** 20:,.0f}" if isinstance(size, (int, float)) else "-"]
            cells += [ms(get(r)) for _, get in cols]
            peers = [(shape_time(r, i), SHAPE_NAMES[i]) for i in SHAPE_IMPLS[1:] if shape_time(r, i)]
            mine = shape_time(r, "mnemo")
            best = min(peers) if peers else None
            cells.append(f"{times(best[0] / mine)} ({best[1]})" if best and mine else "-")
            body.append(cells)
        # Hundreds of cells: folded under their targets, so the page reads on.
        text += [f"### {where}", "", source(name), ""] + shape_targets(rows) + [
                 f"<details><summary>Every cell ({len(body)})</summary>", "",
                 table(["dim", "dtype", "metric", "k", "queries", "store MiB"] + [c for c, _ in cols]
                       + ["mnemo vs the fastest peer"], body), "", "</details>", ""]
    pic = picture("shape-grid.png", "mnemo against its peers over the shape grid")
    if found and pic:
        text += [pic, ""]
    if not found:
        text.append(NOT_MEASURED)
    return "\n".join(text).rstrip()


# ------------------------------------------------------- filtered search

FILTERED_WHERE = {"cpu": "CPU", "gpu": "GPU", "h100": "GPU (H100)", "h200": "GPU (H200)",
                  "h200-dense": "GPU (H200): the dense plan, FAST, against the spans in one process",
                  "h200-10k": "GPU (H200): 10,000 queries in one batch, FAST, the dense plan on and off",
                  "h200-shares": "GPU (H200): 10,000 queries in one batch, FAST, the dense plan at three shares",
                  "h200-paced": "GPU (H200): 10,000 queries in one batch, FAST, after the batch kernel's paced "
                                "threshold reads"}
FILTERED_TARGETS = (0.9, 0.95, 0.99)


def filtered_files():
    """(name, where, rows) of every bench/results/filtered-*.jsonl, the CPU first."""
    names = sorted((f for f in os.listdir(RESULTS) if re.fullmatch(r"filtered-[\w.-]+\.jsonl", f)),
                   key=lambda f: (f != "filtered-cpu.jsonl", f))
    out = []
    for name in names:
        rows = load(name)
        if rows:
            tag = name[len("filtered-"):-len(".jsonl")]
            where = FILTERED_WHERE.get(tag, tag)
            if tag == "gpu":  # the device's name is the machine's first part
                where += f" ({rows[0].get('machine', '?').split(';')[0]})"
            out.append((name, where, rows))
    return out


def filtered_picks(rows):
    """The rows the page shows, each with what it stands for: every exact
    row, and of a swept peer (nprobe) the fastest row at or above each
    target recall; plus a note per target a swept peer never reached."""
    picks, notes = [], []
    runs_ = [r for r in rows if r.get("mode") != "build" and r.get("qps")]
    for r in runs_:
        if r.get("nprobe") is None:
            picks.append((r, "exact"))
    for peer in dict.fromkeys(r["peer"] for r in runs_ if r.get("nprobe") is not None):
        for mode in dict.fromkeys(r["mode"] for r in runs_ if r["peer"] == peer):
            sweep = [r for r in runs_ if r["peer"] == peer and r["mode"] == mode and r.get("nprobe") is not None]
            if mode != "batch" and len(sweep) == 1:
                picks.append((sweep[0], "one point"))
                continue
            chosen = {}
            for t in FILTERED_TARGETS:
                ok = [r for r in sweep if r["recall"] >= t]
                if ok:
                    best = max(ok, key=lambda r: r["qps"])
                    chosen.setdefault(id(best), (best, []))[1].append(t)
                else:
                    top = max(sweep, key=lambda r: r["recall"])
                    notes.append(f"{peer} ({mode}) never reached recall@10 {t}: at most {top['recall']:.4f} "
                                 f"({top['setting']}).")
            picks += [(r, "fastest at recall >= " + ", ".join(f"{t:g}" for t in ts)) for r, ts in chosen.values()]
    return picks, notes


def filtered_table(rows):
    picks, notes = filtered_picks(rows)
    decades = sorted({d for r, _ in picks for d in r.get("recall_by_selectivity", {})}, key=lambda d: float(d))
    body = []
    for r, why in picks:
        by = r.get("recall_by_selectivity", {})
        body.append([r["peer"], r["mode"] + (f", {r['batch']:,} a call" if r["mode"] == "batch" else ""),
                     r["setting"], why, f"{r['qps']:,.0f}", f"{r['search_qps']:,.0f}", f"{r['recall']:.4f}"]
                    + [f"{by[d]:.3f}" if d in by else "-" for d in decades] + [r.get("load", "-")])
    head = ["peer", "how it is called", "setting", "shown as", "queries/s", "search only, queries/s",
            "recall@10"] + [f"recall, selectivity {d}" for d in decades] + ["load"]
    return table(head, body), notes


def filtered():
    title = "Filtered search"
    text = [f"## {title}", "",
            "The shape of the NeurIPS'23 big-ann filtered track (YFCC-10M: CLIP vectors of 192 dims, a bag of",
            "tags per image from a vocabulary of about 200,000, queries of one or two tags that a result must all",
            "carry, k = 10), made here at any size by `bench/filtered/gen.py`: unit rows from a Gaussian mixture,",
            "about 10 tags a row from a Zipf law (the most frequent tag on about 30% of the rows), rare tags",
            "crowded in a few clusters, queries whose matching rows span 1e-6 (10 rows in 10M; 1e-5 at 1M) to 0.3",
            "of the store; inner product; recall@10 against the exact filtered top 10. `bench/filtered/run.py`",
            "runs every peer in one process on the same data, queries and threads. mnemo: its exact filtered",
            "search (one filter a query, evaluated inside the search) through the C ABI in batches and one query",
            "a call (FAST runtimes: queries of broad tag filters searched together by the batch kernel over",
            "every row, each key masked by its own filter, `MNEMO_FILTER_DENSE` the share of the store from",
            "which a filter goes there; the setting column names it), the same one query a call from as many",
            "Python threads as the runtime would have, on one",
            "thread each (`mnemo-callers`), through the Python API (`mnemo-py`:",
            "`Store.search(where_each=[{\"$tags\": {\"$all\": [...]}}])`, `where=` for one query), and over its index",
            "(`mnemo-ivf`, nprobe swept). numpy: a masked matrix product. FAISS: IndexFlatIP with an",
            "IDSelectorBitmap of the query's matching rows, IndexIVFFlat with the same selector, and the track",
            "baseline's rule (the matching rows scanned exactly under 1e-3 of the store, IVF otherwise), one",
            "query a call from as many Python threads as the others have threads. On a GPU: cuVS brute_force with",
            "a per-query bitmap prefilter, and torch (masked matrix product + topk). numpy and FAISS take each",
            "query's matching rows from an inverted index built in numpy: computing them (on one thread) is",
            "counted in their queries/s (\"search only\" leaves it out); cuVS and torch keep that index on the GPU",
            "and build each batch's mask there, inside their timed searches. Index builds are not counted. A",
            "swept peer shows its fastest measured point at or above each target recall; every point is in the",
            "file. Recall by selectivity: the mean over the queries whose matching rows are in that decade of the",
            "store. \"load\": the machine's one-minute load average when the row was written; mnemo's calls of",
            "one query share it out over the runtime's threads, so on the shared 2-core machine those rows move",
            "most with the other work running there.",
            "",
            "For scale, the track's published figures: queries/s at recall@10 0.9 on YFCC-10M on 8 vCPUs (Azure",
            "D8lds v5): FAISS baseline 3,032; ParlayANN IVF² 37,902; the best closed entries about 85,000",
            "(Pinecone 85,491, Zilliz 84,596). Those are the track's numbers, on its data and its hardware, not",
            "measurements of this project; the figures below are on a stand-in data set and other machines.",
            ""]
    have = filtered_files()
    if not have:
        return "\n".join(text + [NOT_MEASURED])
    for name, where, rows in have:
        r0 = next((r for r in rows if r.get("mode") != "build"), rows[0])
        ix = next((r for r in rows if r.get("mode") == "build"), None)
        tab, notes = filtered_table(rows)
        text += [f"### {where}", "", source(name), "",
                 f"{r0['n']:,} x {r0['dim']} {r0['dtype']} rows, {r0['nq']:,} queries, k = {r0['k']}, "
                 f"{r0['threads']} threads; {r0.get('machine', '?')}."
                 + (f" The inverted index: built in {ix['build_s']:.2f} s, every query's matching rows in "
                    f"{ix['ids_s']:.2f} s ({ix['ids_ms_per_query']:.3f} ms a query)." if ix else ""),
                 "", tab, ""]
        text += [f"- {n}" for n in notes]
        # mnemo's exact search one query a call: its mean time by the decade
        # of the query's selectivity.
        timed = [r for r in rows if r.get("ms_by_selectivity") and r["peer"].startswith("mnemo")
                 and r.get("setting", "").split(",")[0] in ("exact", "fast")]
        for r in timed:
            if r.get("ms_by_selectivity"):
                per = ", ".join(f"{d} {ms:.3f}" for d, ms in r["ms_by_selectivity"].items())
                text.append(f"- {r['peer']}, {r['mode']} ({r['setting']}), mean ms a query by selectivity: {per}.")
        if notes or timed:
            text.append("")
    return "\n".join(text).rstrip()


def scoped():
    """What a namespace scope costs against a store of just its rows, before and after Store.cluster."""
    title = "Scoped search"
    text = [f"## {title}", "",
            "A search scoped to one namespace (`where={\"$namespace\": (\"users\", \"1\")}`) against an unfiltered",
            "search of a store that holds only that namespace's rows, one query, k = 10, in one process",
            "(`bench/scoped/overhead.py`): first over a store whose users' rows are interleaved (every U-th row),",
            "then over the same store after `Store.cluster()` has laid it out by namespace, when the scope's",
            "rows are one run and the ranged plan reads them as the store of those rows alone would, and once",
            "more after 1% more memories were written to every user (appended after the runs; the store of the",
            "rows alone gets its user's share of them). Each scoped search and the search of the rows alone",
            "are called in turn, call by call, and each ratio is of their medians. The target: at most 1.1x.",
            ""]
    rows = load("scoped-cpu.jsonl")
    if not rows:
        return "\n".join(text + [NOT_MEASURED])
    r0 = rows[0]
    body = []
    for r in rows:
        body.append([f"{r['share']:.0%}", f"{r['whole_ms']:.3g}", f"{r['scoped_ms']:.3g}", f"{r['rows_alone_ms']:.3g}",
                     f"{r['filter_cost']:.2f}x", f"{r.get('clustered_scoped_ms', float('nan')):.3g}",
                     f"{r.get('rows_alone_again_ms', float('nan')):.3g}",
                     f"{r.get('clustered_filter_cost', float('nan')):.2f}x",
                     f"{r.get('after_adds_scoped_ms', float('nan')):.3g}",
                     f"{r.get('after_adds_filter_cost', float('nan')):.2f}x",
                     f"{r.get('cluster_ms', float('nan')) / 1e3:.2f}"])
    text += [source("scoped-cpu.jsonl"), "",
             f"{r0['n']:,} x {r0['dim']} f32 rows, cosine, k = {r0['k']}, {r0['backend']} backend.", "",
             table(["scope", "whole store, ms", "scoped, ms", "rows alone, ms", "scoped / alone",
                    "clustered, scoped, ms", "rows alone again, ms", "clustered / alone",
                    "after 1% more, scoped, ms", "after 1% more / alone", "cluster(), s"], body)]
    return "\n".join(text)


# --------------------------------------------------------- page and main

def adapters():
    """The framework adapters' section, rendered by bench/integrations/report.py."""
    return _module("integrations_report", "bench/integrations/report.py").section().rstrip()


def shape_grid_rerun():
    """Batch cells of the GPU grid rerun after a change (shape-grid-h200-resort.jsonl),
    mnemo and torch in the same process, beside the grid's own row of the cell."""
    name = "shape-grid-h200-resort.jsonl"
    rows = load(name)
    title = "## GPU batches after the rank re-sort"
    if not rows:
        return "\n".join([title, "", NOT_MEASURED])
    def cell(r):
        return tuple(r.get(f) for f in ("dim", "dtype", "metric", "store_bytes", "nq", "k"))

    grid = {cell(r): r for r in load("shape-grid-h200.jsonl") or []}
    body = []
    for r in rows:
        g = grid.get(cell(r), {})
        mine, was = r.get("mnemo_kernel_ms"), g.get("mnemo_kernel_ms")
        body.append([r.get("dim", "-"), r.get("dtype", "-"), r.get("k", "-"), r.get("nq", "-"), ms(mine),
                     ms(r.get("torch_kernel_ms")), times(r["torch_kernel_ms"] / mine) if mine else "-", ms(was),
                     f"{mine / was:.3f}" if mine and was else "-"])
    text = [title, "", source(name), "",
            "Batches over 1 GiB stores rerun after the rescored lists were re-sorted by rank (one block a",
            "query) instead of by one warp's insertions. GPU time of one call (CUDA events, median), torch",
            "`topk(q @ X.T)` in the same process; cuVS was not run. \"grid\" is the cell's row in the grid above",
            "(an earlier run, its own build).", "",
            table(["dim", "dtype", "k", "queries", "mnemo GPU ms", "torch GPU ms", "mnemo vs torch", "grid GPU ms",
                   "this run / grid"], body)]
    return "\n".join(text)


SECTIONS = [gpu_user, gpu_kernels, gpu_ops, activation, cpu, index, multi_gpu, build_times, shape_grid,
            shape_grid_rerun,
            filtered, scoped, adapters]
def draw_shape_grid(plt, png):
    rows_path = os.path.join(RESULTS, "shape-grid-h200.jsonl")
    if not os.path.exists(rows_path):
        return False
    mod = _module("shape_grid_plot", "bench/gpu/shape_grid_plot.py")
    mod.picture(mod.load(rows_path), png)
    return True


PICTURES = [("gpu-user.png", draw_gpu_user), ("gpu-speedup.png", draw_gpu_speedup), ("shape-grid.png", draw_shape_grid),
            ("cpu-speedup.png", draw_cpu_speedup), ("ivf-recall.png", draw_ivf),
            ("multi-gpu-scaling.png", draw_multi)]


def _module(alias, rel):
    import importlib.util
    spec = importlib.util.spec_from_file_location(alias, os.path.join(ROOT, rel))
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.join(ROOT, rel)))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
    return mod


def sections_titles():
    return [re.match(r"## (.*)", f()).group(1) for f in SECTIONS]


def head():
    toc = [f"- [{t}](#{anchor(t)})" for t in sections_titles() + [PROVENANCE]]
    glance = grid_glance()
    return "\n".join([
        "# Benchmarks",
        "",
        "<!-- Generated by bench/report.py from bench/results/: edit the results or the script, not this page. -->",
        "",
        "mnemo against what people reach for to do the same job: PyTorch and cuVS on the GPU, FAISS and numpy",
        "on the CPU, the inverted-file indexes of FAISS and cuVS for sublinear recall. Every figure here is the",
        "current run of its machine, read from `bench/results/` by `bench/report.py`",
        "(`python3 bench/report.py` rewrites this page). How each figure got where it is, with every design",
        "measured and not kept, is in the [lab notebook](lab/README.md); which results file is which, and the",
        "command that wrote it, in [bench/results/README.md](../bench/results/README.md).",
        "",
        "Times are medians in milliseconds. \"mnemo vs peer\" is the peer's time over mnemo's: above 1.00x",
        "mnemo is faster. A peer runs in the same process, on the same data, in the same run as the mnemo",
        "figure beside it. The rows are 768-dim f32 and k = 10 unless the row says otherwise.",
        "",
        "## At a glance",
        "",
        how_fast(page="", glance=False),
        "",
        *(glance + [""] if glance else []),
        "Sections:",
        "",
        *toc,
    ])


# The last section: each results file's machine, date and notebook.
PROVENANCE = "What was measured, where, when"


def provenance():
    rows = [[x.get("area", "-"), f"[`{x['file']}`](../bench/results/{x['file']})", x.get("machine", "-"),
             x.get("date", "-"), f"[notebook](lab/{x['notebook']})" if x.get("notebook") else "-"]
            for x in runs() if os.path.exists(os.path.join(RESULTS, x["file"]))]
    return "\n".join([f"## {PROVENANCE}", "",
                      "The command that wrote each file is in [bench/results/README.md](../bench/results/README.md).",
                      "", table(["area", "results", "machine", "date", "how it got there"], rows)])


def render_page():
    return "\n\n".join([head()] + [f() for f in SECTIONS] + [provenance()]) + "\n"


def how_fast(page="docs/benchmarks.md", glance=True):
    """The headline rows (the README's, and the top of the page with
    page=""): each mnemo figure beside its peers and the page's section."""
    out = ["| workload | mnemo | peers, same run | mnemo vs the fastest peer |", "|---|---|---|---|"]
    link = f"{page}#{anchor('GPU recall as users call it')}"
    rows = user_rows()
    for want, label in (("1q x 1M x 768 f32 k=10", "one query, 1M x 768 f32, GPU (H200), from Python"),
                        ("100q x 1M x 768 f32 k=10", "100 queries, 1M x 768 f32, GPU (H200), from Python")):
        hit = next(((mn, cu, to) for w, mn, cu, to in rows if w == want), None)
        if hit is None:
            continue
        mn, cu, to = hit
        best, who = best_peer((cu, "cuVS"), (to, "torch"))
        peers = ", ".join(f"{n} {ms(p['median_ms'])} ms" for p, n in ((cu, "cuVS"), (to, "torch"))
                          if p and p.get("median_ms"))
        out.append(f"| [{label}]({link}) | {ms(mn['median_ms'])} ms | {peers} | "
                   f"{times(best / mn['median_ms'])} ({who}) |")
    rows = load("cpu-latest.jsonl") or []
    mn = next((r for r in rows if r["workload"] == "recall 1q x 100k x 768 f32 cosine k=10" and r["impl"] == "mnemo"),
              None)
    if mn:
        ps = [r for r in rows if r["workload"] == mn["workload"] and r["impl"] != "mnemo"]
        ps.sort(key=lambda r: r["median_ms"])
        peers = ", ".join(f"{'numpy' if p['impl'] == 'numpy' else 'FAISS'} {ms(p['median_ms'])} ms" for p in ps)
        best = ps[0] if ps else None
        out.append(f"| [one query, 100k x 768 f32, CPU (2 cores)]({page}#{anchor('CPU against FAISS and numpy')})"
                   f" | {ms(mn['median_ms'])} ms | {peers} | "
                   + (f"{times(best['median_ms'] / mn['median_ms'])} ({'numpy' if best['impl'] == 'numpy' else 'FAISS'})"
                      if best else "-") + " |")
    rows = load("ivf-cpu.jsonl")
    if rows:
        mi = [r for r in rows if r["impl"] == "mnemo" and r["kind"] == "ivf"]
        pe = [r for r in rows if r["impl"] not in ("mnemo",) and r["kind"] == "ivf"]
        qm = at_recall([{"recall": r["recall"], "qps": r["batch_qps"]} for r in mi], 0.95)
        qp = at_recall([{"recall": r["recall"], "qps": r["batch_qps"]} for r in pe], 0.95)
        ex = next(r for r in rows if r["impl"] == "mnemo" and r["kind"] == "exact")
        if qm and qp:
            out.append(f"| [index, {ex['n'] // 1000000}M x {ex['dim']}, recall@10 0.95, a batch, CPU (2 cores)]"
                       f"({page}#{anchor('The index against FAISS and cuVS')}) | {qm:,.0f} queries/s | "
                       f"FAISS IVF-Flat {qp:,.0f} queries/s | {qm / qp:.2f}x (FAISS) |")
    glance = grid_glance(page) if glance else []
    return "\n".join(out + ([""] + glance if glance else []))


def grid_glance(page=""):
    """Lines on the shape grids as a whole: in how many cells mnemo leads its
    fastest peer by the grid's target, the median and the lowest cell (the
    README's and the page's view of the general case, beside the headline
    rows' one shape)."""
    out = []

    def cell(r):
        size = round(r["store_bytes"] / 2 ** 20)
        store = f"{size / 1024:g} GiB" if size >= 1024 else f"{size} MiB"
        return f"{r['nq']} {'query' if r['nq'] == 1 else 'queries'}, {r['dim']} x {r['dtype']}, k = {r['k']}, {store}"

    def line(where, vals, goal, peer):
        vals = [(v, r) for v, r in vals if v]
        if not vals:
            return
        vals.sort(key=lambda x: x[0])
        low, r = vals[0]
        med = vals[len(vals) // 2][0]
        out.append(f"- {where}: at least {goal:g}x {peer} in {sum(v >= goal for v, _ in vals)} of {len(vals)} cells, "
                   f"median {med:.2f}x, lowest {low:.2f}x ({cell(r)})")

    rows = load("shape-grid-h200.jsonl") or []
    for kind, what in (("wall", "from Python"), ("kernel", "in GPU time")):
        line(f"GPU (H200), {what}", [(shape_lead(r, kind), r) for r in rows], 1.1, "the faster of torch and cuVS")
    rows = load("shape-grid-cpu.jsonl") or []
    line("CPU (2 cores)", [(r.get("vs_faiss"), r) for r in rows], 1.1, "faiss-cpu")
    line("CPU (2 cores)", [(r.get("vs_numpy"), r) for r in rows], 1.0, "numpy")
    if out:
        out = [f"Over the [shape grid]({page}#{anchor('The shape grid')}) (row widths from 32 to 4096, f32, f16 and "
               "bf16, k from 1 to 1000, 1 to 1000 queries, stores of 64 MiB to 4 GiB; the peers in the same run), "
               "mnemo against its fastest peer:", ""] + out
    return out


def results_files():
    """The file table of bench/results/README.md."""
    rows = []
    for x in runs():
        if not os.path.exists(os.path.join(RESULTS, x["file"])):
            continue
        rows.append([f"`{x['file']}`", x.get("area", "-"), x.get("machine", "-"), x.get("date", "-"),
                     f"`{x.get('command', '-')}`" + (f", {x['out']}" if x.get("out") else ""),
                     f"`{x['copy_of']}`" if x.get("copy_of") else "-"])
    return table(["file", "what", "machine", "date", "written by", "lab copy"], rows)


def splice(path, tag, body):
    """`body` between the tag's markers of a file; the file unchanged (and a
    note printed) where the markers are missing."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        text = f.read()
    b, e = f"<!-- {tag}:begin -->", f"<!-- {tag}:end -->"
    if b not in text or e not in text:
        print(f"{os.path.relpath(path, ROOT)}: no {tag} markers, left as it is")
        return text
    return text[:text.index(b) + len(b)] + "\n" + body + "\n" + text[text.index(e):]


def draw():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: the pictures in docs/ are kept as they are")
        return
    for png, fn in PICTURES:
        try:
            if fn(plt, os.path.join(DOCS, png)):
                print(f"drew docs/{png}")
        except Exception as e:  # a picture is a view of a table; the table is the result
            print(f"docs/{png} not redrawn: {e}")
        plt.close("all")


def record(name, command, date):
    r = runs()
    entry = next((x for x in r if x["file"] == name), None)
    if entry is None:
        entry = {"file": name, "area": "-", "machine": "-"}
        r.append(entry)
    entry["date"], entry["command"] = date, command
    with open(RUNS, "w") as f:
        f.write("[\n" + ",\n".join("  " + json.dumps(x) for x in r) + "\n]\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--page", default=PAGE, help="where the page goes (default docs/benchmarks.md)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if anything would change")
    ap.add_argument("--record", nargs=2, action="append", metavar=("FILE", "COMMAND"), default=[])
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--no-pictures", action="store_true")
    a = ap.parse_args(argv)
    for name, command in a.record:
        record(os.path.basename(name), command, a.date)
    if not a.check and not a.no_pictures:
        draw()
    outputs = [(a.page, render_page()),
               (README, splice(README, "how-fast", how_fast())),
               (RESULTS_README, splice(RESULTS_README, "files", results_files()))]
    changed = []
    for path, text in outputs:
        if text is None:
            continue
        old = open(path).read() if os.path.exists(path) else None
        if old != text:
            changed.append(os.path.relpath(path, ROOT))
            if not a.check:
                with open(path, "w") as f:
                    f.write(text)
    if a.check:
        print("would change: " + ", ".join(changed) if changed else "up to date")
        return 1 if changed else 0
    print("wrote " + ", ".join(changed) if changed else "unchanged: the page, README and results README")
    return 0


if __name__ == "__main__":
    sys.exit(main())
