"""The summary tables of docs/results.md, computed from the rows `tools/remeasure.sh` keeps in docs/results/.

    python tools/results_summary.py          # prints every table; docs/results.md holds them as printed

Each table is a function of the kept JSON rows only, so a reader can check every figure against the run
(tests/test_results_doc.py checks that the page holds what this prints).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results"
GROUPS = ("RM1", "RM2", "RM3", "MP", "GNN", "KG", "SpAttn")
PUBLISHED_LOCALITY = {"RM1": -40, "RM2": -24, "RM3": -20}  # published -O3 cycles from L0 to L2, %


def rows(name: str) -> list[dict]:
    return json.loads((RESULTS / f"{name}.json").read_text())["rows"]


def index(rs: Iterable[dict]) -> dict[tuple[str, str], dict]:
    return {(r["workload"], r["variant"]): r for r in rs}


def geomean(xs: Iterable[float]) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def group(workload: str) -> str:
    return workload.split("_")[0]


def workloads(idx: dict[tuple[str, str], dict], prefix: str = "") -> list[str]:
    seen: dict[str, None] = {}
    for w, _ in idx:
        if w.startswith(prefix):
            seen[w] = None
    return list(seen)


def span(xs: list[float], fmt: str) -> str:
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"


def suite_table(idx: dict[tuple[str, str], dict]) -> str:
    """Per group: O0/O3, O3 against the core alone, O3's and the expert's share of the speed of light, O3 as
    a share of the expert, and O3's useful bandwidth."""
    out = ["| group | O0/O3 | O3 vs core-only | O3 `sol_fraction` | expert `sol_fraction` | O3 % of expert "
           "| O3 useful bandwidth |", "|---|---:|---:|---:|---:|---:|---:|"]
    every = workloads(idx)
    for g in (*GROUPS, None):
        ws = [w for w in every if g is None or group(w) == g]

        def col(f, ws: list[str] = ws) -> list[float]:
            return [f(w) for w in ws]

        o0o3 = col(lambda w: idx[w, "O0"]["cycles"] / idx[w, "O3"]["cycles"])
        core = col(lambda w: idx[w, "core"]["cycles"] / idx[w, "O3"]["cycles"])
        sol = col(lambda w: 100 * idx[w, "O3"]["sol_fraction"])
        hand = col(lambda w: 100 * idx[w, "hand"]["sol_fraction"])
        pct = col(lambda w: 100 * idx[w, "hand"]["cycles"] / idx[w, "O3"]["cycles"])
        bw = col(lambda w: 100 * idx[w, "O3"]["useful_bandwidth_fraction"])
        if g is None:
            out.append(f"| geomean ({len(ws)}) | {geomean(o0o3):.2f} | {geomean(core):.2f}× | {geomean(sol):.0f}% "
                       f"| {geomean(hand):.0f}% | {geomean(pct):.1f}% | {geomean(bw):.0f}% |")
        else:
            out.append(f"| {g} | {span(o0o3, '{:.2f}')} | {span(core, '{:.2f}')}× | {span(sol, '{:.0f}')}% "
                       f"| {span(hand, '{:.0f}')}% | {span(pct, '{:.1f}')}% | {span(bw, '{:.0f}')}% |")
    return "\n".join(out)


def locality_table(idx: dict[tuple[str, str], dict]) -> str:
    """-O3's and the expert's cycles from L0 to L2 on RM1-RM3, against the published -O3's."""
    out = ["| workload | -O3, L0 to L2 | expert, L0 to L2 | published -O3 |", "|---|---:|---:|---:|"]
    for g, published in PUBLISHED_LOCALITY.items():
        cells = []
        for v in ("O3", "hand"):
            change = idx[f"{g}_L2", v]["cycles"] / idx[f"{g}_L0", v]["cycles"] - 1
            cells.append(f"{100 * change:+.0f}%")
        out.append(f"| {g} | {cells[0]} | {cells[1]} | {published:+d}% |")
    return "\n".join(out)


def memory_table(real: dict[tuple[str, str], dict], ideal: dict[tuple[str, str], dict]) -> str:
    """What the banked DRAM changed: each group's geomean on the default machine and on ideal-dram."""
    out = ["| group | -O3 cycles, real / ideal | O0/O3, real (ideal) | O3 vs core-only, real (ideal) "
           "| O3 `sol_fraction`, real (ideal) |", "|---|---:|---:|---:|---:|"]
    every = workloads(real)
    for g in (*GROUPS, None):
        ws = [w for w in every if g is None or group(w) == g]

        def gm(idx: dict, f, ws: list[str] = ws) -> float:
            return geomean(f(idx, w) for w in ws)

        def o3(i: dict, w: str) -> float:
            return i[w, "O3"]["cycles"]

        slow = geomean(real[w, "O3"]["cycles"] / ideal[w, "O3"]["cycles"] for w in ws)
        parts = []
        for f, fmt in ((lambda i, w: i[w, "O0"]["cycles"] / o3(i, w), "{:.2f}"),
                       (lambda i, w: i[w, "core"]["cycles"] / o3(i, w), "{:.2f}×"),
                       (lambda i, w: 100 * i[w, "O3"]["sol_fraction"], "{:.0f}%")):
            parts.append(f"{fmt.format(gm(real, f))} ({fmt.format(gm(ideal, f))})")
        name = f"all {len(ws)}" if g is None else g
        out.append(f"| {name} | {slow:.2f} | {' | '.join(parts)} |")
    return "\n".join(out)


def main() -> None:
    quick, ideal = index(rows("quick")), index(rows("quick-ideal-dram"))
    paper = index(rows("paper"))
    for title, text in (("quick suite", suite_table(quick)), ("paper suite", suite_table(paper)),
                        ("locality, paper suite", locality_table(paper)),
                        ("real against ideal DRAM, quick suite", memory_table(quick, ideal))):
        print(f"{title}:\n\n{text}\n")


if __name__ == "__main__":
    main()
