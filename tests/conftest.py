"""Shared fixtures: paths to the sample models and a runner for the command-line tools."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "samples" / "models"
TOOLS = ("import", "opt", "asm", "disasm", "sim")


def tool(name: str) -> list[str]:
    """Run a command as `python -m ember.cli.<name>` so tests need no installed scripts on PATH."""
    module = {"import": "import_"}.get(name, name)
    return [sys.executable, "-c", f"from ember.cli.{module} import main; main()"]


def run_tool(name: str, *args: str, stdin: bytes | None = None, cwd: Path | None = None
             ) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([*tool(name), *args], input=stdin, capture_output=True, cwd=cwd, env=env, timeout=300)


@pytest.fixture
def run() -> object:
    return run_tool
