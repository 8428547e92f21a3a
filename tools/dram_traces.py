"""Take the DRAM check's captured traces again: the DRAM requests of three Ember runs, in the order the simulator
made them, into ember/bench/dram/traces/*.npz (line numbers folded into the check's 1 GiB, and a write flag).

    .venv/bin/python tools/dram_traces.py [NAME ...]

Each run is a paper-shaped workload (the paper suite's rows, a batch of its own size) compiled at -O3 and run
on the reference engine of the default machine; tools/dram_reference.py must then be run again, since
Ramulator's results are for these exact requests.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ember.bench.dram.traces import CAPTURED, LINES, file_name
from ember.bench.run import compile_variant
from ember.bench.workloads import GRAPHS, MP_FEATURES, Workload
from ember.machine import load_machine
from ember.sim.cache import MemorySystem
from ember.sim.engines import simulate

OUT = Path(__file__).resolve().parent.parent / "ember" / "bench" / "dram" / "traces"
RUNS = {  # workload per captured trace: (name, kind, tables, rows, dim, pooling, bags, zipf) as workloads.py
    "RM1 rows": Workload("RM1", "bag_sum", 1, 1_000_000, 32, 20, 2_048, 0.8),
    "RM2 rows": Workload("RM2", "bag_sum", 1, 500_000, 64, 40, 512, 1.05),
    "RM3 rows": Workload("RM3", "bag_sum", 1, 200_000, 128, 80, 128, 0.0),
    "KG wikikg2": Workload("KG_wikikg2", "gather", 1, 250_000, 128, 1, 10_000, 0.0),
    "MP wiki-Talk": Workload("MP_wiki-Talk", "bag_sum", 1, GRAPHS["wiki-Talk"][0], MP_FEATURES, 2, 32_768, 0.9,
                             graph="wiki-Talk"),
}


def capture(w: Workload) -> tuple[np.ndarray, np.ndarray]:
    """(lines, writes) of every DRAM request of `w` at -O3, in call order."""
    seen: list[tuple[int, bool]] = []
    transfer = MemorySystem.transfer

    def recording(self: MemorySystem, now: float, line: int, write: bool) -> float:
        seen.append((line, write))
        return transfer(self, now, line, write)

    program = compile_variant(w, "O3")
    inputs = w.inputs(0)
    w.bind(program, 0, w.table(0, inputs["indices"]))
    MemorySystem.transfer = recording  # type: ignore[method-assign]
    try:
        simulate(program, inputs, load_machine("default"), engine="reference")
    finally:
        MemorySystem.transfer = transfer  # type: ignore[method-assign]
    lines = np.array([line for line, _ in seen], dtype=np.int64) % LINES
    return lines.astype(np.uint32), np.array([write for _, write in seen], dtype=bool)


def main() -> None:
    for name in sys.argv[1:] or CAPTURED:
        lines, writes = capture(RUNS[name])
        np.savez_compressed(OUT / file_name(name), lines=lines, writes=writes)
        print(f"{name}: {len(lines)} requests, {int(writes.sum())} writes")


if __name__ == "__main__":
    main()
