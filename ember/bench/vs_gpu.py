"""`ember-bench --vs-gpu`: the DAE servers against the measured GPU, time and energy, on the GPU's own shapes.

The GPU side is only what was measured (`data/gpu_h100_torch.json`, or a file `ember-gpu-bench` writes).
For each suite workload with a measured row, the DAE machine runs that row's shape (its *twin*): the same
table rows, D, pooling, Zipf and batch for an EmbeddingBag; the same SNAP graph and features for an SpMM,
with a batch of destination nodes, compared per edge.  It runs at O3, timing-only, split over the cores of
each basis's server.  GPU energy is measured board power times time where the row has power; otherwise
it is "not measured", and the table shows the upper bound the GPU's 700 W board limit gives, labelled so.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..machine import Machine, load_machine
from .gpu import ModelCase
from .published import GpuBaseline, GpuRow
from .workloads import Workload, suite

BASES = (("iso-bandwidth", "dae-server-iso-bw"), ("iso-power", "dae-server-iso-power"))
GPU_BOARD_W = 700.0  # NVIDIA H100 SXM5 maximum board power (datasheet): the bound for unmeasured GPU energy
MP_TWIN_NODES = 65_536  # destination nodes of a graph twin: enough edges (~2 a node) to keep 64 cores busy
SENSITIVITY = (0.5, 2.0)  # every DAE energy number times these


def twin(w: Workload, row: GpuRow) -> Workload:
    """The DAE run that does the measured GPU case's work (an SpMM twin: the same graph, part of its nodes)."""
    if row.op == "spmm":
        full = suite("paper", [w.name])[0]
        return dataclasses.replace(full, name=f"{w.name}@gpu", bags=min(MP_TWIN_NODES, full.rows), virtual=True)
    assert row.table_rows and row.batch and row.pooling is not None and row.zipf is not None
    return Workload(f"{w.name}@gpu", "bag_sum", 1, row.table_rows, row.dim, row.pooling, row.batch, row.zipf,
                    virtual=True)


@dataclass
class Point:
    """One workload on one basis; the DAE figures are scaled to the GPU case's work (per lookup or edge)."""

    workload: str
    basis: str
    machine: str
    cores: int
    gpu: str  # "measured" or "not measured"
    gpu_kernel: str | None = None  # the measured kernel (the faster one where several were timed)
    model: bool = False  # an end-to-end model: one inference on one core, against the GPU's whole forward pass
    dae_time_s: float | None = None
    gpu_time_s: float | None = None
    dae_energy_j: float | None = None
    dae_power_w: float | None = None
    dae_floor_s: float | None = None  # the run's own roofline bound
    first_core_cycles: float | None = None  # the twin's cores.min_cycles: when its first core halted
    last_core_cycles: float | None = None  # cores.max_cycles: the run's cycles
    gpu_energy_j: float | None = None  # measured: NVML power x time
    gpu_energy_bound_j: float | None = None  # not measured: 700 W x time, an upper bound
    lookups: int | None = None  # the GPU case's lookups (edges), the unit of work both sides are given

    @property
    def speedup(self) -> float | None:
        return self.gpu_time_s / self.dae_time_s if self.gpu_time_s and self.dae_time_s else None

    def perf_per_watt(self, scale: float = 1.0) -> tuple[float | None, bool]:
        """(GPU energy / DAE energy for the same work, whether it is an upper bound), DAE energy x `scale`."""
        if not self.dae_energy_j:
            return None, False
        if self.gpu_energy_j is not None:
            return self.gpu_energy_j / (scale * self.dae_energy_j), False
        if self.gpu_energy_bound_j is not None:
            return self.gpu_energy_bound_j / (scale * self.dae_energy_j), True
        return None, False

    def row(self) -> dict[str, Any]:
        ratio, bound = self.perf_per_watt()
        return {**dataclasses.asdict(self), "speedup": self.speedup,
                "perf_per_watt_ratio": None if bound else ratio, "perf_per_watt_upper_bound": ratio if bound else None,
                **{f"perf_per_watt_energy_x{k:g}": self.perf_per_watt(k)[0] for k in SENSITIVITY}}


def machines(overrides: Sequence[str]) -> list[tuple[str, Machine]]:
    """Each basis with its server preset, the user's --set overrides applied."""
    return [(basis, load_machine(name).with_overrides(overrides)) for basis, name in BASES]


def compare(workloads: Sequence[Workload], gpu: GpuBaseline, overrides: Sequence[str],
            simulate: Callable[[Workload, Machine], dict[str, float]]) -> list[Point]:
    """Every workload on every basis; `simulate` runs a twin (O3, timing-only) and returns its statistics."""
    points = []
    for basis, m in machines(overrides):
        for w in workloads:
            row = gpu.match_time(w)
            p = Point(w.name, basis, m.name, m.cores, "measured" if row else "not measured")
            if row is not None:
                assert row.time_s and row.lookups
                tw = twin(w, row)
                st = simulate(tw, m)
                per = row.lookups / tw.lookups  # the DAE run's figures for the GPU case's work
                p.lookups, p.gpu_time_s, p.gpu_kernel = row.lookups, row.time_s, row.kernel
                p.dae_time_s = m.seconds(st["cycles"]) * per
                p.dae_energy_j, p.dae_power_w = st["energy_j"] * per, st["power_w"]
                p.dae_floor_s = m.seconds(st["roofline.bound_cycles"]) * per
                p.first_core_cycles, p.last_core_cycles = st["cores.min_cycles"], st["cores.max_cycles"]
                _gpu_energy(p, row)
            points.append(p)
    return points


def compare_models(models: Sequence[ModelCase], gpu: GpuBaseline, overrides: Sequence[str],
                   simulate: Callable[[ModelCase, Machine], dict[str, float]]) -> list[Point]:
    """Every end-to-end model on one core of each basis's server (the models' batches are a few samples, and
    the multi-core split is for a batch of bags), against the GPU's time for the same file where measured.
    `simulate` compiles the model at O3 and runs it on its own inputs."""
    points = []
    for basis, m in machines(overrides):
        one = m.with_overrides(["cores=1"])
        for case in models:
            row = gpu.match_model(case.name)
            if row is not None and row.inputs is not None and row.inputs != case.shapes():
                row = None  # timed on other inputs (another batch): not this run's work
            p = Point(f"model {case.name}", basis, m.name, 1, "measured" if row else "not measured", model=True)
            st = simulate(case, one)
            p.dae_time_s, p.dae_floor_s = one.seconds(st["cycles"]), one.seconds(st["roofline.bound_cycles"])
            p.dae_energy_j, p.dae_power_w = st["energy_j"], st["power_w"]
            if row is not None:
                p.gpu_time_s, p.gpu_kernel = row.time_s, row.kernel
                _gpu_energy(p, row)
            points.append(p)
    return points


def _gpu_energy(p: Point, row: GpuRow) -> None:
    """Measured board power x time, or the 700 W bound x time where no power was read."""
    assert row.time_s
    if row.power_w is not None:
        p.gpu_energy_j = row.power_w * row.time_s
    else:
        p.gpu_energy_bound_j = GPU_BOARD_W * row.time_s


def geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def tables(points: Sequence[Point], gpu: GpuBaseline) -> list[Any]:
    """One console table per basis, then its geomeans and the energy model's sensitivity; the end-to-end models
    in a table of their own (one core each, left out of the operators' geomeans)."""
    out = []
    for basis, _ in BASES:
        mine = [p for p in points if p.basis == basis and not p.model]
        if mine:
            t = _table(f"DAE vs GPU, {basis}: {mine[0].machine}, {mine[0].cores} cores", mine)
            timed = [p for p in mine if p.speedup]
            t.add_section()
            t.add_row("geomean", "", "", "", _num(geomean([p.speedup for p in timed if p.speedup]), 1, ".2f", "×"),
                      "", "", "", _ratio_mean(timed, 1.0), f"{len(timed)} of {len(mine)}", style="bold")
            for k in SENSITIVITY:
                t.add_row(f"energy ×{k:g}", "", "", "", "", "", "", "", _ratio_mean(timed, k), "")
            t.caption = (f"GPU: {gpu.device}, torch {gpu.torch}, measured times. Each DAE figure is its twin's "
                         "(the GPU case's shape, O3, timing-only) scaled to the GPU case's lookups or edges. The floor "
                         "is the run's own roofline bound (all cores' DRAM bytes over peak, or the busiest core's "
                         "work); the cores' own stalls keep a run above it. GPU energy: NVML power x time where "
                         "measured; otherwise ≤ 700 W (H100 SXM board power) x time, an upper bound, so perf/W "
                         "is an upper bound too. Rows 'energy "
                         "×k': the geomean perf/W with every DAE energy number times k.")
            out.append(t)
        models = [p for p in points if p.basis == basis and p.model]
        if models:
            t = _table(f"End-to-end models: one inference on one core of {models[0].machine}", models)
            t.caption = ("Each model's own file and inputs, O3, with data, on one core: neither iso-bandwidth nor "
                         "iso-power holds for it. Its energy counts that core's static power and the whole server's "
                         "shared-LLC and memory static power. GPU: the whole forward pass of a model of the same "
                         "name on inputs of the same shapes, where ember-gpu-bench --model timed one; a batch of a "
                         "few samples keeps a GPU waiting on kernel launches, so a speedup here says little about "
                         "serving. Not in the geomeans above.")
            out.append(t)
    return out


def _table(title: str, points: Sequence[Point]) -> Any:
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for name in ("workload", "DAE time (µs)", "DAE floor (µs)", "GPU time (µs)", "speedup", "DAE energy (mJ)",
                 "DAE power (W)", "GPU energy (mJ)", "perf/W, DAE over GPU", "GPU"):
        t.add_column(name, justify="left" if name in ("workload", "GPU") else "right",
                     no_wrap=name in ("workload", "GPU"))
    for p in points:
        ratio, bound = p.perf_per_watt()
        gpu_e = (f"{1e3 * p.gpu_energy_j:.3f}" if p.gpu_energy_j is not None else
                 f"≤ {1e3 * p.gpu_energy_bound_j:.3f}" if p.gpu_energy_bound_j is not None else "—")
        t.add_row(p.workload, _num(p.dae_time_s, 1e6, ".1f"), _num(p.dae_floor_s, 1e6, ".1f"),
                  _num(p.gpu_time_s, 1e6, ".1f"),
                  _num(p.speedup, 1, ".2f", "×"), _num(p.dae_energy_j, 1e3, ".3f"), _num(p.dae_power_w, 1, ".0f"),
                  gpu_e, "—" if ratio is None else f"{'≤ ' if bound else ''}{ratio:.2f}×", p.gpu)
    return t


def _num(v: float | None, scale: float, fmt: str, unit: str = "") -> str:
    return "—" if v is None else f"{v * scale:{fmt}}{unit}"


def _ratio_mean(points: Sequence[Point], scale: float) -> str:
    pairs = [p.perf_per_watt(scale) for p in points]
    values = [r for r, _ in pairs if r]
    g = geomean(values)
    return "—" if g is None else f"{'≤ ' if any(b for _, b in pairs) else ''}{g:.2f}×"
