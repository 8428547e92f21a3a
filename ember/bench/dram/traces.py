"""Request streams for the DRAM check: synthetic patterns and streams taken from Ember's own runs.

A trace is a line number and a read/write flag a request, over a 1 GiB range of 64-byte lines.  The synthetic
ones are made here from fixed seeds; the captured ones (traces/*.npz) are the DRAM requests of an Ember run,
in the order the simulator made them (tools/dram_traces.py takes them again).
"""

from __future__ import annotations

from importlib import resources

import numpy as np

LINES = (1 << 30) // 64  # the 1 GiB range every trace stays in
REQUESTS = 100_000

SYNTHETIC = {
    "random reads": "uniform random lines, reads",
    "sequential reads": "consecutive lines, reads",
    "4 KiB stride reads": "every 64th line, wrapping in 1 GiB, reads",
    "random 2:1 read/write": "uniform random lines, two reads to one write",
    "random pairs": "random 128-byte blocks read whole (a 32-float row): two lines at a time, reads",
    "sequential copy": "line i read, then line i + 512 Mi written: a copy between two buffers",
}
CAPTURED = {
    "RM1 rows": "RM1 (32-float rows, Zipf-skewed lookups) at -O3: its DRAM reads and write-backs",
    "RM2 rows": "RM2 (64-float rows, 40 lookups a bag, Zipf-skewed) at -O3: its DRAM reads and write-backs",
    "RM3 rows": "RM3 (128-float rows, 80 lookups a bag) at -O3: its DRAM reads and write-backs",
    "KG wikikg2": "knowledge-graph scoring's gather of 128-float rows at -O3: its DRAM reads and write-backs",
    "MP wiki-Talk": "message passing over the wiki-Talk graph at -O3: its DRAM reads and write-backs",
}
TRACES = {**SYNTHETIC, **CAPTURED}


def file_name(name: str) -> str:
    """A captured trace's file in traces/."""
    return name.replace(" ", "_") + ".npz"


def trace(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(lines as int64, writes as bool) of the trace called `name`."""
    if name in CAPTURED:
        with resources.files(__package__).joinpath("traces", file_name(name)).open("rb") as f:
            data = np.load(f)
            return data["lines"].astype(np.int64), data["writes"].astype(bool)
    rng = np.random.default_rng(sorted(SYNTHETIC).index(name) + 1)
    n = REQUESTS
    reads = np.zeros(n, dtype=bool)
    if name == "random reads":
        return rng.integers(0, LINES, n), reads
    if name == "sequential reads":
        return np.arange(n, dtype=np.int64), reads
    if name == "4 KiB stride reads":
        return np.arange(n, dtype=np.int64) * 64 % LINES, reads
    if name == "random 2:1 read/write":
        return rng.integers(0, LINES, n), np.arange(n) % 3 == 2
    if name == "sequential copy":
        return (np.arange(n, dtype=np.int64) // 2 + np.arange(n) % 2 * (LINES // 2)), np.arange(n) % 2 == 1
    if name == "random pairs":
        return (rng.integers(0, LINES // 2, n // 2)[:, None] * 2 + np.arange(2)).reshape(-1), reads
    raise KeyError(name)
