"""ember-bench --sweep: points, resuming, parallel and Dask runs that agree with serial ones, rows, plots, errors."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, children, run_tool, running

from ember.bench import sweep as sw
from ember.bench.run import STATS, is_stat, run
from ember.bench.workloads import Workload, suite
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim.engines import DEFAULT_ENGINE

ONE = ("--suite", "tiny", "--only", "RM1_L0")
SWEEP = ("--sweep", "variant=O3,hand", "--sweep", "dram.channels=2,4")
POINTS = [("O3", 2), ("O3", 4), ("hand", 2), ("hand", 4)]  # workload, then variant, then the rest


def bench(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run_tool("bench", *args)


def simulated(row: dict[str, Any]) -> dict[str, Any]:
    """A row without the host-time figures, which differ from run to run; everything else must not."""
    return {k: v for k, v in row.items() if k not in sw.HOST_TIME}


def json_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One inline run of the 4-point sweep writing every output; the other tests compare against it."""
    out = tmp_path_factory.mktemp("serial")
    res = bench(*ONE, *SWEEP, "--jobs", "1", "--sweep-out", str(out / "points.jsonl"), "--json",
                str(out / "rows.json"), "--csv", str(out / "rows.csv"))
    assert res.returncode == 0, res.stderr.decode()
    assert "Sweep: 4 points" in res.stdout.decode()
    return out


# --- points --------------------------------------------------------------------------------------------------


def test_points_are_the_cartesian_product_in_sweep_order() -> None:
    m = load_machine("default")
    axes = sw.parse_axes(["access.outstanding=32,64,0x40", "variant=O0,O3", "dram.latency=8,16"], m)
    assert [a.key for a in axes] == ["access.outstanding", "variant", "dram.latency"]
    assert axes[0].values == [32, 64]  # 0x40 is 64 again: one point, not two
    assert axes[2].values == [8.0, 16.0] and all(isinstance(v, float) for v in axes[2].values)
    plan = sw.Sweep("tiny", suite("tiny", ["RM1_L0", "RM2_L0"]), ["O1"], axes, m, [], "reference")
    assert plan.variants == ["O0", "O3"]  # the swept variants replace the listed ones
    assert len(plan.points) == 2 * 2 * 2 * 2 and len({p.key() for p in plan.points}) == 16
    first = plan.points[0]
    assert (first.workload, first.variant, first.settings) == (
        "RM1_L0", "O0", (("access.outstanding", 32), ("dram.latency", 8.0)))
    assert [p.settings for p in plan.points[:4]] == [
        (("access.outstanding", a), ("dram.latency", d)) for a in (32, 64) for d in (8.0, 16.0)]
    task = plan.task(plan.points[3])
    assert task.machine.access.outstanding == 64 and task.machine.dram.latency == 16.0
    assert task.machine.access.lanes == m.access.lanes and task.engine == "reference"


def test_engine_is_a_sweepable_key_and_reaches_the_simulator() -> None:
    m = load_machine("default")
    plan = sw.Sweep("tiny", suite("tiny", ["RM1_L0"]), ["O3"], sw.parse_axes(["engine=reference,fast"], m), m, [],
                    "reference")
    assert [plan.task(p).engine for p in plan.points] == ["reference", "fast"]
    with pytest.raises(EmberError, match="unknown engine 'warp'"):  # run() hands the name to simulate()
        run(suite("tiny", ["RM1_L0"])[0], "O3", m, engine="warp")


def test_stats_lists_every_statistic_run_reports() -> None:
    """--plot-sweep checks METRIC against STATS before running, so STATS and the energy leaves must be exactly
    what run() reports."""
    res = run(suite("tiny", ["KG_biokg"])[0], "O3", load_machine("default"))
    leaves = sorted(k for k in res.stats if k not in STATS)
    assert sorted(k for k in res.stats if k in STATS) == sorted(STATS)
    assert leaves == sorted(f"energy.{b}_j" for b in ("access", "core", "dram", "host", "l1", "l2", "llc", "queue",
                                                       "static.access", "static.cache", "static.core", "static.dram"))
    assert all(is_stat(k) for k in res.stats) and not is_stat("energy_of_nothing")


# --- rows, resuming, parallel --------------------------------------------------------------------------------


def test_rows_hold_the_point_and_every_statistic(serial: Path) -> None:
    doc = json.loads((serial / "rows.json").read_text())
    assert doc["sweep"] == {"variant": ["O3", "hand"], "dram.channels": [2, 4]}
    rows = doc["rows"]
    assert [(r["variant"], r["dram.channels"]) for r in rows] == POINTS
    for r in rows:
        assert r["workload"] == "RM1_L0" and r["engine"] == DEFAULT_ENGINE and r["machine"] == "default"
        assert r["suite"] == "tiny" and r["overrides"] == ""
        assert all(k in r for k in STATS), [k for k in STATS if k not in r]
        peak = load_machine("default").set("dram.channels", str(r["dram.channels"])).dram_bytes_per_cycle
        assert r["dram_bandwidth_fraction"] == pytest.approx(r["dram_bytes"] / (r["cycles"] * peak))
    assert rows[0]["dram_bandwidth_fraction"] > rows[1]["dram_bandwidth_fraction"]  # the machine really changed
    table = list(csv.DictReader(io.StringIO((serial / "rows.csv").read_text())))
    assert len(table) == len(rows)
    for got, want in zip(table, rows):
        assert list(got) == list(want)
        assert got["variant"] == want["variant"] and float(got["cycles"]) == want["cycles"]
        assert float(got["dram.channels"]) == want["dram.channels"]
    # the results file holds the same rows, one a line, in the order they finished
    assert sorted(map(json.dumps, json_rows(serial / "points.jsonl"))) == sorted(map(json.dumps, rows))


def test_resume_runs_only_the_missing_points(serial: Path, tmp_path: Path) -> None:
    done = json_rows(serial / "points.jsonl")
    first, second = done[0], done[1]
    first["cycles"] = 123.0  # a value no simulation gives: if it survives, the point was not run again
    partial = json.dumps(done[2])[:40]  # a run killed while writing its third line
    out = tmp_path / "points.jsonl"
    out.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n" + partial)
    res = bench(*ONE, *SWEEP, "--jobs", "1", "--sweep-out", str(out), "--csv", str(tmp_path / "rows.csv"))
    assert res.returncode == 0, res.stderr.decode()
    assert f"2 of 4 points already in {out}, skipped" in res.stderr.decode()
    lines = out.read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line) for line in lines)  # the partial line was cut, not glued to
    assert json.loads(lines[0]) == first and json.loads(lines[1]) == second
    table = list(csv.DictReader(io.StringIO((tmp_path / "rows.csv").read_text())))
    by_point = {(r["variant"], int(r["dram.channels"])): r for r in table}
    assert sorted(by_point) == sorted(POINTS)
    assert float(by_point[(first["variant"], first["dram.channels"])]["cycles"]) == 123.0
    want = {(r["variant"], r["dram.channels"]): r["cycles"] for r in done}
    for point in POINTS:
        if point != (first["variant"], first["dram.channels"]):
            assert float(by_point[point]["cycles"]) == want[point]
    again = bench(*ONE, *SWEEP, "--sweep-out", str(out), "--quiet")  # nothing left to run, nothing appended
    assert again.returncode == 0 and again.stderr == b"" and out.read_text().splitlines() == lines


def test_a_results_file_of_another_machine_is_refused(serial: Path, tmp_path: Path) -> None:
    out = tmp_path / "points.jsonl"
    out.write_text((serial / "points.jsonl").read_text())
    res = bench(*ONE, *SWEEP, "--machine", "small", "--sweep-out", str(out))
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1, err
    assert f"{out}:1: error: holds a point of another sweep (machine 'default' here, 'small' now)" in err


def test_parallel_rows_equal_serial_rows(serial: Path, tmp_path: Path) -> None:
    res = bench(*ONE, *SWEEP, "--jobs", "2", "--json", str(tmp_path / "rows.json"), "--quiet")
    assert res.returncode == 0, res.stderr.decode()
    got = json.loads((tmp_path / "rows.json").read_text())["rows"]
    want = json.loads((serial / "rows.json").read_text())["rows"]
    assert [simulated(r) for r in got] == [simulated(r) for r in want]


def _odd_sweep(tmp_path: Path) -> tuple[sw.Sweep, Path]:
    """O3 compiles and runs; 'hand' fails, since no hand-written baseline exists for the kind 'nokind'."""
    m = load_machine("default")
    w = Workload("ODD", "nokind", 1, 200, 8, 2, 2, 0.0)
    return sw.Sweep("tiny", [w], ["O3", "hand"], [], m, [], "reference"), tmp_path / "points.jsonl"


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_failing_point_stops_the_sweep_and_keeps_finished_points(tmp_path: Path, jobs: int) -> None:
    plan, path = _odd_sweep(tmp_path)
    out = sw.Appender(str(path))
    with pytest.raises(EmberError, match="sweep point ODD hand: no hand-written baseline for nokind with D=8"):
        sw.run_sweep(plan, plan.points, out, jobs)
    out.close()
    assert [r["variant"] for r in json_rows(path)] == ["O3"]


# --- plots ---------------------------------------------------------------------------------------------------


def test_plot_sweep_writes_a_png_per_metric_and_param(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    res = bench(*ONE, "--sweep", "variant=O3", "--sweep", "access.outstanding=8,64", "--plot", str(tmp_path),
                "--plot-sweep", "dram_bytes:access.outstanding", "--plot-sweep", "cycles:variant", "--quiet")
    assert res.returncode == 0, res.stderr.decode()
    for name in ("dram_bytes_vs_access.outstanding.png", "cycles_vs_variant.png"):
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cycles_vs_variant.png",
                                                          "dram_bytes_vs_access.outstanding.png"]


def test_plot_without_plot_sweep_draws_cycles_against_each_swept_key(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    res = bench(*ONE, "--sweep", "variant=O3", "--sweep", "dram.latency=100,200", "--plot", str(tmp_path), "-q")
    assert res.returncode == 0, res.stderr.decode()
    assert [p.name for p in tmp_path.iterdir()] == ["cycles_vs_dram.latency.png"]


# --- errors --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("args, message", [
    (("--sweep", "dram.nope=1,2"), "--sweep dram.nope=1: unknown machine key 'dram.nope'"),
    (("--sweep", "dram.latency=8,fast"), "machine key 'dram.latency' expects a number, got 'fast'"),
    (("--sweep", "dram.channels=0"), "'dram.channels' = 0: must be from 1 to 1024"),
    (("--sweep", "variant=O3,O4"), "--sweep variant: unknown variant 'O4'"),
    (("--sweep", "engine=warp"), "--sweep engine: unknown engine 'warp'"),
    (("--sweep", "dram.latency="), "--sweep dram.latency: no values given"),
    (("--sweep", "dram.latency"), "bad --sweep 'dram.latency' (expected KEY=V1,V2,..."),
    (("--sweep", "dram.latency=1", "--sweep", "dram.latency=2"), "--sweep dram.latency is given twice"),
    (("--sweep", "dram.latency=1,2", "--set", "dram.latency=3"), "also given with --set"),
    (("--sweep", "caches.l1.ways=12,16", "--sweep", "caches.l1.size_bytes=49152,2304"),  # each valid, not both
     "--sweep point caches.l1.ways=16, caches.l1.size_bytes=2304: machine key 'caches.l1.size_bytes'"),
    (("--sweep", "variant=O3", "--variants", "O0"), "--variants and --sweep variant=... both given"),
    (("--sweep", "variant=O3", "--jobs", "0"), "--jobs must be at least 1"),
    (("--sweep", "variant=O3", "--plot-sweep", "cycles:variant"), "--plot-sweep needs --plot DIR"),
    (("--sweep", "variant=O3", "--plot", "figs", "--plot-sweep", "cylces:variant"), "unknown statistic 'cylces'"),
    (("--sweep", "variant=O3", "--plot", "figs", "--plot-sweep", "cycles:dram.latency"),
     "'dram.latency' is not swept (swept: variant)"),
    (("--sweep", "variant=O3", "--scheduler", "somewhere"), "'somewhere' is not a scheduler address"),
    (("--sweep-out", "points.jsonl"), "--sweep-out applies to sweeps only"),
    (("--engine", "warp"), "unknown engine 'warp' (valid: fast, reference)"),
])
def test_bad_sweeps_are_one_line_errors(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    if "--plot" in args:  # without matplotlib the missing extra is the error reported first
        pytest.importorskip("matplotlib")
    res = run_tool("bench", *ONE, *args, cwd=tmp_path)
    err = res.stderr.decode()
    assert res.returncode == 1 and res.stdout == b"", err
    assert err.count("\n") == 1 and err.startswith("ember-bench: ") and "error: " in err and message in err, err
    assert list(tmp_path.iterdir()) == []  # checked before anything ran or was written


def test_scheduler_without_dask_names_the_extra() -> None:
    code = "import sys; sys.modules['distributed'] = None; from ember.cli.bench import main; main()"
    res = subprocess.run([sys.executable, "-c", code, *ONE, "--sweep", "variant=O3", "--scheduler",
                          "tcp://127.0.0.1:8786"], capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                         timeout=120)
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1 and "pip install 'ember[dask]'" in err, err


# --- Dask ----------------------------------------------------------------------------------------------------


def test_a_dask_cluster_gives_the_rows_of_a_local_run(serial: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        res = bench(*ONE, *SWEEP, "--scheduler", cluster.scheduler_address, "--json", str(tmp_path / "rows.json"),
                    "--sweep-out", str(tmp_path / "points.jsonl"), "--quiet")
    assert res.returncode == 0, res.stderr.decode()
    got = json.loads((tmp_path / "rows.json").read_text())["rows"]
    want = json.loads((serial / "rows.json").read_text())["rows"]
    assert [simulated(r) for r in got] == [simulated(r) for r in want]
    assert len(json_rows(tmp_path / "points.jsonl")) == 4


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process tree from /proc")
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_signalled_sweep_leaves_no_worker_behind(tmp_path: Path, sig: str) -> None:
    """SIGTERM (or Ctrl-C) while a sweep's workers run ends them with it: they and the resource tracker survived
    SIGTERM with parent 1 (issue 35).  The rows finished before it stay; no temporary file is left."""
    import signal
    import time

    args = ["--suite", "tiny", "--only", "RM1_L0", "--sweep", "variant=O0,O3", "--sweep", "dram.channels=1,2,4,8",
            "--engine", "reference", "--sweep-out", "s.jsonl", "-j", "2", "-q"]
    p = subprocess.Popen([sys.executable, "-c", "from ember.cli.bench import main; main()", *args], cwd=tmp_path,
                         stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    deadline = time.monotonic() + 60
    while len(kids := children(p.pid)) < 2 and time.monotonic() < deadline:  # the pool's workers have started
        time.sleep(0.2)
    assert p.poll() is None and len(kids) >= 2, kids
    kids |= {k for kid in kids for k in children(kid)}
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=60)
    assert p.returncode == (-signal.SIGTERM if sig == "SIGTERM" else 1), err.decode()
    if sig == "SIGINT":
        assert err.decode() == "ember-bench: interrupted\n"
    deadline = time.monotonic() + 10
    while (alive := running(kids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive, f"processes left running: {alive}"
    assert {f.name for f in tmp_path.iterdir()} <= {"s.jsonl"}
