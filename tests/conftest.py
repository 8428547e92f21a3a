"""Shared fixtures: paths to the sample models and a runner for the command-line tools."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ember.backend.binary import assemble, disassemble
from ember.backend.dae import Program
from ember.bench.run import compile_file

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "samples" / "models"

TOOLS = ("import", "opt", "asm", "disasm", "sim")


def children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (from /proc)."""
    kids = set()
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.add(int(stat_file.parent.name))
    return kids


def running(pids: set[int]) -> set[int]:
    """Those of `pids` that still run (not gone, not a zombie)."""
    alive = set()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                alive.add(pid)
        except OSError:
            pass
    return alive


def tool(name: str) -> list[str]:
    """Run a command as `python -m ember.cli.<name>` so tests need no installed scripts on PATH."""
    module = {"import": "import_"}.get(name, name)
    return [sys.executable, "-c", f"from ember.cli.{module} import main; main()"]


def run_tool(name: str, *args: str, stdin: bytes | None = None, cwd: Path | None = None,
             path: list[Path] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run a tool; `path` puts directories before Ember on PYTHONPATH (e.g. a stand-in package)."""
    if tools_in_process() and path is None:
        return run_in_process(name, list(args), stdin, cwd)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*(str(p) for p in path or []), str(ROOT)]))
    return subprocess.run([*tool(name), *args], input=stdin, capture_output=True, cwd=cwd, env=env, timeout=300)


def torch_unless_mutating() -> Any:
    """torch, or a skip: when torch is missing, and under mutmut, whose test processes are forks of one that
    would then have imported torch; its thread pools do not survive a fork, and the forks hang in a futex.
    For tests of packages other than frontends whose mutants other tests catch without torch."""
    if tools_in_process():
        pytest.skip("torch is not imported under mutmut (its threads do not survive mutmut's fork)")
    return pytest.importorskip("torch")


def tools_in_process() -> bool:
    """Under mutmut (which sets MUTANT_UNDER_TEST) tools run in this process, one at a time."""
    return "MUTANT_UNDER_TEST" in os.environ


if tools_in_process():
    # Under mutmut, every mutant's tests run in one directory, and Hypothesis replays the failing examples it saved
    # there: an example saved under one mutant would then decide the result of every later one.  Each mutant's run
    # draws afresh instead (docs/testing.md: a failing example saved once made unrelated mutants count as killed).
    from hypothesis import settings

    settings.register_profile("mutmut", database=None)
    settings.load_profile("mutmut")


def run_in_process(name: str, args: list[str], stdin: bytes | None,
                   cwd: Path | None) -> subprocess.CompletedProcess[bytes]:
    """`run_tool` inside this process, as mutmut needs: it maps each test to the functions the test calls
    by tracing this process, so a tool run in a subprocess would leave those functions with no tests."""
    command = importlib.import_module(f"ember.cli.{ {'import': 'import_'}.get(name, name)}").main
    out, err = io.BytesIO(), io.BytesIO()
    with IN_PROCESS, _std_streams(stdin or b"", out, err), contextlib.chdir(cwd or os.getcwd()):
        try:
            command.main(args=args, prog_name=f"ember-{name}", standalone_mode=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else int(e.code is not None)
    return subprocess.CompletedProcess([*tool(name), *args], code, out.getvalue(), err.getvalue())


def run_here(name: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """A command in this process, as run_tool runs it under mutmut: no interpreter start each, for tests whose
    subject is what the command computes (real processes are test_pipeline.py's and test_outputs.py's)."""
    return run_in_process(name, list(args), None, cwd)


IN_PROCESS = threading.Lock()  # the standard streams and the working directory belong to the process


@contextlib.contextmanager
def _std_streams(stdin: bytes, out: io.BytesIO, err: io.BytesIO) -> Iterator[None]:
    def text(buffer: io.BytesIO) -> io.TextIOWrapper:
        return io.TextIOWrapper(buffer, encoding="utf-8", write_through=True)

    saved = sys.stdin, sys.stdout, sys.stderr
    streams = text(io.BytesIO(stdin)), text(out), text(err)
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        for s in streams:
            s.flush()
            s.detach()  # the buffers outlive their wrappers, which would close them


@pytest.fixture
def run() -> object:
    return run_tool


def compile_model(path: Path, level: str) -> Program:
    """Import any model file, compile at `level`, attach its weights and round-trip the binary, as
    `ember-import | ember-opt | ember-asm` would."""
    return disassemble(assemble(compile_file(str(path), level)), "m.bin")


# (mode, level) of a bag op's tests: every mode at -O0 and core-only, -O3 on sum only; the other modes at -O3, and
# -O1 and -O3 on every op ("full"), run in `make bench`, to keep `make test` under ten minutes.
OP_MODES = [pytest.param(m, v, marks=[pytest.mark.slow] if v in ("O1", "full") or (v == "O3" and m != "sum") else [])
            for v in ("O0", "O3", "core", "O1", "full") for m in ("sum", "mean", "weighted")]


def op_mode_cases(sizes: dict[str, Any], slow_at_o3: tuple[str, ...]) -> list[Any]:
    """OP_MODES for each size of an op (named by its id), with the sizes `slow_at_o3` in `make bench` at -O3 too:
    the reference engine takes longest there."""
    return [pytest.param(size, *p.values, id=f"{key}-{p.values[0]}-{p.values[1]}",
                         marks=[*p.marks, *([pytest.mark.slow] if key in slow_at_o3 and p.values[1] == "O3" else [])])
            for p in OP_MODES for key, size in sizes.items()]


def compile_text(source: str, params: dict[str, Any], level: str, name: str = "m.eir") -> Program:
    """Compile `.eir` text at `level` (a preset, "full": -O3's passes on every op without choose-plan, or a
    pipeline), give each param its array by name, and round-trip the binary, as ember-opt | ember-asm would."""
    from ember.ir.parser import parse_module
    from ember.passes import PRESETS, parse_pipeline, run_passes

    passes = parse_pipeline(PRESETS["O3"].replace("choose-plan,", "") if level == "full" else PRESETS.get(level, level))
    module = parse_module(source, name)
    run_passes(module, passes)
    program = passes[-1].program  # type: ignore[attr-defined]
    for n, s in enumerate(program.symbols):
        if s.kind == "param":
            program.data[n] = params[s.name]
    return disassemble(assemble(program), name.replace(".eir", ".bin"))


# The modules that take longest (pytest --durations, 29 November), run first: `make test` gives each worker whole
# modules (--dist loadfile) in collection order, so long ones started last would leave one core idle at the end.
LONGEST_FIRST = ("test_fast_engine.py", "test_pipeline.py", "test_bad_input.py", "test_dram.py",
                 "test_bench_representations.py", "test_fuzz.py", "test_dhe.py", "test_sweep.py", "test_gpu_bench.py",
                 "test_corpus.py", "test_plan.py", "test_profitability.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


# Optional test groups: the module a skipped test could not import -> the extra that installs it.
OPTIONAL_GROUPS = {"torch": "torch", "onnxscript": "torch", "transformers": "corpus", "matplotlib": "plot",
                   "distributed": "dask", "dask": "dask", "onnxruntime": "test", "triton": "gpu",
                   "xdsl": "mlir"}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """End `make test` by naming the optional groups that were skipped and the one command that runs them."""
    missing: dict[str, int] = {}
    other: dict[str, int] = {}
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        found = re.search(r"could not import '([\w.]+)'|needs (\w+)$", reason)
        module = (found.group(1) or found.group(2)).split(".")[0] if found else None
        module = module if module is None or module in OPTIONAL_GROUPS else None
        if module is not None:
            missing[module] = missing.get(module, 0) + 1
        else:
            other[reason] = other.get(reason, 0) + 1
    if not missing and not other:
        return
    write = terminalreporter.write_line
    write("")
    for module, n in sorted(missing.items()):
        extra = OPTIONAL_GROUPS.get(module)
        group = f"the '{extra}' extra" if extra else "not part of any Ember extra"
        write(f"skipped: {n} without {module} ({group})")
    for reason, n in sorted(other.items()):
        write(f"skipped: {n}: {reason}")
    if missing:
        write("to run the optional groups too: make test-all  (installs .[test,torch,plot,corpus,mlir] into .venv)")
