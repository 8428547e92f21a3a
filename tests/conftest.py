"""Shared fixtures: paths to the sample models and a runner for the command-line tools."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ember.backend.binary import assemble, disassemble
from ember.backend.dae import Program
from ember.frontends import import_model, load_weights_any
from ember.passes import PRESETS, parse_pipeline, run_passes

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "samples" / "models"
TOOLS = ("import", "opt", "asm", "disasm", "sim")


def tool(name: str) -> list[str]:
    """Run a command as `python -m ember.cli.<name>` so tests need no installed scripts on PATH."""
    module = {"import": "import_"}.get(name, name)
    return [sys.executable, "-c", f"from ember.cli.{module} import main; main()"]


def run_tool(name: str, *args: str, stdin: bytes | None = None, cwd: Path | None = None,
             path: list[Path] | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run a tool; `path` puts directories before Ember on PYTHONPATH (e.g. a stand-in package)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([*(str(p) for p in path or []), str(ROOT)]))
    return subprocess.run([*tool(name), *args], input=stdin, capture_output=True, cwd=cwd, env=env, timeout=300)


@pytest.fixture
def run() -> object:
    return run_tool


def compile_model(path: Path, level: str) -> Program:
    """Import any model file, compile at `level`, attach its weights and round-trip the binary, as
    `ember-import | ember-opt | ember-asm` would."""
    module = import_model(str(path), str(path))
    passes = parse_pipeline(PRESETS[level])
    run_passes(module, passes)
    program = passes[-1].program  # type: ignore[attr-defined]
    weights = load_weights_any(str(path))
    for n, s in enumerate(program.symbols):
        if s.kind == "param":
            program.data[n] = weights[s.name]
    return disassemble(assemble(program), "m.bin")


# Optional test groups: the module a skipped test could not import -> the extra that installs it.
OPTIONAL_GROUPS = {"torch": "torch", "onnxscript": "torch", "transformers": "corpus", "matplotlib": "plot",
                   "distributed": "dask", "dask": "dask", "onnxruntime": "test"}


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
        write("to run the optional groups too: make test-all  (installs .[test,torch,plot,corpus] into .venv)")
