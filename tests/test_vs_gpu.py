"""`ember-bench --vs-gpu`: which workloads meet a GPU measurement, the arithmetic of the comparison, and
the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_tool

from ember.bench.published import GpuBaseline, GpuRow, load_gpu_baseline
from ember.bench.vs_gpu import BASES, GPU_BOARD_W, compare, twin
from ember.bench.workloads import Workload, suite

BAG = GpuRow("embedding_bag", 32, 20, 0.0, None, 1.0, 0.1, time_s=40e-6, lookups=81920, batch=4096,
             table_rows=4_000_000, power_w=500.0)


def test_the_shipped_measurements_meet_the_rm1_and_rm3_shapes_and_the_graphs_only() -> None:
    gpu = load_gpu_baseline()
    have = {w.name for w in suite("paper") if gpu.match_time(w) is not None}
    assert {"RM1_L0", "RM1_L1", "RM1_L2", "RM3_L0", "RM3_L1", "RM3_L2"} <= have
    assert {f"MP_{g}" for g in ("wiki-Talk", "roadNet-CA", "com-Youtube", "web-Google")} <= have
    assert not any(n.startswith(("RM2", "GNN", "KG", "SpAttn")) for n in have)  # no D=64 pooling-40 row, no others


def test_a_twin_is_the_gpu_case_and_a_graph_twin_keeps_the_graph() -> None:
    w = suite("tiny", ["RM1_L0"])[0]
    t = twin(w, BAG)
    assert (t.tables, t.rows, t.dim, t.pooling, t.bags, t.zipf) == (1, 4_000_000, 32, 20, 4096, 0.0)
    assert t.lookups == BAG.lookups and t.virtual
    mp = suite("tiny", ["MP_roadNet-CA"])[0]
    row = load_gpu_baseline().match_time(mp)
    assert row is not None
    g = twin(mp, row)
    assert g.graph == "roadNet-CA" and g.rows == 1_965_206 and g.bags == 65_536  # the whole graph as the table


def fake(cycles: float, energy_j: float, power_w: float) -> object:
    def simulate(w: Workload, m: object) -> dict[str, float]:
        return {"cycles": cycles, "energy_j": energy_j, "power_w": power_w, "roofline.bound_cycles": cycles / 2,
                "cores.min_cycles": 0.9 * cycles, "cores.max_cycles": cycles}
    return simulate


def test_the_comparison_is_worked_by_hand_on_one_measured_row() -> None:
    """A twin of 81,920 lookups taking 20,000 cycles (10 µs at 2 GHz) and 2 mJ, against a GPU case of the same
    lookups taking 40 µs at 500 W (20 mJ): 4x faster, 10x the perf/W."""
    gpu = GpuBaseline("GPU", "t", 1.0, (BAG,))
    w = suite("tiny", ["RM1_L0"])[0]
    points = compare([w, suite("tiny", ["RM2_L0"])[0]], gpu, [], fake(20_000, 2e-3, 200.0))
    assert [(p.workload, p.basis) for p in points] == [(n, b) for b, _ in BASES for n in ("RM1_L0", "RM2_L0")]
    p = points[0]
    assert p.dae_time_s == pytest.approx(10e-6) and p.speedup == pytest.approx(4.0)
    assert p.dae_floor_s == pytest.approx(5e-6)
    assert (p.first_core_cycles, p.last_core_cycles) == (18_000, 20_000)  # the twin's own cycles, not scaled
    assert p.gpu_energy_j == pytest.approx(20e-3) and p.perf_per_watt() == (pytest.approx(10.0), False)
    assert p.perf_per_watt(2.0)[0] == pytest.approx(5.0)
    rm2 = points[1]
    assert rm2.gpu == "not measured" and rm2.speedup is None and rm2.perf_per_watt() == (None, False)


def test_without_measured_power_perf_per_watt_is_an_upper_bound() -> None:
    row = GpuRow(**{**BAG.__dict__, "power_w": None})
    p = compare([suite("tiny", ["RM1_L0"])[0]], GpuBaseline("GPU", "t", 1.0, (row,)), [], fake(20_000, 2e-3, 1.0))[0]
    assert p.gpu_energy_j is None and p.gpu_energy_bound_j == pytest.approx(GPU_BOARD_W * 40e-6)
    ratio, bound = p.perf_per_watt()
    assert bound and ratio == pytest.approx(GPU_BOARD_W * 40e-6 / 2e-3)
    assert p.row()["perf_per_watt_ratio"] is None and p.row()["perf_per_watt_upper_bound"] == ratio


def test_the_command_prints_both_bases_and_writes_rows(tmp_path: Path) -> None:
    out = tmp_path / "vs.json"
    res = run_tool("bench", "--suite", "quick", "--only", "RM1_L0,RM2_L0", "--vs-gpu", "--timing-only",
                   "--json", str(out))
    assert res.returncode == 0, res.stderr.decode()
    text = res.stdout.decode()
    assert "iso-bandwidth: dae-server-iso-bw, 64 cores" in text and "iso-power: dae-server-iso-power, 91 cores" in text
    assert "not measured" in text and "energy ×0.5" in text
    rows = json.loads(out.read_text())["rows"]
    rm1 = [r for r in rows if r["workload"] == "RM1_L0"]
    assert len(rm1) == 2 and all(r["speedup"] > 0 and r["perf_per_watt_upper_bound"] > 0 for r in rm1)
    iso_bw, iso_power = rm1
    assert iso_power["cores"] > iso_bw["cores"]
    assert iso_bw["gpu_time_s"] == iso_power["gpu_time_s"] == pytest.approx(3.06e-5, rel=0.01)


@pytest.mark.parametrize("args, message", [
    (("--vs-gpu",), "needs --timing-only"),
    (("--vs-gpu", "--timing-only", "--machine", "small"), "leave out --machine"),
    (("--vs-gpu", "--timing-only", "--speed"), "a run of its own"),
])
def test_vs_gpu_misuse_is_one_line(args: tuple[str, ...], message: str) -> None:
    res = run_tool("bench", "--suite", "tiny", "--only", "RM1_L0", *args)
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1 and message in err, err
