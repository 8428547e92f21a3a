"""Reference figures to compare our runs against: the authors' published numbers and a measured GPU.

The published numbers are the authors' artifact figures (gem5, paper scale; docs/workloads.md lists
them). They are stored as data, not recomputed, so a report can show
"ours (published)" side by side. Fig. 13 names the third locality level L3 and Fig. 16 names it L2;
both are the same runs (Zipf 1.05), stored here under our name L2.
The GPU rows are a measured PyTorch baseline (data/gpu_h100_torch.json); a workload is matched to the
row with the same row width D, pooling and Zipf exponent, and has no GPU figure when no such row exists.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from ..files import read_text
from ..ir.diagnostics import EmberError
from .workloads import Workload

SOURCE = "authors' artifact, gem5 at paper scale (Fig. 13, Fig. 16)"

# Fig. 13: speedup of each level over O0 (O0 cycles / On cycles).
SPEEDUP: dict[str, dict[str, float]] = {
    "RM1_L0": {"O1": 3.96, "O2": 5.65, "O3": 6.53},
    "RM1_L1": {"O1": 4.29, "O2": 5.73, "O3": 6.50},
    "RM1_L2": {"O1": 4.36, "O2": 6.07, "O3": 6.79},
    "RM2_L0": {"O1": 5.38, "O2": 9.04, "O3": 11.88},
    "RM2_L1": {"O1": 5.09, "O2": 8.70, "O3": 12.21},
    "RM2_L2": {"O1": 5.40, "O2": 8.77, "O3": 12.26},
    "RM3_L0": {"O1": 6.08, "O2": 13.56, "O3": 21.17},
    "RM3_L1": {"O1": 6.01, "O2": 13.32, "O3": 20.72},
    "RM3_L2": {"O1": 6.15, "O2": 13.42, "O3": 21.14},
    # Graph names as Fig. 13 labels them (Fig. 16 attaches some of the same cycle counts to other graphs).
    "MP_wiki-Talk": {"O1": 4.20, "O2": 6.40, "O3": 7.30},
    "MP_roadNet-CA": {"O1": 4.60, "O2": 7.20, "O3": 8.40},
    "MP_com-Youtube": {"O1": 5.30, "O2": 8.30, "O3": 9.80},
    "MP_web-Google": {"O1": 6.10, "O2": 9.30, "O3": 11.10},
}

# Fig. 16: compiler-generated (O3) performance as a share of hand-written, 100 x hand cycles / O3 cycles.
HAND_PERCENT: dict[str, float] = {
    "MP_wiki-Talk": 98.5, "MP_roadNet-CA": 98.5, "MP_com-Youtube": 99.0, "MP_web-Google": 99.5,
    "GNN_arxiv": 95.2, "GNN_mag": 97.8, "GNN_products": 98.0, "GNN_proteins": 99.5,
    "KG_biokg": 100.0, "KG_wikikg2": 100.0,
    "RM1_L0": 95.4, "RM1_L1": 95.5, "RM1_L2": 95.7,
    "RM2_L0": 96.5, "RM2_L1": 96.6, "RM2_L2": 96.8,
    "RM3_L0": 97.7, "RM3_L1": 97.8, "RM3_L2": 97.9,
    "SpAttn_1": 100.0, "SpAttn_2": 100.0, "SpAttn_4": 100.0, "SpAttn_8": 100.0,
}


# Compression ratios the representations' papers report for their trained embedding tables (float table bytes over
# the form's bytes), shown beside ours by `ember-bench --suite representations`.  Ours come from transforming a
# random float table, not from training in the form, so they are context, not a comparison.
RATIO_SOURCE = ("TT-Rec: Yin et al., MLSys 2021, abstract (arXiv 2101.11714): 112x on Criteo Terabyte, 117x on "
                "Criteo Kaggle; ROBE: Desai et al., MLSys 2022, abstract (arXiv 2108.02191): 1000x on Criteo "
                "Terabyte at AUC >= 0.8025")
PUBLISHED_RATIOS: dict[str, tuple[tuple[str, float], ...]] = {  # form -> (dataset, ratio)
    "TT": (("Criteo Terabyte", 112.0), ("Criteo Kaggle", 117.0)),
    "ROBE": (("Criteo Terabyte", 1000.0),),
}


def published_ratios(form: str) -> tuple[tuple[str, float], ...]:
    """The published compression ratios of a representation (by its name in the suite), none where no paper
    gives one."""
    return PUBLISHED_RATIOS.get(form, ())


def published_speedup(workload: str, variant: str) -> float | None:
    """Published O0/`variant` for `workload`, or None where the paper gives none.  The published -O3 is our
    paper-O3 (the study's four optimizations); our -O3 goes further and has no published counterpart."""
    level = {"paper-O3": "O3", "O3": ""}.get(variant, variant)
    return SPEEDUP.get(workload, {}).get(level)


def published_hand_percent(workload: str) -> float | None:
    """Published O3 performance as a percentage of hand-written, or None where the paper gives none."""
    return HAND_PERCENT.get(workload)


# --- measured GPU baseline -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuRow:
    """One measured GPU case; `dim` is D for embedding_bag and F for spmm."""

    op: str
    dim: int
    pooling: int | None
    zipf: float | None
    graph: str | None
    gbps: float
    frac_copy_bw: float
    time_s: float | None = None  # the kernel's median time
    lookups: int | None = None  # rows gathered (embedding_bag) or edges (spmm nnz) in that time
    batch: int | None = None  # bags (embedding_bag)
    table_rows: int | None = None  # rows of the table (embedding_bag) or nodes of the graph (spmm)
    power_w: float | None = None  # board power while the kernel ran (NVML), where it was measured
    kernel: str = "torch"  # which implementation was timed: PyTorch's operator, or ember-gpu-bench's Triton kernel
    model: str | None = None  # an end-to-end model's name (op "model"): its whole forward pass was timed
    inputs: dict[str, list[int]] | None = None  # the shapes of the model's inputs in that run


@dataclass(frozen=True)
class GpuBaseline:
    """The device, its measured copy bandwidth and every measured case."""

    device: str
    torch: str
    copy_gbps: float
    rows: tuple[GpuRow, ...]

    def match(self, w: Workload) -> GpuRow | None:
        """The row measuring the same operation as `w` (same D, pooling and Zipf exponent), if any; of several
        (one per kernel), the fastest, as the GPU's best effort is the one to beat."""
        if w.kind != "bag_sum":
            return None
        same = [r for r in self.rows if r.op == "embedding_bag" and r.dim == w.dim and r.pooling == w.pooling
                and r.zipf is not None and math.isclose(r.zipf, w.zipf, abs_tol=1e-9)]
        return max(same, key=lambda r: r.gbps, default=None)

    def match_time(self, w: Workload) -> GpuRow | None:
        """The row whose timing `w` can be compared with: the same embedding_bag shape (`match`), or, for a
        message-passing workload, the SpMM over the same SNAP graph with as many features."""
        if w.graph:
            return next((r for r in self.rows if r.op == "spmm" and r.graph == w.graph and r.dim == w.dim
                         and r.time_s and r.lookups), None)
        r = self.match(w)
        return r if r is not None and r.time_s and r.lookups and r.batch and r.table_rows else None

    def match_model(self, name: str) -> GpuRow | None:
        """The row timing the end-to-end model called `name`, if any."""
        return next((r for r in self.rows if r.op == "model" and r.model == name), None)

    def missing_reason(self, w: Workload) -> str:
        """Why `w` has no GPU figure, naming only the parameters no measured row shares, for a footnote."""
        if w.kind != "bag_sum":
            return f"no GPU row for a {w.kind} workload"
        if any(r.op == "embedding_bag" and r.dim == w.dim and r.pooling == w.pooling for r in self.rows):
            return f"no GPU row with D={w.dim}, pooling {w.pooling}, Zipf {w.zipf:g}"
        return f"no GPU row with D={w.dim}, pooling {w.pooling}"


@lru_cache(maxsize=4)
def load_gpu_baseline(path: str | None = None) -> GpuBaseline:
    """Read data/gpu_h100_torch.json, or a file `ember-gpu-bench` wrote, once; a damaged file is a user-facing
    error, not a traceback."""
    where = path or "ember/bench/data/gpu_h100_torch.json"
    try:
        if path is None:
            text = resources.files("ember.bench").joinpath("data", "gpu_h100_torch.json").read_text(encoding="utf-8")
        else:
            text = read_text(path)  # bounded: EMBER_TEXT_BYTES
        data = json.loads(text)
        rows = tuple(_gpu_row(r) for r in data["rows"])
        return GpuBaseline(str(data["device"]), str(data["torch"]), float(data["copy_GBps"]), rows)
    except OSError as e:
        raise EmberError(f"cannot read the GPU baseline: {e.strerror or e}", where) from None
    except (ValueError, KeyError, TypeError) as e:
        raise EmberError(f"malformed GPU baseline ({type(e).__name__}: {e})", where) from None


def _gpu_row(r: dict[str, Any]) -> GpuRow:
    op = str(r["op"])
    def opt(key: str, kind: type) -> Any:
        return None if r.get(key) is None else kind(r[key])

    if op == "model":
        time_s = float(r["time_s"])
        if not time_s > 0:
            raise ValueError(f"model {r['model']}: time_s must be positive")
        shapes = r.get("inputs")
        return GpuRow(op, 0, None, None, None, 0.0, 0.0, time_s, power_w=opt("power_w", float), model=str(r["model"]),
                      inputs=None if shapes is None else {str(k): [int(d) for d in v] for k, v in shapes.items()})
    if op == "embedding_bag":
        return GpuRow(op, int(r["D"]), int(r["pool"]), float(r["zipf"]), None, float(r["GBps"]),
                      float(r["frac_copy_bw"]), opt("time_s", float), opt("lookups", int), opt("batch", int),
                      opt("rows", int), opt("power_w", float), str(r.get("kernel", "torch")))
    return GpuRow(op, int(r["F"]), None, None, r.get("graph"), float(r["GBps"]), float(r["frac_copy_bw"]),
                  opt("time_s", float), opt("nnz", int), None, opt("nodes", int), opt("power_w", float))
