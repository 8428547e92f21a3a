"""docs/results.md holds what tools/results_summary.py computes from the rows tools/remeasure.sh kept, so every
figure on the page can be traced to one run (docs/results/RUN.txt)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def summary():
    spec = importlib.util.spec_from_file_location("results_summary", ROOT / "tools" / "results_summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_holds_every_table_the_kept_rows_give() -> None:
    s = summary()
    quick, ideal, paper, reps = (s.index(s.rows(n)) for n in ("quick", "quick-ideal-dram", "paper", "representations"))
    page = (ROOT / "docs" / "results.md").read_text()
    for table in (s.suite_table(quick), s.suite_table(paper), s.locality_table(paper), s.memory_table(quick, ideal),
                  s.sensitivity_table(), s.representations_table(reps), s.experts_table(reps)):
        for row in table.splitlines()[2:]:
            assert row in page, f"docs/results.md lacks {row!r}: paste `python tools/results_summary.py`"


def test_every_kept_report_names_the_command_that_made_it() -> None:
    run = (ROOT / "docs" / "results" / "RUN.txt").read_text()
    for report in sorted((ROOT / "docs" / "results").glob("*.txt")):
        if report.name != "RUN.txt":
            assert f"{report.stem}: ember-bench " in run, report.name
