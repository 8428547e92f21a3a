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


def workloads(idx: dict[tuple[str, str], dict]) -> list[str]:
    """The workloads of the rows, in the run's order."""
    return list(dict.fromkeys(w for w, _ in idx))


def per_group(idx: dict[tuple[str, str], dict]) -> list[tuple[str | None, list[str]]]:
    """Each group with its workloads, then None with all of them (the geomean row)."""
    every = workloads(idx)
    return [(g, [w for w in every if g is None or group(w) == g]) for g in (*GROUPS, None)]


def span(xs: list[float], fmt: str) -> str:
    lo, hi = min(xs), max(xs)
    return fmt.format(lo) if fmt.format(lo) == fmt.format(hi) else f"{fmt.format(lo)}–{fmt.format(hi)}"


def suite_table(idx: dict[tuple[str, str], dict]) -> str:
    """Per group: O0/O3, O3 against the core alone, O3's and the expert's share of the speed of light, O3 as
    a share of the expert, and O3's useful bandwidth."""
    out = ["| group | O0/O3 | O3 vs core-only | O3 `sol_fraction` | expert `sol_fraction` | O3 % of expert "
           "| O3 useful bandwidth |", "|---|---:|---:|---:|---:|---:|---:|"]
    for g, ws in per_group(idx):

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
    for g, ws in per_group(real):

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


FORMS = ("float32", "int8", "int4", "TT", "ROBE", "DHE")


def representations_table(idx: dict[tuple[str, str], dict], model: str = "RM3") -> str:
    """One model's table in every form: its bytes and error, and each variant's cycles."""
    out = ["| form | param bytes | ratio | error max / RMS | O0 | O3 | O3 `sol_fraction` | expert "
           "| expert `sol_fraction` | core-only |", "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for form in FORMS:
        w = f"{model}_{form}"
        o3, hand = idx[w, "O3"], idx[w, "hand"]
        err = "—" if not o3.get("error_rms") else f"{o3['error_max']:.3g} / {o3['error_rms']:.3g}"
        ratio = f"{o3['ratio']:,.0f}" if o3["ratio"] >= 100 else f"{o3['ratio']:.3g}"
        out.append(f"| {form} | {o3['param_bytes']:,} | {ratio}× | {err} | {idx[w, 'O0']['cycles']:,.0f} "
                   f"| {o3['cycles']:,.0f} | {o3['sol_fraction']:.3g} | {hand['cycles']:,.0f} "
                   f"| {hand['sol_fraction']:.3g} | {idx[w, 'core']['cycles']:,.0f} |")
    return "\n".join(out)


def experts_table(idx: dict[tuple[str, str], dict]) -> str:
    """Per form, over RM1-RM3: how much faster the expert's kernel is than -O3, and the shares of the speed
    of light."""
    out = ["| form | expert over -O3, RM1 / RM2 / RM3 | O3 `sol_fraction` | expert `sol_fraction` "
           "| expert over the float table's -O3 |", "|---|---:|---:|---:|---:|"]
    for form in FORMS:
        ws = [f"{m}_{form}" for m in ("RM1", "RM2", "RM3")]
        speed = " / ".join(f"{idx[w, 'O3']['cycles'] / idx[w, 'hand']['cycles']:.2f}×" for w in ws)
        o3 = [100 * idx[w, "O3"]["sol_fraction"] for w in ws]
        hand = [100 * idx[w, "hand"]["sol_fraction"] for w in ws]
        slower = [idx[w, "hand"]["cycles"] / idx[f"{w.split('_')[0]}_float32", "O3"]["cycles"] for w in ws]
        out.append(f"| {form} | {speed} | {span(o3, '{:.1f}')}% | {span(hand, '{:.1f}')}% "
                   f"| {span(slower, '{:.2f}')}× the cycles |")
    return "\n".join(out)


SENSITIVITY = (("default machine", "quick"),
               ("mispredict penalty 7 (½×)", "set-mispredict-7"), ("mispredict penalty 28 (2×)", "set-mispredict-28"),
               ("FP latency 2 (½×)", "set-fp-latency-2"), ("FP latency 8 (2×)", "set-fp-latency-8"),
               ("issue width 3 (about ½×)", "set-issue-3"), ("issue width 10 (2×)", "set-issue-10"),
               ("2 DRAM sub-channels (½× bandwidth)", "set-dram-2ch"),
               ("8 DRAM sub-channels (2× bandwidth)", "set-dram-8ch"))


def sensitivity_table() -> str:
    """The quick suite's geomeans with one assumption of the default machine halved or doubled."""
    out = ["| machine | O0/O1 | O0/O2 | O0/paper-O3 | O0/O3 | O3 vs core-only | O3 `sol_fraction` "
           "| RM3 -O3, L0 to L2 |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, name in SENSITIVITY:
        idx = index(rows(name))
        ws = workloads(idx)

        def gm(v: str, base: str = "O0", idx: dict = idx, ws: list[str] = ws) -> float:
            return geomean(idx[w, base]["cycles"] / idx[w, v]["cycles"] for w in ws)

        sol = geomean(100 * idx[w, "O3"]["sol_fraction"] for w in ws)
        rm3 = idx["RM3_L2", "O3"]["cycles"] / idx["RM3_L0", "O3"]["cycles"] - 1
        out.append(f"| {label} | {gm('O1'):.2f} | {gm('O2'):.2f} | {gm('paper-O3'):.2f} | {gm('O3'):.2f} "
                   f"| {gm('O3', 'core'):.2f}× | {sol:.0f}% | {100 * rm3:+.0f}% |")
    return "\n".join(out)


def main() -> None:
    quick, ideal = index(rows("quick")), index(rows("quick-ideal-dram"))
    paper = index(rows("paper"))
    for title, text in (("quick suite", suite_table(quick)), ("paper suite", suite_table(paper)),
                        ("locality, paper suite", locality_table(paper)),
                        ("real against ideal DRAM, quick suite", memory_table(quick, ideal)),
                        ("one assumption at a time, quick suite", sensitivity_table())):
        print(f"{title}:\n\n{text}\n")
    reps = index(rows("representations"))
    for title, text in (("representations, RM3", representations_table(reps)),
                        ("the experts' representation kernels", experts_table(reps))):
        print(f"{title}:\n\n{text}\n")


if __name__ == "__main__":
    main()
