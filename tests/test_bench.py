"""ember-bench end to end on the tiny suite: tables, JSON and CSV rows that agree, plots, one-line errors."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_tool

ONE = ("--suite", "tiny", "--only", "RM1_L0")
VARIANTS = ("O0", "O1", "O2", "paper-O3", "O3", "hand", "core")


def bench(*args: str) -> subprocess.CompletedProcess[bytes]:
    return run_tool("bench", *args)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[bytes], Path]:
    """One run of every variant writing JSON and CSV, shared by the tests that read them (it is the slow part)."""
    out = tmp_path_factory.mktemp("bench")
    res = bench(*ONE, "--json", str(out / "rows.json"), "--csv", str(out / "rows.csv"))
    assert res.returncode == 0, res.stderr.decode()
    return res, out


def test_prints_the_tables(full_run: tuple[subprocess.CompletedProcess[bytes], Path]) -> None:
    res, _ = full_run
    text = res.stdout.decode()
    assert "Speedup over O0" in text and "O0/O1" in text and "O0/O3" in text
    assert "RM1_L0" in text and "geomean" in text
    assert "(3.96)" in text  # the published O0/O1 of RM1_L0 beside ours
    assert "hand-written" in text and "core only" in text and "GPU" in text
    assert "machine 'default'" in text and "no --set overrides" in text


def test_json_rows_have_every_stat_and_consistent_speedups(
        full_run: tuple[subprocess.CompletedProcess[bytes], Path]) -> None:
    _, out = full_run
    doc = json.loads((out / "rows.json").read_text())
    assert doc["suite"] == "tiny" and doc["machine"]["name"] == "default"
    rows = {r["variant"]: r for r in doc["rows"]}
    assert sorted(rows) == sorted(VARIANTS) and len(doc["rows"]) == len(VARIANTS)
    for r in rows.values():
        assert r["workload"] == "RM1_L0"
        for key in ("cycles", "tokens", "operands", "dram_bandwidth_fraction", "roofline_fraction",
                    "useful_bandwidth_fraction", "host_seconds", "speedup_vs_O0", "percent_of_hand",
                    "lookups_per_host_second", "sim_cycles_per_host_second"):
            assert key in r, key
        assert r["host_seconds"] > 0 and r["sim_cycles_per_host_second"] > 0
        assert math.isclose(r["lookups_per_host_second"], r["lookups"] / r["host_seconds"])
    assert math.isclose(rows["O1"]["speedup_vs_O0"], rows["O0"]["cycles"] / rows["O1"]["cycles"])
    for r in rows.values():  # energy: its leaves sum to the total (over tables, when there are several)
        parts = [v for k, v in r.items() if k.startswith("energy.") and k.endswith("_j")]
        assert len(parts) >= 10 and math.isclose(sum(parts), r["energy_j"], rel_tol=1e-9)
        assert math.isclose(r["power_w"], r["energy_j"] / (r["cycles"] / 2e9), rel_tol=1e-9)  # default: 2 GHz
    assert math.isclose(rows["O3"]["percent_of_hand"], 100 * rows["hand"]["cycles"] / rows["O3"]["cycles"])
    assert rows["O1"]["published_speedup_vs_O0"] == 3.96
    assert rows["O3"]["published_percent_of_hand"] == 95.4
    assert math.isclose(rows["O0"]["gpu_frac_copy_bw"], 0.1275, abs_tol=1e-4)  # D=32, pooling 20, uniform


def test_the_energy_tables_give_nanojoules_a_lookup_and_watts(full_run: tuple[subprocess.CompletedProcess[bytes], Path]
                                                             ) -> None:
    res, out = full_run
    rows = {r["variant"]: r for r in json.loads((out / "rows.json").read_text())["rows"]}
    text = res.stdout.decode()
    assert max(map(len, text.splitlines())) <= 100
    for title, cell in (("Energy per lookup (nJ)", lambda r: f"{1e9 * r['energy_j'] / r['lookups']:,.2f}"),
                        ("Average power (W)", lambda r: f"{r['power_w']:.1f}")):
        lines = text.split(title, 1)[1].splitlines()
        header = next(ln for ln in lines if "workload" in ln).split("┃")[2:-1]
        line = next(ln for ln in lines if ln.startswith("│ RM1_L0")).split("│")[2:-1]
        assert [c.strip() for c in line] == [cell(rows[v.strip()]) for v in header]


def test_csv_parses_with_the_same_rows(full_run: tuple[subprocess.CompletedProcess[bytes], Path]) -> None:
    _, out = full_run
    table = list(csv.DictReader(io.StringIO((out / "rows.csv").read_text())))
    assert [r["variant"] for r in table] == list(VARIANTS)
    doc = json.loads((out / "rows.json").read_text())
    for got, want in zip(table, doc["rows"]):
        assert float(got["cycles"]) == want["cycles"]


def test_csv_to_stdout_moves_the_tables_to_stderr() -> None:
    res = bench(*ONE, "--variants", "O0,O1", "--csv", "-", "--set", "dram.channels=2")
    assert res.returncode == 0, res.stderr.decode()
    table = list(csv.DictReader(io.StringIO(res.stdout.decode())))
    assert [r["variant"] for r in table] == ["O0", "O1"]
    assert table[0]["overrides"] == "dram.channels=2"
    assert "Speedup over O0" in res.stderr.decode() and "dram.channels=2" in res.stderr.decode()


def test_only_the_tables_the_variants_allow() -> None:
    res = bench(*ONE, "--variants", "O0,O2", "--quiet")
    assert res.returncode == 0 and res.stdout == b""
    text = bench(*ONE, "--variants", "O0,O2").stdout.decode()
    assert "O0/O2" in text and "O0/O1" not in text and "O0/O3" not in text
    assert "hand-written" not in text and "core only" not in text
    bandwidth = text.split("Useful bandwidth / DRAM peak", 1)[1]
    header = next(ln for ln in bandwidth.splitlines() if "workload" in ln)
    assert [c.strip() for c in header.split("┃")[1:-1]] == ["workload", "O0", "O2", "GPU"]


def test_plot_writes_the_figures_and_the_energy_breakdown(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    res = bench(*ONE, "--variants", "O0,O1,O2,O3,hand", "--plot", str(tmp_path / "figs"), "--quiet")
    assert res.returncode == 0, res.stderr.decode()
    for name in ("speedup.png", "vs_handwritten.png", "energy_breakdown.png"):
        data = (tmp_path / "figs" / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 1000


@pytest.mark.parametrize("args, message", [
    ((*ONE, "--variants", "O0,O4"), "unknown variant 'O4'"),
    (("--suite", "huger", "--only", "RM1_L0"), "unknown suite 'huger'"),
    (("--suite", "tiny", "--only", "RM9"), "no workload matches --only RM9"),
    ((*ONE, "--set", "dram.nope=1"), "dram.nope"),
])
def test_bad_options_are_one_line_errors(args: tuple[str, ...], message: str) -> None:
    res = bench(*args)
    err = res.stderr.decode()
    assert res.returncode == 1 and res.stdout == b""
    assert err.count("\n") == 1 and err.startswith("ember-bench: ") and "error: " in err and message in err, err


def test_plot_without_matplotlib_names_the_extra(tmp_path: Path) -> None:
    code = "import sys; sys.modules['matplotlib'] = None; from ember.cli.bench import main; main()"
    res = subprocess.run([sys.executable, "-c", code, *ONE, "--plot", str(tmp_path)], capture_output=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    err = res.stderr.decode()
    assert res.returncode == 1 and err.count("\n") == 1 and "pip install 'ember[plot]'" in err, err
