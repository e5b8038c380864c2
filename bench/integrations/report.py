#!/usr/bin/env python3
"""The framework adapters' section of docs/benchmarks.md, rendered from
bench/results/integrations-cpu.jsonl (bench/integrations/bench.py).

    python3 bench/integrations/report.py            print the section
    python3 bench/integrations/report.py --write    put it into docs/benchmarks.md
                                                    (replacing the section of that title)

section() returns the Markdown, for a page renderer to call. Python 3
standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any, Dict, List

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "bench", "results", "integrations-cpu.jsonl")
PAGE = os.path.join(ROOT, "docs", "benchmarks.md")
TITLE = "Framework adapters (LangChain, LangGraph, LlamaIndex, mem0) on the CPU"
ADAPTERS = ("langchain", "langgraph", "llama_index", "mem0")
FILTERS = ("1% str", "10% str", "1% int")
# The targets.
MAX_OVERHEAD_US, MIN_VS_INMEMORY, MIN_VS_FAISS, MIN_ADDS = 50.0, 20.0, 3.0, 50_000


def load(path: str = RESULTS) -> List[Dict[str, Any]]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _ms(us: float) -> str:
    return f"{us / 1000:.2f}"


def _range(xs: List[float], fmt: str) -> str:
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else fmt.format(lo) + " to " + fmt.format(hi)


def section(rows: List[Dict[str, Any]] = None) -> str:  # type: ignore[assignment]
    rows = load() if rows is None else rows
    big = [r for r in rows if r.get("n") == rows[0]["n"]]
    first = big[0]
    search = {(r["adapter"], r["filter"]): r for r in big if r["op"] == "search"}
    small = {(r["adapter"], r["filter"]): r for r in rows
             if r["op"] == "search" and r.get("n") == 1000}
    adds = {r["adapter"]: r for r in big if r["op"] == "add"}
    loads = [x for r in rows for x in r.get("load", [])]
    others = [r.get("others_cpu_share", 0.0) for r in rows]
    paths_rows = [r for r in big if r["op"] == "search-paths"]
    paths_arg = f" --paths {paths_rows[0]['rounds']}" if paths_rows else ""
    out = [f"## {TITLE}", ""]
    out.append(
        f"Figures from `bench/results/integrations-cpu.jsonl` ({first['cores']}-core "
        f"{first['cpu']} development machine, {first['threads']} threads for mnemo and FAISS, "
        + (f"libmnemo built {first['library_built']} (MD5 {first['library_md5'][:8]}), the tree at "
           f"{first['source']}" if first.get("library_md5") else f"libmnemo of {first['source']}")
        + f", {first['date']}; `make bench-integrations`, that is "
        f"`bench/integrations/bench.py --threads {first['threads']}{paths_arg}`). "
        f"{first['n']:,} memories x {first['dim']} dims f32 (unit rows, cosine), each with a text "
        f"and four metadata fields; k = {first['k']}; query vectors given (embedding excluded); "
        "a filter on one field: a string matching 1% or 10% of the memories, an int matching 1%. "
        "Every contender is called in turn, query by query, in one process. Load average "
        f"{_range(loads, '{:.2f}')} over the run; other processes took "
        f"{_range(others, '{:.1%}')} of the CPU. docs/integrations.md says what each adapter does. "
        "(This section is rendered by `bench/integrations/report.py --write`.)")
    out.append("")
    # One row a framework: each filter's figure in FILTERS' order.
    out.append("| adapter | search, ms (" + " / ".join(FILTERS) + ") | overhead in the call, us "
               "| vs InMemoryVectorStore | vs FAISS (k results) | adds/s |")
    out.append("|---|---|---|---|---|---|")
    for a in ADAPTERS:
        got = [search[(a, f)] for f in FILTERS if (a, f) in search]
        if not got:
            continue
        rate = adds.get(a, {}).get("memories_per_s")
        out.append(f"| {a} | " + " / ".join(_ms(r["median_us"]) for r in got) + " | "
                   + " / ".join(f"{r['overhead_median_us']:.0f}" for r in got) + " | "
                   + " / ".join(f"{r['speedup_vs_inmemory']:.0f}x" for r in got) + " | "
                   + " / ".join(f"{r['speedup_vs_faiss_k_results']:.1f}x" for r in got) + " | "
                   + (f"{rate:,}" if rate is not None else "-") + " |")
    out.append("")
    out.append("Each filter in detail:")
    out.append("")
    out.append("| filter | adapter | call, ms | Store.search in it, ms | overhead in the call, us "
               "| A/B warm, us | A/B cold, us | overhead at 1,000 memories, us "
               "| vs InMemoryVectorStore | vs FAISS (k results) |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for flt in FILTERS:
        for a in ADAPTERS:
            r = search.get((a, flt))
            if r is None:
                continue
            s = small.get((a, flt), {})
            out.append(f"| {flt} | {a} | {_ms(r['median_us'])} | "
                       f"{_ms(r['store_search_in_call_median_us'])} | "
                       f"{r['overhead_median_us']:.0f} | "
                       f"{r.get('overhead_warm_ab_us', float('nan')):.0f} | "
                       f"{r.get('overhead_cold_ab_us', float('nan')):.0f} | "
                       f"{s.get('overhead_median_us', float('nan')):.0f} | "
                       f"{r['speedup_vs_inmemory']:.1f}x | {r['speedup_vs_faiss_k_results']:.2f}x |")
    out.append("")
    out.append(
        "Medians of the calls (200 per filter). \"Overhead in the call\": each call's time minus "
        "the time of the searches made inside it, call by call, every contender and peer called "
        "in turn: Store.search calls (its store's search wrapped), or, where the adapter searches "
        "and reads its hits in one call of the compiled extension, the library's "
        "mnemo_store_search alone, timed in the extension (Store.search's own Python work, "
        "which that call does not do, then counts against the adapter). \"A/B\": the median "
        "adapter call minus "
        "the median Store.search alone with the same query and filter, 100 pairs, both warm (the "
        "adapter called once untimed first, then each right after the other, which first in "
        "turn: the second of two searches after a sweep is the faster) or both cold (each "
        f"after a sweep over {first.get('sweep_mb', 64)} MB, as after other work). "
        "\"At 1,000 memories\": the overhead in the call over a store of 1,000 memories, whose "
        "scan leaves the caches warm. Peers on the same rows and queries: ")
    peers = []
    for flt in FILTERS:
        mem = search.get(("InMemoryVectorStore", flt))
        faiss = [r for r in big if r["op"] == "search" and r["filter"] == flt
                 and r["adapter"].startswith("FAISS")]
        fk = max(faiss, key=lambda r: r.get("fetch_k", 0)) if faiss else None
        part = f"{flt}: `InMemoryVectorStore` {_ms(mem['median_us'])} ms" if mem else f"{flt}:"
        if fk is not None:
            part += (f", FAISS store (IndexFlatIP) {_ms(fk['median_us'])} ms at fetch_k "
                     f"{fk['fetch_k']}, the smallest that returns k results")
        peers.append(part)
    unf = {r["adapter"]: r for r in big if r["op"] == "search" and r["filter"] == "none"}
    out[-1] += "; ".join(peers) + "."
    if unf:
        out[-1] += (" Unfiltered: Store.search "
                    f"{_ms(unf['Store.search (no filter)']['median_us'])} ms, the FAISS store "
                    f"{_ms(unf['FAISS (langchain-community)']['median_us'])} ms.")
    out.append("")
    paths = paths_rows
    if paths:
        out.append(f"The two ways an adapter can search, round by round in turn, each call after a "
                   f"sweep over {paths[0]['sweep_mb']} MB ({paths[0]['rounds']} rounds, `--paths`): "
                   "its search and its hits' keys and payloads in one call of the compiled "
                   "extension (what the adapters do), and Store.search then the records read "
                   "(that call declined), beside Store.search alone and the same search in the library "
                   "alone (mnemo_store_search timed in the extension; the difference is Store.search's "
                   "own Python work).")
        out.append("")
        out.append("| filter | adapter | one call, us | Store.search then the read, us "
                   "| Store.search alone, us | its library search alone, us |")
        out.append("|---|---|---|---|---|---|")
        for flt in FILTERS:
            for r in paths:
                if r["filter"] == flt:
                    out.append(f"| {flt} | {r['adapter']} | {r['one_call_median_us']:.0f} | "
                               f"{r['separate_median_us']:.0f} | {r['store_search_median_us']:.0f} | "
                               f"{r.get('library_search_median_us', float('nan')):.0f} |")
        out.append("")
    out.append("| adds (vectors given, texts and metadata, batches of 10,000) | memories/s |")
    out.append("|---|---|")
    for a in ADAPTERS + ("Store.add", "InMemoryVectorStore", "FAISS (langchain-community)"):
        r = adds.get(a)
        if r is not None:
            note = f" ({r['note']})" if r.get("note") else ""
            out.append(f"| {a}{note} | {r['memories_per_s']:,} |")
    out.append("")
    over = [search[(a, f)]["overhead_median_us"] for a in ADAPTERS for f in FILTERS
            if (a, f) in search]
    vs_mem = [search[(a, f)]["speedup_vs_inmemory"] for a in ADAPTERS for f in FILTERS
              if (a, f) in search]
    vs_faiss = [search[(a, f)]["speedup_vs_faiss_k_results"] for a in ADAPTERS for f in FILTERS
                if (a, f) in search]
    rates = [adds[a]["memories_per_s"] for a in ADAPTERS if a in adds]

    def verdict(ok: bool) -> str:
        return "met" if ok else "missed"

    out.append("Against the issue's targets, at 100,000 memories:")
    out.append("")
    warm = [search[(a, f)].get("overhead_warm_ab_us", float("nan")) for a in ADAPTERS
            for f in FILTERS if (a, f) in search]
    cold = [search[(a, f)].get("overhead_cold_ab_us", float("nan")) for a in ADAPTERS
            for f in FILTERS if (a, f) in search]
    out.append(f"- overhead at most {MAX_OVERHEAD_US:.0f} us over Store.search: "
               f"{verdict(max(over + warm + cold) <= MAX_OVERHEAD_US)} (in the call "
               f"{_range(over, '{:.0f}')} us, A/B warm {_range(warm, '{:.0f}')} us, A/B cold "
               f"{_range(cold, '{:.0f}')} us; at 1,000 memories "
               + ", ".join(f"{a} {_range([small[(a, f)]['overhead_median_us'] for f in FILTERS if (a, f) in small], '{:.0f}')} us"
                           for a in ADAPTERS) + ")")
    out.append(f"- at least {MIN_VS_INMEMORY:.0f}x `InMemoryVectorStore`: "
               f"{verdict(min(vs_mem) >= MIN_VS_INMEMORY)} ({_range(vs_mem, '{:.1f}')}x)")
    faiss_by_filter = ", ".join(
        f"{f}: {_range([search[(a, f)]['speedup_vs_faiss_k_results'] for a in ADAPTERS if (a, f) in search], '{:.2f}')}x"
        for f in FILTERS)
    out.append(f"- at least {MIN_VS_FAISS:.0f}x the FAISS store: "
               f"{verdict(min(vs_faiss) >= MIN_VS_FAISS)} ({faiss_by_filter})")
    out.append(f"- adds at least {MIN_ADDS:,}/s through each adapter: "
               f"{verdict(min(rates) >= MIN_ADDS)} ({_range(rates, '{:,.0f}')}/s)")
    return "\n".join(out)


def write(text: str, page: str = PAGE) -> None:
    """Replaces the section titled TITLE in the page (up to the next "## "
    heading), or appends it."""
    with open(page) as f:
        old = f.read()
    pattern = re.compile(r"^## " + re.escape(TITLE) + r"\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(old):
        new = pattern.sub(lambda _: text + "\n\n", old, count=1)
    else:
        new = old.rstrip("\n") + "\n\n" + text + "\n"
    new = new.rstrip("\n") + "\n"
    with open(page, "w") as f:
        f.write(new)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help=f"put the section into {PAGE}")
    ap.add_argument("--results", default=RESULTS)
    args = ap.parse_args()
    text = section(load(args.results))
    if args.write:
        write(text)
    else:
        sys.stdout.write(text + "\n")


if __name__ == "__main__":
    main()
