"""Statistics: gem5-style text, flat JSON, atomic writes and the occupancy histogram."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from ember.cli.common import write_outputs
from ember.ir.diagnostics import EmberError
from ember.sim.stats import BEGIN, END, Histogram, Stats, stats_text


def sample() -> Stats:
    """A few stats of each kind."""
    s = Stats()
    s.set("cycles", 1234, "cycles simulated", "Cycle")
    s.set("roofline_fraction", 0.25, "bound / cycles", "Ratio")
    s.add("exec.pops", 3, "operands popped", "Count")
    s.add("exec.pops", np.int64(2))
    s.set("note", 1.5)
    return s


def test_text_format_is_gem5_like_and_aligned() -> None:
    lines = sample().to_text().splitlines()
    assert lines[0] == BEGIN and lines[-1] == END
    assert END == "---------- End Simulation Statistics   ----------"
    body = lines[1:-1]
    assert body[0].split() == ["cycles", "1234", "#", "cycles", "simulated", "(Cycle)"]
    assert body[1].split()[:2] == ["roofline_fraction", "0.250000"]
    assert "# operands popped (Count)" in body[2] and body[2].split()[1] == "5"
    assert body[3].endswith("1.500000  #")
    assert len({line.index("#") for line in body}) == 1  # values and comments line up
    assert len({line.index(line.split()[1]) + len(line.split()[1]) for line in body}) == 1  # right-aligned


def test_empty_stats_text() -> None:
    assert Stats().to_text() == f"{BEGIN}\n{END}\n"


def test_json_is_flat_ordered_and_exact() -> None:
    s = sample()
    s.set("third", 1 / 3)
    d = json.loads(s.to_json())
    assert list(d) == ["cycles", "roofline_fraction", "exec.pops", "note", "third"]
    assert d["cycles"] == 1234 and isinstance(d["exec.pops"], int) and d["third"] == 1 / 3


def test_set_add_and_lookup() -> None:
    s = sample()
    s.set("cycles", 99)
    assert s["cycles"] == 99 and s.get("cycles").description == "cycles simulated"  # type: ignore[union-attr]
    assert list(s)[0] == "cycles" and "note" in s and len(s) == 4
    s.add("fresh", 2.5, "new one")
    s.add("fresh", 1)
    assert s["fresh"] == 3.5
    t = Stats()
    t.update(s, "core0.")
    assert t["core0.cycles"] == 99
    with pytest.raises(TypeError):
        s.set("flag", True)
    with pytest.raises(ValueError):
        s.set("two words", 1)


def write_stats(s: Stats, path: Path) -> None:
    """What ember-sim does with --stats."""
    write_outputs([(str(path), stats_text(s, path))])


def test_stats_file_format_follows_the_suffix(tmp_path: Path) -> None:
    s = sample()
    write_stats(s, tmp_path / "stats.json")
    write_stats(s, tmp_path / "stats.txt")
    assert json.loads((tmp_path / "stats.json").read_text())["cycles"] == 1234
    assert (tmp_path / "stats.txt").read_text().startswith(BEGIN)
    assert sorted(os.listdir(tmp_path)) == ["stats.json", "stats.txt"]


def test_failed_serialisation_leaves_no_file(tmp_path: Path) -> None:
    s = sample()
    s.set("bad", float("nan"))
    target = tmp_path / "stats.json"
    with pytest.raises(EmberError, match="statistic 'bad' is nan"):
        write_stats(s, target)
    assert os.listdir(tmp_path) == []
    target.write_text("old")
    with pytest.raises(EmberError):
        write_stats(s, target)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["stats.json"]


def test_failed_replace_removes_the_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(EmberError, match="cannot write: No space left"):
        write_stats(sample(), tmp_path / "stats.txt")
    assert os.listdir(tmp_path) == []


def test_histogram_buckets_and_weights() -> None:
    h = Histogram.linear(0, 16, 4)
    assert h.edges == [0, 4, 8, 12, 16]
    for value, weight in [(0, 2), (3, 1), (4, 5), (15, 1), (16, 3), (-1, 1), (7, 0)]:
        h.add(value, weight)
    assert h.counts == [3, 5, 0, 1] and h.overflows == 3 and h.underflows == 1
    assert h.total == 13 and h.max == 16 and h.min == -1
    assert h.mean == pytest.approx((0 * 2 + 3 + 4 * 5 + 15 + 16 * 3 - 1) / 13)
    s = Stats()
    h.report(s, "queue.occupancy", "entries in the queue", "Cycle")
    names = ["samples", "mean", "min", "max", "underflows", "0-4", "4-8", "8-12", "12-16", "overflows"]
    assert list(s) == [f"queue.occupancy::{n}" for n in names]
    assert s["queue.occupancy::4-8"] == 5


def test_histogram_float_edges_and_errors() -> None:
    assert Histogram.linear(0, 1, 4).edges == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert Histogram.linear(0, 10, 4).edges == [0.0, 2.5, 5.0, 7.5, 10.0]
    assert Histogram([0, 1]).mean == 0.0
    with pytest.raises(ValueError):
        Histogram([1, 1])
    with pytest.raises(ValueError):
        Histogram([0, 1]).add(0, -1)


def test_the_statistics_reference_is_what_runs_report() -> None:
    """docs/statistics.md lists every statistic with its unit and meaning, as a run reports them."""
    from gen_statistics_doc import DOC, render

    assert DOC.read_text() == render(), "docs/statistics.md is stale: run python tests/gen_statistics_doc.py"
