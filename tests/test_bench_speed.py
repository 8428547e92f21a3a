"""ember-bench at scale: timing-only runs, the engine comparison, the speed figures, and the suites' shapes
(paper-scale graphs as one mini-batch, the huge table that never holds data, tiny and quick as published)."""

from __future__ import annotations

import json
import subprocess
import tracemalloc
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import run_tool

from ember.bench import run as bench_run
from ember.bench import sweep as sw
from ember.bench.run import HOST_TIME, STATS, Result, first_difference, run
from ember.bench.suites import SUITES, suite
from ember.bench.workloads import GNN, GRAPHS, MP_BATCH
from ember.cli import bench as bench_cli
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine

MACHINE = load_machine("default")


def bench(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run_tool("bench", *args)


def simulated(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in stats.items() if k not in HOST_TIME}


# --- the suites ----------------------------------------------------------------------------------------------

# (name, tables, rows, dim, pooling, bags, lookups): docs/results.md's figures are for exactly these.
QUICK = [
    ("RM1_L0", 1, 20000, 32, 20, 16, 320), ("RM1_L1", 1, 20000, 32, 20, 16, 320),
    ("RM1_L2", 1, 20000, 32, 20, 16, 320), ("RM2_L0", 1, 20000, 64, 40, 16, 640),
    ("RM2_L1", 1, 20000, 64, 40, 16, 640), ("RM2_L2", 1, 20000, 64, 40, 16, 640),
    ("RM3_L0", 1, 20000, 128, 80, 16, 1280), ("RM3_L1", 1, 20000, 128, 80, 16, 1280),
    ("RM3_L2", 1, 20000, 128, 80, 16, 1280), ("MP_wiki-Talk", 1, 20000, 16, 2, 512, 1024),
    ("MP_roadNet-CA", 1, 20000, 16, 1, 512, 512), ("MP_com-Youtube", 1, 20000, 16, 3, 512, 1536),
    ("MP_web-Google", 1, 20000, 16, 6, 512, 3072), ("GNN_arxiv", 1, 20000, 128, 7, 292, 2044),
    ("GNN_products", 1, 20000, 128, 25, 81, 2025), ("GNN_proteins", 1, 20000, 128, 298, 6, 1788),
    ("GNN_mag", 1, 20000, 128, 11, 186, 2046), ("KG_biokg", 1, 1875, 128, 1, 1536, 1536),
    ("KG_wikikg2", 1, 50012, 128, 1, 1536, 1536), ("SpAttn_1", 1, 64, 1024, 1, 64, 64),
    ("SpAttn_2", 1, 64, 1024, 1, 128, 128), ("SpAttn_4", 1, 64, 1024, 1, 256, 256),
    ("SpAttn_8", 1, 64, 1024, 1, 512, 512),
]


def shape(w: Any) -> tuple[Any, ...]:
    return (w.name, w.tables, w.rows, w.dim, w.pooling, w.bags, w.lookups)


def test_quick_and_tiny_keep_their_published_shapes() -> None:
    assert [shape(w) for w in suite("quick")] == QUICK
    tiny = {w.name: shape(w) for w in suite("tiny")}
    assert tiny["MP_web-Google"] == ("MP_web-Google", 1, 2000, 16, 6, 32, 192)
    assert tiny["GNN_proteins"] == ("GNN_proteins", 1, 2000, 128, 298, 2, 596)
    assert tiny["SpAttn_8"] == ("SpAttn_8", 1, 32, 512, 1, 256, 256)


def test_paper_graphs_are_the_whole_graph_as_table_and_one_batch_of_destinations() -> None:
    paper = {w.name: w for w in suite("paper")}
    for graph, (nodes, edges) in GRAPHS.items():
        w = paper[f"MP_{graph}"]
        assert (w.rows, w.bags, w.pooling) == (nodes, MP_BATCH, max(1, round(edges / nodes)))
        assert len(w.inputs(0)["offsets"]) == MP_BATCH + 1
    for g, (nodes, edges) in GNN.items():
        w = paper[f"GNN_{g}"]
        assert w.rows == nodes and w.pooling == round(edges / nodes)
        assert 60_000 <= w.lookups <= 65_536, (g, w.lookups)  # about 65,536 edges' worth of destinations
    assert paper["GNN_proteins"].bags == 219 and paper["GNN_arxiv"].bags == 9362


def test_paper_attention_blocks_are_rows_that_fit_the_queue() -> None:
    """A 64 x 64 block (16 KiB) would fill the whole queue as one buffer: it is read as 4 rows of 16 tokens."""
    w = suite("paper", ["SpAttn_2"])[0]
    assert (w.rows, w.dim, w.split, w.lookups) == (512, 1024, 4, 1024)
    idx = w.inputs(0)["indices"].reshape(-1, 4)
    assert (idx % 4 == np.arange(4)).all() and (np.diff(idx, axis=1) == 1).all()


def test_the_huge_workload_allocates_nothing_of_its_tables_size() -> None:
    (w,) = suite("huge")
    assert (w.rows, w.dim, w.pooling, w.bags, w.zipf, w.virtual) == (100_000_000, 128, 80, 4_096, 0.0, True)
    assert w.table_bytes == 51_200_000_000 and w.lookups == 4_096 * 80
    tracemalloc.start()
    try:
        x = w.inputs(0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20, peak  # the indices (2.6 MB), never an array per row of the table
    assert x["indices"].max() < w.rows and len(x["indices"]) == w.lookups
    with pytest.raises(EmberError, match="only with --timing-only"):
        w.table(0)
    with pytest.raises(EmberError, match="only with --timing-only"):
        run(w, "O3", MACHINE)
    assert "huge" in SUITES


def test_tables_hold_data_only_where_lookups_read() -> None:
    w = suite("tiny", ["RM1_L2"])[0]
    x = w.inputs(0)
    table = w.table(0, x["indices"])
    read = np.zeros(w.rows, dtype=bool)
    read[x["indices"]] = True
    assert (table[~read] == 0).all() and (table[read] != 0).all()
    assert np.array_equal(table, w.table(0))  # the same with or without the indices handed in


def test_reference_gives_empty_bags_zeros() -> None:
    w = suite("tiny", ["MP_roadNet-CA"])[0]
    x = w.inputs(0)
    counts = np.diff(x["offsets"])
    assert (counts == 0).any() and (counts > 0).any()  # the case reduceat alone gets wrong
    table = w.table(0)
    want = np.zeros((w.bags, w.dim), dtype=np.float32)
    np.add.at(want, np.repeat(np.arange(w.bags), counts), table[x["indices"]])
    got = w.reference(0)
    assert np.allclose(got, want, atol=1e-5) and (got[counts == 0] == 0).all()


# --- statistics ----------------------------------------------------------------------------------------------


def test_run_reports_host_time_and_speeds() -> None:
    w = suite("tiny", ["RM2_L0"])[0]
    s = run(w, "O3", MACHINE).stats
    assert set(STATS) <= set(s) and set(HOST_TIME) <= set(STATS)
    assert all(s[k] > 0 for k in HOST_TIME)
    assert s["lookups_per_host_second"] == pytest.approx(w.lookups / s["host_seconds"])
    assert s["sim_cycles_per_host_second"] == pytest.approx(s["cycles"] / s["host_seconds"])


@pytest.mark.parametrize("variant", ["O0", "O3", "hand", "core"])
def test_timing_only_gives_the_statistics_of_a_run_with_data(variant: str) -> None:
    w = suite("tiny", ["GNN_arxiv"])[0]  # weighted bags, variable degree, a hand-written baseline
    full = run(w, variant, MACHINE).stats
    timed = run(w, variant, MACHINE, timing_only=True).stats
    assert simulated(timed) == simulated(full)


def test_timing_only_needs_the_fast_engine() -> None:
    with pytest.raises(EmberError, match="needs the fast engine"):
        run(suite("tiny", ["RM1_L0"])[0], "O3", MACHINE, engine="reference", timing_only=True)


def test_errors_name_the_point(monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulator error reaches the user naming the workload and variant, among the hundreds a suite runs."""
    real = bench_run.simulate
    monkeypatch.setattr(bench_run, "simulate", lambda *a, **k: real(*a, max_cycles=10, **k))
    with pytest.raises(EmberError, match="RM1_L0 O3: simulation exceeded --max-cycles=10"):
        run(suite("tiny", ["RM1_L0"])[0], "O3", MACHINE)


def test_first_difference_names_the_first_statistic_in_order() -> None:
    a = {k: 1.0 for k in STATS}
    assert first_difference(a, dict(a, host_seconds=9.0, lookups_per_host_second=2.0)) is None
    b = dict(a, tokens=2.0, dram_bytes=5.0)
    assert first_difference(a, b) == "tokens (reference 1.0, fast 2.0)"


# --- the command line ----------------------------------------------------------------------------------------

TINY = ("--suite", "tiny", "--only", "RM1_L0")


def test_timing_only_rows_match_rows_with_data(tmp_path: Any) -> None:
    for name, extra in (("full", ()), ("timed", ("--timing-only",))):
        res = bench(*TINY, "--variants", "O1,O3,hand", "--json", str(tmp_path / f"{name}.json"), "-q", *extra)
        assert res.returncode == 0, res.stderr.decode()
    full, timed = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("full", "timed"))
    assert timed["timing_only"] is True and full["timing_only"] is False and full["peak_rss_bytes"] > 0
    assert [simulated(r) for r in timed["rows"]] == [simulated(r) for r in full["rows"]]
    assert all(r["lookups_per_host_second"] > 0 for r in timed["rows"])


def test_speed_table_and_timing_only_caption() -> None:
    res = bench(*TINY, "--variants", "O3,hand", "--timing-only", "--speed")
    text = res.stdout.decode()
    assert res.returncode == 0, res.stderr.decode()
    assert "Simulation speed (fast engine, timing only)" in text and "lookups / host s" in text
    assert "Peak resident memory of this process:" in text and "MiB" in text
    assert "Timing only: the tables held no data" in " ".join(text.split())  # however the caption wraps
    assert "Simulation speed" not in bench(*TINY, "--variants", "O3").stdout.decode()


def test_compare_engines_prints_both_and_writes_rows() -> None:
    res = bench(*TINY, "--variants", "O0,O3,hand", "--compare-engines", "--csv", "-")
    assert res.returncode == 0, res.stderr.decode()
    err = res.stderr.decode()  # the table moves to stderr when stdout carries the CSV
    assert "Engines: reference vs fast" in err and "speedup" in err and "geomean" in err
    lines = res.stdout.decode().splitlines()
    header = lines[0].split(",")
    for col in ("reference.host_seconds", "fast.host_seconds", "engine_speedup", "fast.lookups_per_host_second",
                "cycles"):
        assert col in header, col
    assert [line.split(",")[1] for line in lines[1:]] == ["O0", "O3", "hand"]


def test_compare_engines_stops_at_the_first_differing_statistic(monkeypatch: pytest.MonkeyPatch) -> None:
    real = bench_run.run

    def skewed(w: Any, variant: str, machine: Any, engine: str = "fast", timing_only: bool = False,
               hands: Any = None, trace: Any = None) -> Result:
        res = real(w, variant, machine, engine=engine, timing_only=timing_only, hands=hands, trace=trace)
        if engine == "fast":
            res.stats["dram_bytes"] += 64
        return res

    monkeypatch.setattr(bench_run, "run", skewed)
    result = CliRunner().invoke(bench_cli.main, [*TINY, "--variants", "O3", "--compare-engines"])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "RM1_L0 O3: the engines disagree on dram_bytes (reference" in result.stderr


def test_timing_only_sweep_rows_match_a_run_with_data() -> None:
    plan = sw.Sweep("tiny", suite("tiny", ["RM1_L0"]), ["O3"], sw.parse_axes(["dram.channels=1"], MACHINE),
                    MACHINE, [], "fast", timing_only=True)
    rows = sw.run_sweep(plan, plan.points, sw.Appender(None), 1)
    (row,) = rows.values()
    want = run(suite("tiny", ["RM1_L0"])[0], "O3", MACHINE.set("dram.channels", "1")).stats
    assert {k: row[k] for k in simulated(want)} == simulated(want)
    assert "timing only" in sw.caption(plan)


@pytest.mark.parametrize("args, message", [
    (("--suite", "huge"), "RM3_100M: its table (51.2 GB) holds no data; it is simulated only with --timing-only"),
    (("--suite", "huge", "--compare-engines"), "--compare-engines runs the reference engine"),
    ((*TINY, "--timing-only", "--engine", "reference"), "--timing-only needs the fast engine"),
    ((*TINY, "--compare-engines", "--timing-only"), "no timing-only mode"),
    ((*TINY, "--compare-engines", "--engine", "fast"), "--compare-engines and --engine both given"),
    ((*TINY, "--compare-engines", "--sweep", "variant=O3"), "--compare-engines and --sweep both given"),
    ((*TINY, "--timing-only", "--sweep", "engine=fast,reference"), "leave reference out of --sweep engine"),
    (("--suite", "enormous"), "unknown suite 'enormous' (valid: tiny, quick, paper, huge, representations-tiny, "
                              "representations, representations-paper)"),
    ((*TINY, "--speed", "--sweep", "variant=O3"), "--speed prints the speed of a plain run"),
    ((*TINY, "--speed", "--compare-engines"), "--compare-engines shows the host-time figures already"),
])
def test_bad_combinations_are_one_line_errors(args: tuple[str, ...], message: str) -> None:
    res = bench(*args)
    err = res.stderr.decode()
    assert res.returncode == 1 and res.stdout == b""
    assert err.count("\n") == 1 and err.startswith("ember-bench: error: ") and message in err, err
