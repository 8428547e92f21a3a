"""ember-fuzz: the differential fuzzer; generated and mutated programs through the tools and both engines."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ..ir.diagnostics import EmberError
from .common import command, guarded


@click.command(**command("ember-fuzz"))
@click.option("--runs", default=1000, show_default=True, help="programs to run (generated and mutated)")
@click.option("--seed", default=0, show_default=True,
              help="seed of the run: the same seed (and --jobs) draws the same programs")
@click.option("--max-cycles", default=1e5, show_default=True, help="--max-cycles of every simulation")
@click.option("--timeout", default=30.0, show_default=True, help="CPU seconds one program may take (its worker's, "
              "compilers included), or ten times as many wall-clock seconds whatever it spends; past either it is "
              "reported as a hang and its worker is replaced (a busy machine slows programs, it does not hang them)")
@click.option("--jobs", "-j", default=None, type=int, help="programs run side by side [default: the CPU count]")
@click.option("--shrink-time", default=60.0, show_default=True,
              help="seconds hypothesis may spend shrinking each new failure (0: save failures as found)")
@click.option("--out", "out", default="fuzz-failures", show_default=True,
              help="directory where each distinct failure is saved (its input files and case.txt)")
@click.option("-q", "--quiet", is_flag=True, help="print only the summary line")
@guarded("ember-fuzz")
def main(runs: int, seed: int, max_cycles: float, timeout: float, jobs: int | None, shrink_time: float, out: str,
         quiet: bool) -> None:
    """Generate `.dae` programs with hypothesis and mutate the sample `.eir`/`.dae`/`.bin` files; feed each
    to the tool that reads it (ember-opt, ember-asm, ember-sim), which must finish or refuse it with a
    one-line error, and run every program that assembles on both engines, which must agree exactly
    (outputs bit for bit, cycles and every statistic, or the same error).  Some cases are hostile use of
    the tools (docs/fuzzing.md): special files as inputs and outputs, machine settings at their limits,
    SIGINT or SIGTERM at a random time, and a closed stdout or a pipe whose reader stops early.

    Prints one line per distinct failure as it is found, then a summary: programs run (hostile uses by
    family among them), crashes, hangs, disagreements, internal errors.  Exit status 1 when there is any failure.
    """
    try:
        from ..fuzz.campaign import campaign, save
    except ImportError as e:
        if getattr(e, "name", "") and e.name.split(".")[0] == "hypothesis":  # type: ignore[union-attr]
            raise EmberError("the fuzzer needs hypothesis: pip install 'ember[test]'") from None
        raise
    if runs < 1 or timeout <= 0 or max_cycles <= 0:
        raise EmberError("--runs, --timeout and --max-cycles must be positive")
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    log = (lambda _line: None) if quiet else (lambda line: click.echo(f"ember-fuzz: {line}", err=True))
    summary = campaign(runs, seed, max_cycles, timeout, max(1, min(jobs, runs)), shrink_time, log)
    if summary.failures:
        saved = save(summary, Path(out))
        for d in saved:
            first = (d / "case.txt").read_text().splitlines()[0]
            click.echo(f"ember-fuzz: saved {d}: {first}", err=True)
    click.echo(f"ember-fuzz: {summary.line()}")
    sys.stdout.flush()
    if summary.failed:
        sys.exit(1)
