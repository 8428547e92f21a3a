"""--trace and --timeline: both engines record the same timeline, it holds what the statistics count, and it
stays inside its window and limit.  (A load in a real trace reader: tools/trace_reader_check.py, docs/trace.md.)"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS, compile_model

from ember.backend.binary import assemble
from ember.bench.run import compile_file
from ember.bench.run import run as bench_run
from ember.bench.workloads import suite
from ember.machine import load_machine
from ember.sim.cache import MemorySystem
from ember.sim.engines import simulate
from ember.sim.pipeline import CATEGORIES
from ember.sim.trace import KINDS, WAIT_LABELS, Events, TraceOptions, chrome, trace_json


@pytest.fixture(scope="module")
def demo() -> tuple:
    return compile_model(MODELS / "dlrm.dynamo.onnx", "O0"), dict(np.load(MODELS / "dlrm.in.npz"))


def traced(demo: tuple, engine: str, **options: object) -> tuple[Events, dict]:
    program, inputs = demo
    m = load_machine("default")
    e = TraceOptions(**options).events(m)  # type: ignore[arg-type]
    _, st = simulate(program, inputs, m, engine=engine, trace=e)
    return e, st


def spans(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def test_runtime_h_lists_the_kinds_in_trace_py_order() -> None:
    text = resources.files("ember.sim.fast").joinpath("runtime.h").read_text()
    enum = re.search(r"enum \{ (TK_RUN.*?) \};", text, re.S)
    assert enum is not None
    names = [n.split("=")[0].strip() for n in enum.group(1).replace("\n", " ").split(",")]
    waits = [k.name for k in KINDS if k.name.startswith("wait_")]
    assert waits == [f"wait_{c}" for c in CATEGORIES]
    plain = [f"TK_{k.name.upper()}" for k in KINDS if not k.name.startswith("wait_")]
    assert names == plain[:plain.index("TK_DRAM_READ")] + ["TK_WAIT"] + plain[plain.index("TK_DRAM_READ"):]
    assert f"TK_DRAM_READ = TK_WAIT + {len(CATEGORIES)}" in text


def test_both_engines_write_the_same_trace_and_it_adds_up_to_the_statistics(demo: tuple) -> None:
    fast, st = traced(demo, "fast")
    ref, _ = traced(demo, "reference")
    m = load_machine("default")
    doc_bytes = trace_json([(fast, demo[0])], m)
    assert doc_bytes == trace_json([(ref, demo[0])], m)
    doc = json.loads(doc_bytes)
    assert doc["otherData"]["dropped"] == 0
    us = 1e-3 / m.clock_ghz
    by_name: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for e in spans(doc):
        a, b = e["args"]["cycles"] if "args" in e else (e["ts"] / us, (e["ts"] + e["dur"]) / us)
        assert b >= a and e["dur"] == pytest.approx((b - a) * us, abs=1e-6)
        by_name[e["name"].split(" ")[0] if not e["name"].startswith("wait:") else e["name"]] += b - a
        counts[e["name"].split(" ")[0]] += 1
    # merged spans keep their sums: the front end's waits are the statistics' stall cycles, by cause
    stat_of = {"compute": "compute_stall", "load": "load_stall", "pop": "pop_stall", "token": "starved",
               "store": "store_stall", "mispredict": "mispredict"}
    for c in CATEGORIES:
        assert by_name.get(WAIT_LABELS[c], 0.0) == pytest.approx(st[f"execute.{stat_of[c]}_cycles"], abs=0.1), c
    assert counts["callback"] == st["callbacks"]
    assert by_name["host"] == pytest.approx(st["host.cycles"])
    assert counts["run"] == st["execute.op.run"]
    instants = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert sum(e["name"] == "branch mispredicted" for e in instants) == st["execute.branch_mispredicts"]
    assert any(e["name"] == "dispatch jump mispredicted" for e in instants)
    line_time, line = MemorySystem.from_machine(m).xfer, m.caches[0].line_bytes
    reads = st["dram.requests"] - st["dram.write_bytes"] / line
    assert reads > 0 and by_name["read"] == pytest.approx(reads * line_time)
    counter = [e["args"]["bytes"] for e in doc["traceEvents"] if e["ph"] == "C"]
    assert max(counter) == st["queue_max_occupancy"]
    names = {(e["pid"], e.get("tid"), e["args"]["name"]) for e in doc["traceEvents"] if e["name"].endswith("_name")}
    assert {(0, None, "core 0"), (0, 0, "access unit"), (0, 3, "execute: front-end waits"), (1, None, "DRAM"),
            (1, 0, "channel 0")} <= names


def test_a_two_core_run_has_a_process_per_core_and_shared_dram() -> None:
    w = suite("tiny", ["RM1_L0"])[0]
    m = load_machine("default").with_overrides(["cores=2"])
    docs = {}
    for engine in ("fast", "reference"):
        res = bench_run(w, "O3", m, engine=engine, trace=TraceOptions())
        assert res.trace is not None and len(res.trace) == 2
        docs[engine] = trace_json(res.trace, m)
    assert docs["fast"] == docs["reference"]
    doc = json.loads(docs["fast"])
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert procs == {0: "core 0", 1: "core 1", 2: "DRAM (shared)"}
    for pid in (0, 1):
        assert any(e["pid"] == pid and e["name"].startswith("callback") for e in spans(doc))
    assert any(e["pid"] == 2 for e in spans(doc))


def test_the_window_and_the_limit_bound_what_is_kept(demo: tuple) -> None:
    whole, st = traced(demo, "fast")
    lo, hi = 1000.0, 2000.0
    part, _ = traced(demo, "fast", window=(lo, hi))
    assert 0 < part.n < whole.n
    m = load_machine("default")
    doc = chrome([(part, demo[0])], m)
    us = 1e-3 / m.clock_ghz
    for e in spans(doc):
        assert e["ts"] + e["dur"] >= lo * us - 1e-6 and e["ts"] <= hi * us + 1e-6
    cut, _ = traced(demo, "reference", limit=50)
    assert cut.n == 50 and cut.dropped > 0
    assert chrome([(cut, demo[0])], m)["otherData"]["dropped"] == cut.dropped
    same, _ = traced(demo, "fast", limit=50)
    assert trace_json([(same, demo[0])], m) == trace_json([(cut, demo[0])], m)


def test_cli_trace_and_its_errors(run: object, tmp_path: Path) -> None:
    binary = tmp_path / "m.bin"
    binary.write_bytes(assemble(compile_file(str(MODELS / "bag_sum.dynamo.onnx"), "O3")))
    inputs = str(MODELS / "bag_sum.in.npz")
    out = tmp_path / "t.json"
    r = run("sim", str(binary), "--inputs", inputs, "-q", "--trace", str(out), "--trace-limit", "5")  # type: ignore
    assert r.returncode == 0, r.stderr
    assert b"note: the trace keeps the first 5 events" in r.stderr
    assert len(spans(json.loads(out.read_text()))) <= 5
    r = run("sim", str(binary), "--inputs", inputs, "--trace", "-")  # type: ignore
    assert r.returncode == 0 and json.loads(r.stdout)["traceEvents"] and b"cycles" in r.stderr  # the table moves
    for args, message in ((["--trace", str(out), "--trace-window", "9:3"], "--trace-window '9:3'"),
                          (["--trace-window", "0:5"], "--trace-window needs --trace"),
                          (["--trace", str(out), "--trace-limit", "0"], "--trace-limit 0")):
        r = run("sim", str(binary), "--inputs", inputs, "-q", *args)  # type: ignore
        assert r.returncode == 1 and message.encode() in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_timeline_png(demo: tuple) -> None:
    pytest.importorskip("matplotlib")
    from ember.sim.timeline import timeline_png

    e, _ = traced(demo, "fast", window=(0.0, 3000.0))
    png = timeline_png([(e, demo[0])], load_machine("default"), "demo")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
