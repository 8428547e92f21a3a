"""A usage error (an unknown option, a bad option value, a missing argument) is one line, `ember-X: error: ...`,
with exit status 1, as every other error is; click's own block of usage lines and its status 2 never show."""

from __future__ import annotations

import pytest
from conftest import run_tool

CASES = [
    ("sim", ["--max-cycles", "abc", "x.bin"], "Invalid value for '--max-cycles'"),
    ("opt", ["--no-such-option"], "No such option '--no-such-option'"),
    ("sim", [], "Missing argument 'PROGRAM'"),
    ("bench", ["--suite", "tiny", "--jobs", "many"], "Invalid value for '--jobs'"),
    ("asm", ["a.dae", "b.dae"], "Got unexpected extra argument"),
    ("import", ["--host-runtime"], "Option '--host-runtime' requires an argument"),
]


@pytest.mark.parametrize("tool,args,message", CASES, ids=[f"{t}-{m.split()[0]}" for t, _, m in CASES])
def test_a_usage_error_is_one_line_with_status_1(tool: str, args: list[str], message: str) -> None:
    r = run_tool(tool, *args)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.count("\n") == 1 and err.startswith(f"ember-{tool}: error: ") and message in err, err
    assert "Usage:" not in err


@pytest.mark.parametrize("tool", ["opt", "sim", "asm"])
def test_help_still_exits_0(tool: str) -> None:
    r = run_tool(tool, "--help")
    assert r.returncode == 0 and r.stdout.decode().startswith(f"Usage: ember-{tool}")
