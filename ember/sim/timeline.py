"""`--timeline`: a run's recorded events (trace.py) drawn as a picture, a row per track, for a person who would
rather look than read.  matplotlib is the plot extra, imported only here and only when a timeline is asked for."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from ..backend.dae import Program
from ..ir.diagnostics import EmberError
from ..machine import Machine
from ..signals import sigint_deferred
from .trace import ACCESS, CORE, DRAM, KINDS, QUEUE, WAITS, Events

COLORS = {"run": "#c8d6e5", "queue_full": "#e74c3c", "callback": "#4c72b0", "host": "#8172b2",
          "wait_compute": "#dd8452", "wait_load": "#c44e52", "wait_pop": "#937860", "wait_token": "#8c8c8c",
          "wait_store": "#da8bc3", "wait_mispredict": "#ccb974", "dram_read": "#55a868", "dram_write": "#2e7d32"}


def require_matplotlib() -> None:
    """A one-line error naming the extra, before a run whose timeline could not be drawn."""
    try:
        with sigint_deferred():
            import matplotlib  # noqa: F401
    except ImportError:
        raise EmberError("--timeline needs matplotlib, which is not installed: pip install 'ember[plot]'") from None


def timeline_png(runs: Sequence[tuple[Events, Program]], machine: Machine, title: str) -> bytes:
    """PNG bytes: per core the access unit, the queue's bytes, the callbacks and host ops (mispredictions as
    ticks) and the front end's waits; then each DRAM channel."""
    require_matplotlib()
    with sigint_deferred():  # the backend loads matplotlib's C extensions
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
    channels = runs[0][0].channels
    rows: list[tuple[int, int]] = [(k, t) for k in range(len(runs)) for t in (ACCESS, QUEUE, CORE, WAITS)]
    rows += [(-1, DRAM + c) for c in range(channels)]
    index = {r: n for n, r in enumerate(rows)}
    fig = Figure(figsize=(12, 0.9 + 0.42 * len(rows)))
    ax = fig.add_subplot()
    spans: dict[tuple[int, str], list[tuple[float, float]]] = {}
    ticks: list[tuple[float, int]] = []  # mispredictions
    queues: dict[int, tuple[list[float], list[float]]] = {}
    end = 0.0
    for k, (e, _) in enumerate(runs):
        for kind, track, a, b, v in e.kept():
            b = min(b, e.hi)
            end = max(end, b)
            row = index[(-1, track) if track >= DRAM else (k, track)]
            if kind.shape == "instant":
                ticks.append((a, row))
            elif kind.shape == "counter":
                xs, ys = queues.setdefault(row, ([], []))
                xs.append(a)
                ys.append(v)
            else:
                spans.setdefault((row, kind.name), []).append((a, b - a))
    for (row, name), bars in spans.items():
        colors = [COLORS[name]] if name != "callback" else [COLORS[name], "#7fa3d9"]  # one callback from the next
        ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=colors, linewidth=0)
    peaks: dict[int, float] = {}
    for row, (xs, ys) in queues.items():
        order = sorted(range(len(xs)), key=xs.__getitem__)
        peak = peaks[row] = max(max(ys), 1.0)
        ax.step([xs[i] for i in order], [row + 0.4 - 0.8 * ys[i] / peak for i in order], where="post",
                color="#4c72b0", linewidth=0.8)
    if ticks:
        ax.plot([t for t, _ in ticks], [r for _, r in ticks], "|", color="black", markersize=7)
    names = {ACCESS: "access unit", QUEUE: "queue bytes", CORE: "callbacks, host", WAITS: "front-end waits"}
    capacity = machine.access.queue_total_bytes

    def label(n: int, k: int, t: int) -> str:
        if k < 0:
            return f"DRAM channel {t - DRAM}"
        if t == QUEUE and n in peaks:
            return f"core {k}: queue bytes (to {peaks[n]:,.0f} of {capacity:,})"
        return f"core {k}: {names[t]}"

    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([label(n, k, t) for n, (k, t) in enumerate(rows)], fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    lo = runs[0][0].lo
    ax.set_xlim(lo, max(end, lo + 1))
    ax.set_xlabel(f"simulated cycles ({machine.clock_ghz:g} GHz)")
    ax.set_title(title, fontsize=10)
    shown = sorted({name for _, name in spans}, key=list(COLORS).index)
    handles: list[Any] = [Patch(color=COLORS[n], label=next(k.label for k in KINDS if k.name == n)) for n in shown]
    if ticks:
        handles.append(Line2D([], [], color="black", marker="|", linestyle="", label="mispredicted"))
    if handles:
        ax.legend(handles=handles, fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.16),
                  frameon=False)
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()
