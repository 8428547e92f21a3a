"""`ember-bench --plot`: the two published figures redrawn from our runs, published values as markers, and
where each point's energy goes.

matplotlib is an optional extra, so it is imported only here and only when a plot is asked for. Figures
are drawn on an Agg canvas directly (no pyplot), which needs no display and leaves no global state behind;
they are returned as PNG bytes so the caller can write them atomically.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from ..ir.diagnostics import EmberError
from ..signals import sigint_deferred
from .published import published_hand_percent, published_speedup
from .report import LEVELS, ResultIndex
from .run import VARIANTS, Result
from .sweep import show

COLORS = {"O1": "#4c72b0", "O2": "#55a868", "O3": "#c44e52"}
MARKERS = {"O1": "v", "O2": "s", "O3": "D"}
NAMES = ("speedup.png", "vs_handwritten.png", "energy_breakdown.png")


def require_matplotlib() -> tuple[Any, Any]:
    """(Figure, FigureCanvasAgg), or a one-line error naming the extra that provides them."""
    try:
        with sigint_deferred():  # matplotlib's C extensions load here
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
    except ImportError:
        raise EmberError("--plot needs matplotlib, which is not installed: pip install 'ember[plot]'") from None
    return Figure, FigureCanvasAgg


def needs(name: str) -> str:
    """The variants a figure needs, for the note when one cannot be drawn."""
    return {"speedup.png": "O0 and at least one of O1, O2, O3", "vs_handwritten.png": "O3 and hand",
            "energy_breakdown.png": "any variant"}[name]


def render(results: Sequence[Result], caption: str) -> dict[str, bytes]:
    """PNG bytes by file name, for each figure the run's variants allow (none is an empty dict)."""
    figure, canvas = require_matplotlib()
    idx = ResultIndex(results)
    out: dict[str, bytes] = {}
    levels = [v for v in LEVELS if v in idx.variants]
    if "O0" in idx.variants and levels:
        out["speedup.png"] = _speedup(figure, canvas, idx, levels, caption)
    if {"O3", "hand"} <= idx.variants:
        out["vs_handwritten.png"] = _vs_hand(figure, canvas, idx, caption)
    if idx.workloads:
        out["energy_breakdown.png"] = _energy(figure, canvas, idx, caption)
    return out


def _png(fig: Any, canvas: Any) -> bytes:
    canvas(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    return buf.getvalue()


def _axes(figure: Any, idx: ResultIndex, caption: str) -> tuple[Any, Any, list[int]]:
    fig = figure(figsize=(max(6.0, 0.8 * len(idx.workloads) + 2.0), 4.5))
    ax = fig.add_subplot()
    xs = list(range(len(idx.workloads)))
    ax.set_xticks(xs, idx.workloads, rotation=45 if len(xs) > 4 else 0, ha="right" if len(xs) > 4 else "center")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    fig.text(0.01, -0.02, caption, fontsize=7, ha="left", va="top", wrap=True)
    return fig, ax, xs


def _speedup(figure: Any, canvas: Any, idx: ResultIndex, levels: list[str], caption: str) -> bytes:
    """Stacked as in Fig. 13: O0/O1, then what O2 adds, then what O3 adds; a loss is hatched, drawn downward."""
    fig, ax, xs = _axes(figure, idx, caption)
    bottoms = [0.0] * len(xs)
    for v in levels:
        tops = [r if (r := idx.ratio(w, "O0", v)) is not None else b for w, b in zip(idx.workloads, bottoms)]
        heights = [t - b for t, b in zip(tops, bottoms)]
        label = f"O0/{v}" if v == levels[0] else f"extra of O0/{v}"
        bars = ax.bar(xs, heights, bottom=bottoms, width=0.6, color=COLORS[v], label=label)
        for bar, h in zip(bars, heights):
            if h < 0:  # above the next level's bar, which starts lower, so the loss stays visible
                bar.set_hatch("//")
                bar.set_edgecolor("black")
                bar.set_zorder(2.5)
        bottoms = tops
        pub = [(x, p) for x, w in zip(xs, idx.workloads) if (p := published_speedup(w, v)) is not None]
        if pub:
            ax.scatter([x for x, _ in pub], [p for _, p in pub], marker=MARKERS[v], color="black", zorder=3,
                       s=22, label=f"published O0/{v}")
    ax.set_ylabel("speedup over O0 (×)")
    ax.set_title("Speedup of each optimization level over O0")
    highest = max([*bottoms, *(p for w in idx.workloads for v in levels if (p := published_speedup(w, v)))])
    ax.set_ylim(0, 1.35 * highest)  # headroom for the legend
    ax.legend(fontsize=8, ncols=2, loc="upper left")
    return _png(fig, canvas)


def _vs_hand(figure: Any, canvas: Any, idx: ResultIndex, caption: str) -> bytes:
    """As Fig. 16: 100 x hand cycles / O3 cycles; 100% is parity with the hand-written code."""
    fig, ax, xs = _axes(figure, idx, caption)
    ours = [idx.hand_percent(w) or 0.0 for w in idx.workloads]
    bars = ax.bar(xs, ours, width=0.6, color=COLORS["O3"], label="O3 % of hand-written")
    ax.bar_label(bars, fmt="%.1f", fontsize=7, padding=2)
    pub = [(x, p) for x, w in zip(xs, idx.workloads) if (p := published_hand_percent(w)) is not None]
    if pub:
        ax.scatter([x for x, _ in pub], [p for _, p in pub], marker="D", color="black", zorder=3, s=22,
                   label="published")
    ax.axhline(100.0, color="black", linestyle="--", linewidth=1)
    values = ours + [p for _, p in pub]
    # Fig. 16's axis starts at 60% so differences of a few percent show; go lower only if a bar needs it.
    ax.set_ylim(min(60.0, 10.0 * (min(values) // 10) - 10.0), max(100.0, *values) + 15.0)
    ax.set_ylabel("performance, % of hand-written")
    ax.set_title("Compiled (O3) vs hand-written (100% = parity)")
    ax.legend(fontsize=8, ncols=2, loc="upper left")
    return _png(fig, canvas)


def _energy(figure: Any, canvas: Any, idx: ResultIndex, caption: str) -> bytes:
    """Each point's energy split into its energy.*_j leaves, stacked: where the joules of each variant go."""
    points = [(w, v) for w in idx.workloads for v in VARIANTS if (w, v) in idx.by_key]
    parts = sorted({k for w, v in points for k in idx.by_key[(w, v)].stats if k.startswith("energy.")})
    fig = figure(figsize=(max(6.0, 0.45 * len(points) + 3.0), 4.5))
    ax = fig.add_subplot()
    xs = list(range(len(points)))
    bottoms = [0.0] * len(xs)
    from matplotlib import colormaps  # present: require_matplotlib() has run

    cmap = colormaps["tab20"]
    for n, part in enumerate(parts):
        heights = [1e6 * (idx.stat(w, v, part) or 0.0) for w, v in points]
        ax.bar(xs, heights, bottom=bottoms, width=0.7, label=part[len("energy."):-len("_j")], color=cmap(n % 20))
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    ax.set_xticks(xs, [f"{w} {v}" for w, v in points], rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("energy (µJ)")
    ax.set_title("Where the energy goes")
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(fontsize=7, ncols=2, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.text(0.01, -0.2, caption, fontsize=7, ha="left", va="top", wrap=True)  # below the slanted labels
    return _png(fig, canvas)


def sweep_file_name(metric: str, param: str) -> str:
    """`cycles_vs_dram.bytes_per_cycle.png`: the keys kept readable, anything unsafe in a file name replaced."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{metric}_vs_{param}")
    return f"{safe}.png"


def render_sweep(rows: Sequence[dict[str, Any]], metric: str, param: str, swept: Sequence[str],
                 caption: str) -> bytes:
    """METRIC against PARAM, one line per workload x variant x value of every other swept key, as PNG bytes.

    Numbers go on a numeric axis (log-scaled when they span 8x or more, as power-of-two sweeps do); strings
    such as variants are categories in sweep order. The metric is log-scaled when it spans 10x or more."""
    figure, canvas = require_matplotlib()
    xs = list(dict.fromkeys(r[param] for r in rows))
    numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
    others = [k for k in ("workload", "variant", *swept) if k != param]
    lines: dict[tuple[Any, ...], list[tuple[Any, float]]] = {}
    for r in rows:
        lines.setdefault(tuple(r[k] for k in others), []).append((r[param], r[metric]))
    fig = figure(figsize=(7.0, 4.5))
    ax = fig.add_subplot()
    for ident, pts in lines.items():
        if numeric:
            pts = sorted(pts)
            px = [x for x, _ in pts]
        else:
            px = [xs.index(x) for x, _ in pts]
        label = " ".join(str(v) if k in ("workload", "variant") else f"{k}={show(v)}" for k, v in zip(others, ident))
        ax.plot(px, [y for _, y in pts], marker="o", markersize=4, label=label)
    if numeric:
        low, high = min(xs), max(xs)
        if low > 0 and high >= 8 * low:
            ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(xs), [show(x) for x in sorted(xs)])
        ax.tick_params(axis="x", which="minor", length=0, labelbottom=False)  # only the swept values are marked
    else:
        ax.set_xticks(range(len(xs)), [show(x) for x in xs])
    ys = [r[metric] for r in rows]
    if min(ys) > 0 and max(ys) >= 10 * min(ys):  # e.g. core-only next to O3: a linear axis flattens the DAE lines
        ax.set_yscale("log")
    ax.set_xlabel(param)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} against {param}")
    ax.grid(alpha=0.3)
    ax.set_axisbelow(True)
    if len(lines) <= 24:  # beyond that a legend hides the plot; the CSV names every line
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.text(0.01, -0.02, caption, fontsize=7, ha="left", va="top", wrap=True)
    return _png(fig, canvas)


def render_vs_gpu(points: Sequence[Any]) -> bytes:
    """--vs-gpu: speedup and perf/W over the GPU of each measured workload, one bar per basis (log scale)."""
    figure, canvas = require_matplotlib()
    measured = [p for p in points if p.speedup and not p.model]  # the end-to-end models are not this comparison
    names = list(dict.fromkeys(p.workload for p in measured))
    bases = list(dict.fromkeys(p.basis for p in measured))
    fig = figure(figsize=(max(6.0, 0.9 * len(names) + 2.0), 6.5))
    for row, (title, value) in enumerate((("speedup over the GPU", lambda p: p.speedup),
                                          ("perf/W over the GPU (upper bound where GPU power is unmeasured)",
                                           lambda p: p.perf_per_watt()[0]))):
        ax = fig.add_subplot(2, 1, row + 1)
        width = 0.8 / max(len(bases), 1)
        for k, basis in enumerate(bases):
            by = {p.workload: value(p) for p in measured if p.basis == basis}
            xs = [i + (k - (len(bases) - 1) / 2) * width for i in range(len(names))]
            ax.bar(xs, [by.get(n) or 0.0 for n in names], width=width, label=basis)
        ax.axhline(1.0, color="black", linewidth=1)
        ax.set_yscale("log")
        ax.set_xticks(range(len(names)), names if row else [""] * len(names), rotation=45, ha="right")
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    return _png(fig, canvas)
