"""A float table against its int8 and int4 row-wise quantized forms (emb.qbag), on the default machine.

One bag shape (200,000 rows of 64, 128 bags of 20 uniform random lookups, sum) compiled at -O0, -O3, -O3 on
every op (choose-plan off) and core-only, simulated on the fast engine with data: cycles, DRAM bytes, the
speed-of-light fraction and energy.  The quantized rows are FBGEMM's layout, made by quantize-tables'
`prepack`, which equals torch's embedding_bag_byte_prepack / 4bit_prepack byte for byte.
Usage: python tools/quantized_bags.py [ROWS]
"""

from __future__ import annotations

import sys

import numpy as np

import ember.dialects  # noqa: F401
from ember.ir.parser import parse_module
from ember.passes import PRESETS, parse_pipeline, run_passes
from ember.passes.quantize_tables import prepack
from ember.sim.engines import simulate
from ember.sim.machine import load_machine

DIM, BAGS, POOLING = 64, 128, 20
LEVELS = {"O0": PRESETS["O0"], "O3": PRESETS["O3"], "O3 every op": PRESETS["O3"].replace("choose-plan,", ""),
          "core": PRESETS["core"]}


def module(rows: int, width: int, elem: str, bits: int) -> str:
    """The bag over a float table (bits 0) or its quantized form."""
    op, attrs = ("emb.qbag", f'{{bits = {bits}, mode = "sum"}}') if bits else \
        ("emb.bag", '{mode = "sum", empty = "zero"}')
    return f"""module {{
  func @main(%indices: tensor<{BAGS * POOLING}xi64>, %offsets: tensor<{BAGS + 1}xi64>) -> (tensor<{BAGS}x{DIM}xf32>) {{
    %table = param {{name = "table"}} : tensor<{rows}x{width}x{elem}>
    %out = {op} %table, %indices, %offsets {attrs} : tensor<{BAGS}x{DIM}xf32>
    return %out
  }}
}}"""


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    rng = np.random.default_rng(0)
    table = rng.standard_normal((rows, DIM)).astype(np.float32)
    feeds = {"indices": rng.integers(0, rows, BAGS * POOLING).astype(np.int64),
             "offsets": np.arange(0, BAGS * POOLING + 1, POOLING).astype(np.int64)}
    machine = load_machine("default")
    forms = [("float32", table, "f32", 0), ("int8", prepack(table, 8), "u8", 8), ("int4", prepack(table, 4), "u8", 4)]
    print("| table | MB | level | cycles | DRAM KB | sol_fraction | energy µJ |\n|---|---:|---|---:|---:|---:|---:|")
    for name, data, elem, bits in forms:
        for level, pipeline in LEVELS.items():
            m = parse_module(module(rows, data.shape[1], elem, bits), "bag.eir")
            passes = parse_pipeline(pipeline)
            run_passes(m, passes)
            program = passes[-1].program  # type: ignore[attr-defined]
            program.data[next(n for n, s in enumerate(program.symbols) if s.kind == "param")] = data
            _, st = simulate(program, feeds, machine)
            print(f"| {name} | {data.nbytes / 1e6:.1f} | {level} | {st['cycles']:,.0f} | {st['dram_bytes'] / 1e3:,.0f} "
                  f"| {st['sol_fraction']:.2f} | {st['energy_j'] * 1e6:,.0f} |")


if __name__ == "__main__":
    main()
