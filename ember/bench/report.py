"""Turn benchmark `Result`s into flat rows (JSON, CSV) and the console tables of `ember-bench`.

Every table puts our number next to the published one ("ours (published)") so a reader sees at once
whether the trend matches; published figures are at paper scale on gem5, ours at the chosen scale and
machine, which the caption states. A table or column appears only when the variants it needs were run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from rich.table import Table

from ..machine import Machine
from .forms import DHE_HASHES, DHE_HIDDEN, FormWorkload
from .published import (
    RATIO_SOURCE,
    SOURCE,
    load_gpu_baseline,
    published_hand_percent,
    published_ratios,
    published_speedup,
)
from .run import HOST_TIME, VARIANTS, Result
from .workloads import Workload

LEVELS = ("O1", "O2", "paper-O3", "O3")
DASH = "—"


class ResultIndex:
    """Results by (workload, variant), with workloads in the order they were run."""

    def __init__(self, results: Iterable[Result]) -> None:
        self.by_key: dict[tuple[str, str], Result] = {}
        self.workloads: list[str] = []
        self.variants: set[str] = set()
        for r in results:
            if r.workload not in self.workloads:
                self.workloads.append(r.workload)
            self.variants.add(r.variant)
            self.by_key[(r.workload, r.variant)] = r

    def stat(self, workload: str, variant: str, key: str) -> float | None:
        r = self.by_key.get((workload, variant))
        return None if r is None else r.stats.get(key)

    def cycles(self, workload: str, variant: str) -> float | None:
        return self.stat(workload, variant, "cycles")

    def ratio(self, workload: str, num: str, den: str) -> float | None:
        """cycles(num) / cycles(den): the speedup of `den` over `num`."""
        a, b = self.cycles(workload, num), self.cycles(workload, den)
        return a / b if a is not None and b else None

    def hand_percent(self, workload: str, variant: str = "O3") -> float | None:
        """Performance of `variant` as a percentage of hand-written (100 = parity, as in Fig. 16)."""
        r = self.ratio(workload, "hand", variant)
        return None if r is None else 100.0 * r


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the positive values; None when there are none."""
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def caption(machine: Machine, overrides: Sequence[str], scale: str | None = None) -> str:
    """Which machine (and suite) the numbers are for; bandwidth fractions depend on its DRAM bandwidth."""
    sets = f"--set {' '.join(overrides)}" if overrides else "no --set overrides"
    suite = f"suite '{scale}' on " if scale else ""
    d = machine.dram
    dram = "ideal DRAM" if d.device == "ideal" else f"{d.channels} x {d.device}"
    return (f"{suite}machine '{machine.name}' ({machine.clock_ghz:g} GHz, {dram}, "
            f"{machine.dram_bytes_per_cycle:.4g} B/cycle peak), {sets}.")


# --- rows for JSON and CSV -----------------------------------------------------------------------------------


def rows(results: Sequence[Result], workloads: Sequence[Workload], machine: Machine,
         overrides: Sequence[str]) -> list[dict[str, Any]]:
    """One flat row per workload x variant: the workload's shape, derived ratios, then every statistic."""
    idx = ResultIndex(results)
    shapes = {w.name: w for w in workloads}
    gpu = load_gpu_baseline()
    out: list[dict[str, Any]] = []
    for r in results:
        w = shapes.get(r.workload)
        match = gpu.match(w) if w is not None else None
        row: dict[str, Any] = {"workload": r.workload, "variant": r.variant, "machine": machine.name,
                               "overrides": " ".join(overrides)}
        if w is not None:
            row.update(tables=w.tables, table_rows=w.rows, dim=w.dim, pooling=w.pooling, bags=w.bags, zipf=w.zipf,
                       lookups=w.lookups, useful_bytes=w.useful_bytes())
        row["speedup_vs_O0"] = idx.ratio(r.workload, "O0", r.variant)
        row["published_speedup_vs_O0"] = published_speedup(r.workload, r.variant)
        row["percent_of_hand"] = idx.hand_percent(r.workload, r.variant)
        row["published_percent_of_hand"] = published_hand_percent(r.workload) if r.variant == "O3" else None
        row["gpu_frac_copy_bw"] = match.frac_copy_bw if match else None
        if isinstance(w, FormWorkload):
            row.update(form_fields(w))
        row.update(r.stats)
        out.append(row)
    return out


def csv_fields(table: Sequence[dict[str, Any]]) -> list[str]:
    """Union of the rows' keys in first-seen order, so every row fits one header."""
    fields: dict[str, None] = {}
    for row in table:
        fields.update(dict.fromkeys(row))
    return list(fields)


# --- console tables ------------------------------------------------------------------------------------------


def _x(v: float | None) -> str:
    return DASH if v is None else f"{v:.2f}×"


def _pair(ours: float | None, published: float | None, fmt: str = "{:.2f}") -> str:
    a = DASH if ours is None else fmt.format(ours)
    b = DASH if published is None else fmt.format(published)
    return f"{a} ({b})"


def _pct(v: float | None) -> str:
    return DASH if v is None else f"{v:.1f}%"


def frac_cell(v: float | None) -> str:
    return DASH if v is None else f"{100.0 * v:.1f}%"


def cycles_cell(v: float | None) -> str:
    return DASH if v is None else f"{round(v):,}"


def _table(title: str) -> Table:
    t = Table(title=title, caption_justify="left")
    t.add_column("workload")
    return t


def _all_or_none(values: list[float | None]) -> float | None:
    """Geomean only when every workload has a value, so ours and published cover the same set."""
    return geomean(values) if values and all(v is not None for v in values) else None


def speedup_table(idx: ResultIndex) -> Table | None:
    """Fig. 13: O0 cycles / On cycles per level that was run."""
    levels = [v for v in LEVELS if v in idx.variants]
    if "O0" not in idx.variants or not levels:
        return None
    t = _table("Speedup over O0: ours (published)")
    t.add_column("O0 cycles", justify="right")
    for v in levels:
        t.add_column(f"O0/{v}", justify="right")
    for w in idx.workloads:
        t.add_row(w, cycles_cell(idx.cycles(w, "O0")),
                  *(_pair(idx.ratio(w, "O0", v), published_speedup(w, v)) for v in levels))
    t.add_section()
    t.add_row("geomean", "", *(_pair(geomean(idx.ratio(w, "O0", v) for w in idx.workloads),
                                     _all_or_none([published_speedup(w, v) for w in idx.workloads]))
                               for v in levels), style="bold")
    return t


def hand_table(idx: ResultIndex) -> Table | None:
    """Fig. 16: O3 (and the published ladder's O3) as a share of the expert's kernel, and how close the
    expert gets to the speed of light, naming the bound that stops it."""
    if "hand" not in idx.variants:
        return None
    levels = [v for v in ("O3", "paper-O3") if v in idx.variants]
    t = _table("Compiled vs the expert's hand-written kernel")
    t.add_column("hand cycles", justify="right")
    for v in levels:
        t.add_column(f"{v} % of hand" + (": ours (published)" if v == "O3" else ""), justify="right")
    t.add_column("hand sol_fraction (bound)", justify="right")

    def pct(w: str | None, v: str) -> str:
        ours = idx.hand_percent(w, v) if w else geomean(idx.hand_percent(x, v) for x in idx.workloads)
        if v != "O3":
            return _pct(ours)
        pub = published_hand_percent(w) if w else _all_or_none([published_hand_percent(x) for x in idx.workloads])
        return _pair(ours, pub, "{:.1f}%")

    for w in idx.workloads:
        t.add_row(w, cycles_cell(idx.cycles(w, "hand")), *(pct(w, v) for v in levels),
                  f"{frac_cell(idx.stat(w, 'hand', 'sol_fraction'))} ({limiting_bound(idx, w, 'hand') or DASH})")
    t.add_section()
    t.add_row("geomean", "", *(pct(None, v) for v in levels),
              frac_cell(geomean(idx.stat(w, "hand", "sol_fraction") for w in idx.workloads)), style="bold")
    return t


def core_table(idx: ResultIndex) -> Table | None:
    """What decoupling buys: the same operation compiled for the core alone vs for the DAE machine at O3."""
    if "core" not in idx.variants:
        return None
    o3 = "O3" in idx.variants
    t = _table("DAE (O3) vs core only")
    t.add_column("core cycles", justify="right")
    if o3:
        t.add_column("O3 cycles", justify="right")
        t.add_column("speedup", justify="right")
    for w in idx.workloads:
        extra = [cycles_cell(idx.cycles(w, "O3")), _x(idx.ratio(w, "core", "O3"))] if o3 else []
        t.add_row(w, cycles_cell(idx.cycles(w, "core")), *extra)
    if o3:
        t.add_section()
        t.add_row("geomean", "", "", _x(geomean(idx.ratio(w, "core", "O3") for w in idx.workloads)), style="bold")
    return t


def bandwidth_table(idx: ResultIndex, workloads: Sequence[Workload]) -> Table | None:
    """Useful bytes per cycle as a share of DRAM peak for every variant, next to the GPU's share of its copy
    bandwidth."""
    ours = [v for v in VARIANTS if v in idx.variants]
    if not ours:
        return None
    gpu = load_gpu_baseline()
    shapes = {w.name: w for w in workloads}
    t = _table("Useful bandwidth / DRAM peak")
    for v in ours:
        t.add_column(v, justify="right")
    t.add_column("GPU", justify="right")
    missing: dict[str, list[str]] = {}  # reason -> workloads, so RM2_L0..L2 share one footnote
    for name in idx.workloads:
        w = shapes.get(name)
        match = gpu.match(w) if w is not None else None
        if w is not None and match is None:
            missing.setdefault(gpu.missing_reason(w), []).append(name)
        t.add_row(name, *(frac_cell(idx.stat(name, v, "useful_bandwidth_fraction")) for v in ours),
                  frac_cell(match.frac_copy_bw if match else None))
    notes = [f"GPU: the share of its {gpu.copy_gbps:,.0f} GB/s copy bandwidth; {gpu.device}, PyTorch {gpu.torch}, "
             "same D, pooling and Zipf. "
             "Useful bytes = rows gathered + indices + offsets + output, each once."]
    notes.extend(f"{DASH}: {reason} ({', '.join(names)})." for reason, names in missing.items())
    t.caption = " ".join(notes)
    return t


def limiting_bound(idx: ResultIndex, workload: str, variant: str) -> str | None:
    """Which speed-of-light bound is the largest for a point: dram or execute."""
    values = {k: idx.stat(workload, variant, f"sol.{k}_cycles") for k in ("dram", "execute")}
    if any(v is None for v in values.values()):
        return None
    return max(values, key=lambda k: values[k] or 0.0)


def sol_table(idx: ResultIndex) -> Table:
    """Every point against the machine's speed of light, a bound that does not depend on the code."""
    t = _table("Share of the speed-of-light bound (d: DRAM sets it, e: execute)")
    variants = [v for v in VARIANTS if v in idx.variants]
    for v in variants:
        t.add_column(v, justify="right")
    for w in idx.workloads:
        t.add_row(w, *(f"{frac_cell(idx.stat(w, v, 'sol_fraction'))} {(limiting_bound(idx, w, v) or DASH)[0]}"
                       for v in variants))
    t.add_section()
    t.add_row("geomean", *(frac_cell(geomean(idx.stat(w, v, "sol_fraction") for w in idx.workloads))
                           for v in variants), style="bold")
    t.caption = ("sol_fraction = the larger of: compulsory bytes / DRAM peak, fewest vector ops, row reads or "
                 "output stores / their pipes; over cycles.")
    return t


def energy_tables(idx: ResultIndex, workloads: Sequence[Workload]) -> list[Table]:
    """Energy per lookup, and average power, of every point (sim/energy.py prices the run's counters)."""
    lookups = {w.name: w.lookups for w in workloads}
    variants = [v for v in VARIANTS if v in idx.variants]
    energy, power = _table("Energy per lookup (nJ)"), _table("Average power (W)")
    for v in variants:
        energy.add_column(v, justify="right")
        power.add_column(v, justify="right")

    def per_lookup(w: str, v: str) -> str:
        e, n = idx.stat(w, v, "energy_j"), lookups.get(w)
        return DASH if e is None or not n else f"{1e9 * e / n:,.2f}"

    def watts(w: str, v: str) -> str:
        p = idx.stat(w, v, "power_w")
        return DASH if p is None else f"{p:.1f}"

    for w in idx.workloads:
        energy.add_row(w, *(per_lookup(w, v) for v in variants))
        power.add_row(w, *(watts(w, v) for v in variants))
    energy.caption = "energy_j over the workload's lookups."
    power.caption = ("energy_j / simulated time. Both from the machine's energy numbers, most of them assumptions "
                     "(docs/architecture.md, Energy).")
    return [energy, power]


def form_fields(w: FormWorkload) -> dict[str, Any]:
    """A representation's row fields: its params' bytes, how many times smaller than the float table, the
    transform's reconstruction error (None where not measured: DHE, the float table, timing-only), and the
    published ratios as `dataset=ratio` pairs."""
    f = w.figures
    return {"form": w.form, "param_bytes": w.param_bytes, "ratio": w.table_bytes * w.tables / w.param_bytes,
            "error_max": f.error_max if f else None, "error_rms": f.error_rms if f else None,
            "published_ratio": " ".join(f"{d.replace(' ', '_')}={r:g}" for d, r in published_ratios(w.form)) or None}


def representations_tables(results: Sequence[Result], workloads: Sequence[Workload]) -> list[Table]:
    """`--suite representations`: each form's bytes and ratio beside the published ones and its error; cycles at
    every variant run; and every point's share of the speed of light (`sol_table`)."""
    idx = ResultIndex(results)
    forms = {w.name: w for w in workloads if isinstance(w, FormWorkload)}
    names = [n for n in idx.workloads if n in forms]
    t = _table("Representations: bytes and reconstruction error")
    for col in ("param bytes", "ratio: ours (published)", "error max / RMS", "O3 / float O3 cycles"):
        t.add_column(col, justify="right")
    for name in names:
        fields = form_fields(forms[name])
        published = " / ".join(f"{r:g}×" for _, r in published_ratios(forms[name].form)) or DASH
        error = DASH if fields["error_max"] is None else f"{fields['error_max']:.3g} / {fields['error_rms']:.3g}"
        t.add_row(name, f"{fields['param_bytes']:,}", f"{fields['ratio']:,.1f}× ({published})", error,
                  _x(_over(idx, name, name.rsplit("_", 1)[0] + "_float32")))
    t.caption = (f"ratio = float table bytes / the form's param bytes. In parentheses, published ratios (of tables "
                 f"trained in that form; ours transform a random float table): {RATIO_SOURCE}. Error: the "
                 f"transform's own figures over the whole table; {DASH} for the float table, without table data, and "
                 f"for DHE (untrained MLP: k = {DHE_HASHES} hashes, a hidden layer of {DHE_HIDDEN} with ReLU, then D).")
    variants = [v for v in VARIANTS if v in idx.variants]
    c = _table("Representations: cycles")
    for v in variants:
        c.add_column(v, justify="right")
    for name in names:
        c.add_row(name, *(cycles_cell(idx.cycles(name, v)) for v in variants))
    c.caption = f"hand: an expert's kernel, where one exists for the form ({DASH}: none)."
    return [t, c, sol_table(idx)]


def _over(idx: ResultIndex, name: str, base: str) -> float | None:
    """O3 cycles of `name` over O3 cycles of the float table of the same model."""
    a, b = idx.cycles(name, "O3"), idx.cycles(base, "O3")
    return a / b if a is not None and b else None


def tables(results: Sequence[Result], workloads: Sequence[Workload]) -> list[Table]:
    """Every table the run's variants allow, in a fixed order; `caption` says what they were run on."""
    idx = ResultIndex(results)
    built = [speedup_table(idx), hand_table(idx), core_table(idx), sol_table(idx), bandwidth_table(idx, workloads),
             *energy_tables(idx, workloads)]
    return [t for t in built if t is not None]


def _speed(v: float | None) -> str:
    """A rate per host second in millions, or thousands below a million, so columns stay readable."""
    if v is None:
        return DASH
    return f"{v / 1e6:,.2f} M" if v >= 1e6 else f"{v / 1e3:,.1f} k" if v >= 1e3 else f"{v:,.0f}"


def _seconds(v: float | None) -> str:
    return DASH if v is None else f"{v:,.3f}"


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far (ru_maxrss counts KiB on Linux, bytes on macOS)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def memory_note() -> str:
    return f"Peak resident memory of this process: {peak_rss_bytes() / 2**20:,.0f} MiB."


HOST_NOTE = "Host time is the simulations' own: not generating data, compiling the workload or checking outputs."


def speed_table(results: Sequence[Result], engine: str, timing_only: bool) -> Table:
    """How fast the simulator ran each workload x variant (`--speed`): host seconds and rates per host second."""
    mode = ", timing only" if timing_only else ", with data"
    t = _table(f"Simulation speed ({engine} engine{mode})")
    t.add_column("variant")
    for col in ("host s", "lookups / host s", "sim cycles / host s"):
        t.add_column(col, justify="right")
    for r in results:
        s = r.stats
        t.add_row(r.workload, r.variant, _seconds(s.get("host_seconds")), _speed(s.get("lookups_per_host_second")),
                  _speed(s.get("sim_cycles_per_host_second")))
    total = sum(r.stats.get("host_seconds", 0.0) for r in results)
    t.add_section()
    t.add_row("total", "", _seconds(total), "", "", style="bold")
    t.caption = f"{HOST_NOTE} {memory_note()}"
    return t


def compare_table(pairs: Sequence[tuple[Result, Result]]) -> Table:
    """`--compare-engines`: the same points on the reference and the fast engine, which agreed on every
    simulated statistic; what is left to compare is how long each took."""
    t = _table("Engines: reference vs fast (identical statistics)")
    t.add_column("variant")
    for col in ("reference host s", "fast host s", "speedup", "reference lookups / host s",
                "fast lookups / host s"):
        t.add_column(col, justify="right")
    for ref, fast in pairs:
        a, b = ref.stats, fast.stats
        t.add_row(ref.workload, ref.variant, _seconds(a["host_seconds"]), _seconds(b["host_seconds"]),
                  _x(engine_speedup(ref, fast)), _speed(a["lookups_per_host_second"]),
                  _speed(b["lookups_per_host_second"]))
    t.add_section()
    t.add_row("geomean", "", "", "", _x(geomean(engine_speedup(r, f) for r, f in pairs)), "", "", style="bold")
    t.caption = HOST_NOTE
    return t


def engine_speedup(ref: Result, fast: Result) -> float | None:
    """Reference host seconds / fast host seconds."""
    a, b = ref.stats.get("host_seconds"), fast.stats.get("host_seconds")
    return a / b if a and b else None


def compare_rows(pairs: Sequence[tuple[Result, Result]], machine: Machine,
                 overrides: Sequence[str]) -> list[dict[str, Any]]:
    """`--compare-engines` rows: the simulated statistics once (they agree), each engine's host-time figures."""
    out: list[dict[str, Any]] = []
    for ref, fast in pairs:
        row: dict[str, Any] = {"workload": ref.workload, "variant": ref.variant, "machine": machine.name,
                               "overrides": " ".join(overrides)}
        row.update((k, v) for k, v in fast.stats.items() if k not in HOST_TIME)
        for name, r in (("reference", ref), ("fast", fast)):
            row.update((f"{name}.{k}", r.stats[k]) for k in HOST_TIME)
        row["engine_speedup"] = engine_speedup(ref, fast)
        out.append(row)
    return out


def published_note(where: str = "In parentheses") -> str:
    """Where the bracketed numbers come from, so nobody compares them digit for digit."""
    return f"{where}: published, {SOURCE}."
