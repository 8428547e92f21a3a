"""The benchmark workloads of WORKLOADS.md, generated with fixed seeds.

A workload is one embedding operation at a given scale; it builds its own `emb`-level module (so
the benchmark compiles exactly what the importer would produce for that operation) and its data.
Locality levels: L0 uniform rows; L1 Zipf(0.8) and L2 Zipf(1.05) over a random permutation of rows.
Tables are independent and identically distributed, so each is simulated as its own program run
and the cycles are summed (cold caches per table).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dialects  # noqa: F401  (registers the ops verify checks)
from ..ir.core import Block, Op, Value, new_op, verify
from ..ir.types import tensor

LOCALITY = {"L0": 0.0, "L1": 0.8, "L2": 1.05}
MODELS = {  # RM: (dim, pooling)
    "RM1": (32, 20), "RM2": (64, 40), "RM3": (128, 80),
}
SCALES = {  # tables, rows per table, bags per table
    "tiny": (1, 2_000, 4),
    "quick": (1, 20_000, 16),
    "paper": (8, 1_000_000, 512),
}


@dataclass(frozen=True)
class Workload:
    name: str
    kind: str  # "bag_sum"
    tables: int
    rows: int
    dim: int
    pooling: int
    bags: int
    zipf: float
    seed: int = 0

    @property
    def lookups(self) -> int:
        return self.tables * self.bags * self.pooling

    def module(self) -> Op:
        """One table's program at level emb: out = EmbeddingBag(sum)(table, indices, offsets)."""
        idx = Value(tensor((self.bags * self.pooling,), "i64"), "indices")
        off = Value(tensor((self.bags + 1,), "i64"), "offsets")
        body = Block([idx, off])
        table = body.add(new_op("param", [], [tensor((self.rows, self.dim), "f32")], {"name": "table"})).result
        table.name = "table"
        out = body.add(new_op("emb.bag", [table, idx, off], [tensor((None, self.dim), "f32")],
                              {"mode": "sum", "empty": "zero"})).result
        out.name = "output"
        body.add(new_op("return", [out]))
        func = new_op("func", attrs={"sym_name": "main", "results": [out.type]}, regions=[body])
        mod = new_op("module", attrs={"inputs": ["indices", "offsets"], "outputs": ["output"]},
                     regions=[Block([], [func])])
        func.parent = mod.body
        verify(mod)
        return mod

    def table(self, t: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, t, 1])
        return rng.standard_normal((self.rows, self.dim), dtype=np.float32)

    def inputs(self, t: int) -> dict[str, np.ndarray]:
        """Indices (bags x pooling lookups, locality per `zipf`) and include-last offsets."""
        rng = np.random.default_rng([self.seed, t, 2])
        n = self.bags * self.pooling
        if self.zipf == 0.0:
            rows = rng.integers(0, self.rows, size=n)
        else:
            ranks = np.arange(1, self.rows + 1, dtype=np.float64)
            cdf = np.cumsum(ranks ** -self.zipf)
            cdf /= cdf[-1]
            hot = np.minimum(np.searchsorted(cdf, rng.random(n)), self.rows - 1)
            rows = rng.permutation(self.rows)[hot]
        offsets = np.arange(0, n + 1, self.pooling, dtype=np.int64)
        return {"indices": rows.astype(np.int64), "offsets": offsets}

    def reference(self, t: int) -> np.ndarray:
        """numpy's answer, to check every simulated run."""
        x = self.inputs(t)
        rows = self.table(t)[x["indices"]].reshape(self.bags, self.pooling, self.dim)
        return rows.sum(axis=1, dtype=np.float32)

    def useful_bytes(self) -> int:
        """Gathered rows + indices + offsets + output, each once (the GPU baseline's definition)."""
        per_table = self.bags * self.pooling * (self.dim * 4 + 8) + (self.bags + 1) * 8 + self.bags * self.dim * 4
        return self.tables * per_table


def suite(scale: str, only: list[str] | None = None) -> list[Workload]:
    if scale not in SCALES:
        raise ValueError(scale)
    tables, rows, bags = SCALES[scale]
    out = []
    for model, (dim, pooling) in MODELS.items():
        for loc, zipf in LOCALITY.items():
            name = f"{model}_{loc}"
            if only and not any(name.startswith(o) for o in only):
                continue
            out.append(Workload(name, "bag_sum", tables, rows, dim, pooling, bags, zipf))
    return out
