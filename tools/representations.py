"""One embedding table in every representation Ember has, on the default machine: what the DAE gains or loses.

One bag shape (ROWS rows of 64, 128 bags of 20 uniform random lookups, sum), its float table made by a seeded
normal generator and written to an ONNX file so that the transform passes measure their reconstruction error as
`ember-opt` does.  Each form comes from the float model by the pass a user would run (quantize-tables,
tt-decompose, robe), except DHE, which needs a trained MLP: it gets random weights of the stated shape, so its
cycles are meaningful and its error is not.  Each form is compiled at -O3 (its own choose-plan), at -O3 on every
op (choose-plan off: decoupled and optimized whatever the estimate says) and core-only,
its derived params linked as ember-asm links them, and simulated with data on the fast engine.
A random table has no low-rank or hashed structure, so the lossy forms' errors here are upper-end figures.
Usage: python tools/representations.py [ROWS]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

import ember.dialects  # noqa: F401
from ember.ir.parser import parse_module
from ember.machine import load_machine
from ember.passes import PASSES, PRESETS, parse_pipeline, run_passes
from ember.passes.derived import link_param
from ember.sim.engines import simulate

DIM, BAGS, POOLING = 64, 128, 20
DHE = (64, 64)  # k hashes, hidden width (then DIM)


def bag_module(rows: int, weights: str) -> str:
    head = f"func @main(%indices: tensor<{BAGS * POOLING}xi64>, %offsets: tensor<{BAGS + 1}xi64>)"
    return (f'module attributes {{weights = "{weights}"}} {{\n  {head} -> (tensor<{BAGS}x{DIM}xf32>) {{\n'
            f'    %table = param {{name = "table"}} : tensor<{rows}x{DIM}xf32>\n'
            f'    %out = emb.bag %table, %indices, %offsets {{mode = "sum", empty = "zero"}} '
            f": tensor<{BAGS}x{DIM}xf32>\n"
            "    return %out\n  }\n}\n")


def dhe_module() -> str:
    k, hidden = DHE
    decl = "".join(f'    %{n} = param {{name = "{n}"}} : tensor<{k}xi64>\n' for n in ("slope", "bias", "prime"))
    decl += (f'    %w0 = param {{name = "w0"}} : tensor<{hidden}x{k}xf32>\n'
             f'    %b0 = param {{name = "b0"}} : tensor<{hidden}xf32>\n'
             f'    %w1 = param {{name = "w1"}} : tensor<{DIM}x{hidden}xf32>\n'
             f'    %b1 = param {{name = "b1"}} : tensor<{DIM}xf32>\n')
    head = f"func @main(%indices: tensor<{BAGS * POOLING}xi64>, %offsets: tensor<{BAGS + 1}xi64>)"
    op = ("emb.dhe %slope, %bias, %prime, %w0, %b0, %w1, %b1, %indices, %offsets "
          '{buckets = 1000000, layers = 2, mode = "sum"}')
    return f"module {{\n  {head} -> (tensor<{BAGS}x{DIM}xf32>) {{\n{decl}    %out = {op} : tensor<{BAGS}x{DIM}xf32>\n" \
           "    return %out\n  }\n}\n"


def dhe_weights(rng: np.random.Generator) -> dict[str, np.ndarray]:
    k, hidden = DHE
    return {"slope": rng.integers(1, 2**31 - 1, k), "bias": rng.integers(0, 2**31 - 1, k),
            "prime": np.full(k, 2038074743), "w0": rng.standard_normal((hidden, k)).astype(np.float32),
            "b0": np.zeros(hidden, np.float32), "w1": rng.standard_normal((DIM, hidden)).astype(np.float32),
            "b1": np.zeros(DIM, np.float32)}


def run(text: str, prefix: str, level: str, weights_file: str, weights: dict[str, np.ndarray],
        feeds: dict[str, np.ndarray]) -> tuple[dict, int, str]:
    """Compile, link and simulate one form: its statistics, its params' bytes and its transform's error."""
    every_op = PRESETS["O3"].replace("choose-plan,", "")
    passes = parse_pipeline(prefix + (every_op if level == "every" else PRESETS[level]))
    for p in passes:
        if hasattr(p, "weights_file"):
            p.weights_file = weights_file  # type: ignore[attr-defined]
    module = parse_module(text, "bag.eir")
    run_passes(module, passes)
    program = passes[-1].program  # type: ignore[attr-defined]
    size = 0
    for n, s in enumerate(program.symbols):
        if s.kind == "param":
            data = link_param(weights, s.name)
            assert data is not None, s.name
            program.data[n] = data
            size += data.nbytes
    figures = [f for p in passes for f in getattr(p, "stats", [])]
    error = f"{figures[0].error_max:.3g} / {figures[0].error_rms:.3g}" if figures and figures[0].error_max is not None \
        else ""
    _, st = simulate(program, feeds, load_machine("default"))
    return st, size, error


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    rng = np.random.default_rng(0)
    table = rng.standard_normal((rows, DIM)).astype(np.float32)
    feeds = {"indices": rng.integers(0, rows, BAGS * POOLING).astype(np.int64),
             "offsets": np.arange(0, BAGS * POOLING + 1, POOLING).astype(np.int64)}
    forms = [("float32 table", ""), ("int8 rows", "quantize-tables{bits=8},"),
             ("int4 rows", "quantize-tables{bits=4},"), ("TT, ranks 16", "tt-decompose{ranks=16},")]
    if "robe" in PASSES:
        forms.append(("ROBE, 1000x", f"robe{{size={rows * DIM // 1000}}},"))
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "table.onnx")
        graph = helper.make_graph([helper.make_node("Identity", ["table"], ["y"])], "w", [],
                                  [helper.make_tensor_value_info("y", 1, [rows, DIM])],
                                  [numpy_helper.from_array(table, "table")])
        onnx.save(helper.make_model(graph), path)
        weights = {"table": table}
        print("| form | bytes | ratio | error max / RMS | -O3 cycles | DRAM KB | sol_fraction | energy µJ "
              "| -O3 on every op | core-only cycles |\n|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
        cases = [(name, bag_module(rows, path), prefix, weights) for name, prefix in forms]
        cases.append((f"DHE, k={DHE[0]}, {DHE[1]}-wide (untrained)", dhe_module(), "", dhe_weights(rng)))
        for name, text, prefix, w in cases:
            st, size, error = run(text, prefix, "O3", path, w, feeds)
            every, _, _ = run(text, prefix, "every", path, w, feeds)
            core, _, _ = run(text, prefix, "core", path, w, feeds)
            print(f"| {name} | {size:,} | {table.nbytes / size:,.1f}x | {error or '—'} | {st['cycles']:,.0f} "
                  f"| {st['dram_bytes'] / 1e3:,.0f} | {st['sol_fraction']:.3f} | {st['energy_j'] * 1e6:,.0f} "
                  f"| {every['cycles']:,.0f} | {core['cycles']:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
