"""The benchmark workloads of docs/workloads.md, generated with fixed seeds.

A workload is one embedding operation at a given scale; it builds its own `emb`-level module (so
the benchmark compiles exactly what the importer would produce for that operation) and its data.
Locality levels: L0 uniform rows; L1 Zipf(0.8) and L2 Zipf(1.05) over a random permutation of rows.
Tables are independent and identically distributed, so each is simulated as its own program run
and the cycles are summed (cold caches per table).

Graph workloads at paper scale keep the whole graph as the table (every node a row, its average
degree as the pooling) but aggregate into one mini-batch of destination nodes, as GNN training
and inference do: simulating all 62 million edges of ogbn-products would take hours and say
nothing a batch does not.  The `huge` suite is one table of 100 million rows (51 GB of data),
which only timing-only runs simulate: its rows are an address range, never allocated.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

import numpy as np

from .. import dialects  # noqa: F401  (registers the ops verify checks)
from ..ir.core import Block, Op, Value, new_op, verify
from ..ir.diagnostics import EmberError
from ..ir.types import tensor

if TYPE_CHECKING:
    from ..backend.dae import Program

LOCALITY = {"L0": 0.0, "L1": 0.8, "L2": 1.05}
MODELS = {  # RM: (dim, pooling)
    "RM1": (32, 20), "RM2": (64, 40), "RM3": (128, 80),
}
SCALES = {  # tables, rows per table, bags per table
    "tiny": (1, 2_000, 4),
    "quick": (1, 20_000, 16),
    "paper": (8, 1_000_000, 512),
}
# What a workload computes; a hand-written baseline (built in, or --hand KIND=FILE) serves one.  The last five are
# the representations suite's forms (bench/forms.py FORMS).
KINDS = ("bag_sum", "bag_weighted", "gather", "qbag8", "qbag4", "ttbag", "robe", "dhe")
# The huge suite: one RM3-like table of 100 million rows, D = 128 (51.2 GB as f32), pooling 80, uniform
# rows, a batch of 4,096 bags.  Timing-only: the table is an address range, and the indices are drawn
# with `integers`, so nothing of the table's size is ever allocated.
HUGE = (100_000_000, 128, 80, 4_096)  # rows, dim, pooling, bags
# Message passing on SNAP graphs (nodes, edges); F = 16.  Aggregating x[src] into dst over a CSR by
# destination is exactly EmbeddingBag(sum) with the features as the table, the sources sorted by
# destination as indices and the CSR row pointers as offsets, so the same op (and baseline) serves.
GRAPHS = {
    "wiki-Talk": (2_394_385, 5_021_410), "roadNet-CA": (1_965_206, 2_766_607),
    "com-Youtube": (1_134_890, 2_987_624), "web-Google": (875_713, 5_105_039),
}
GRAPH_SCALES = {"tiny": (2_000, 32), "quick": (20_000, 512)}  # nodes (rows), destination nodes simulated
MP_BATCH = 4_096  # paper scale: the graph's own node count as rows, one batch of this many destination nodes
MP_FEATURES = 16
# Knowledge-graph scoring gathers head, relation and tail rows (D = 128) for a batch of triples; the
# per-triple score is dense host work, so the DAE part is the gather of 3 rows per triple.
# GNN aggregation: SpMM of a CSR adjacency with edge values by node features (F = 128), OGB shapes;
# a weighted sum EmbeddingBag per destination node.  A batch holds about this many edges: destination nodes =
# edges // average degree (at paper scale ogbn-proteins, of degree 299, gives 219 nodes; ogbn-arxiv 9,362).
GNN_BATCH_EDGES = {"tiny": 256, "quick": 2_048, "paper": 65_536}
GNN = {"arxiv": (169_343, 1_166_243), "products": (2_449_029, 61_859_140),
       "proteins": (132_534, 39_561_252), "mag": (1_939_743, 21_111_007)}
KG = {"biokg": (93_773, 51), "wikikg2": (2_500_604, 535)}  # entities, relations (ogbl-*)
KG_SCALES = {"tiny": (500, 32), "quick": (50, 512), "paper": (1, 4_096)}  # entities divided by, triples
# Block-sparse attention: each of the query blocks gathers k key and k value blocks; a block of
# `block` tokens x head dim 64 is one row of block*64 floats.  Sequence 4096, block 64 at paper scale.
SPATTN = (1, 2, 4, 8)
SPATTN_SCALES = {"tiny": (128, 8), "quick": (512, 16), "paper": (4_096, 64)}  # sequence, block
# A table row holds at most 16 tokens x 64 (4 KiB): at -O2 and up a row is marshaled as one buffer, and a
# paper-scale block (64 x 64 floats, 16 KiB) would fill the default machine's whole 16 KiB queue, which
# deadlocks.  A bigger block is stored as consecutive rows of 16 tokens, read one after the other.
SPATTN_ROW_TOKENS = 16


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
    graph: str = ""  # a SNAP graph name for message passing (bags = destination nodes, variable degree)
    weighted: bool = False  # a value per lookup scales its row (SpMM with edge values)
    virtual: bool = False  # the table is too big to hold: only timing-only runs simulate it
    split: int = 1  # a gather reads this many consecutive rows a lookup (a block stored as sub-rows)

    @cached_property
    def lookups(self) -> int:
        """Rows gathered over all tables; a graph's are its batch's edges (cached: they are generated)."""
        per_table = int(self.inputs(0)["offsets"][-1]) if self.graph else self.bags * self.pooling
        return self.tables * per_table

    @property
    def table_bytes(self) -> int:
        return self.rows * self.dim * 4

    def module(self) -> Op:
        """One table's program at level emb: out = EmbeddingBag(sum)(table, indices, offsets)."""
        idx = Value(tensor((None,) if self.graph else (self.bags * self.pooling,), "i64"), "indices")
        off = Value(tensor((self.bags + 1,), "i64"), "offsets")
        gather = self.kind == "gather"
        wts = Value(tensor((None,), "f32"), "weights")
        body = Block([idx] if gather else [idx, off, wts] if self.weighted else [idx, off])
        table = body.add(new_op("param", [], [tensor((self.rows, self.dim), "f32")], {"name": "table"})).result
        table.name = "table"
        if gather:
            out = body.add(new_op("emb.gather", [table, idx], [tensor((self.bags, self.dim), "f32")])).result
        else:
            operands = [table, idx, off] + ([wts] if self.weighted else [])
            out = body.add(new_op("emb.bag", operands, [tensor((None, self.dim), "f32")],
                                  {"mode": "sum", "empty": "zero"})).result
        out.name = "output"
        body.add(new_op("return", [out]))
        func = new_op("func", attrs={"sym_name": "main", "results": [out.type]}, regions=[body])
        names = [a.name or "" for a in body.args]
        mod = new_op("module", attrs={"inputs": names, "outputs": ["output"]}, regions=[Block([], [func])])
        func.parent = mod.body
        verify(mod)
        return mod

    def require_data(self) -> None:
        """A workload whose table only exists as an address range (`virtual`) cannot run with data."""
        if self.virtual:
            raise EmberError(f"{self.name}: its table ({self.table_bytes / 1e9:.1f} GB) holds no data; "
                             "it is simulated only with --timing-only")

    def bind(self, program: Program, t: int, table: np.ndarray | None) -> None:
        """Give the program's table params table t's data, or with none (timing-only) the table's shape: a
        hand-written program leaves that shape to the data."""
        for n, s in enumerate(program.symbols):
            if s.kind == "param":
                if table is not None:
                    program.data[n] = table
                else:
                    s.shape = (self.rows, self.dim)

    def table(self, t: int, indices: np.ndarray | None = None) -> np.ndarray:
        """Table t: standard normal values in the rows the lookups read, zeros in the others.  The zeros are
        never read and cost nothing (numpy takes them from calloc, so untouched pages stay unmapped): a
        paper-scale table costs the time of its looked-up rows, not of its million rows.  `indices` are
        inputs(t)["indices"], passed when the caller has them already."""
        self.require_data()
        if indices is None:
            indices = self.inputs(t)["indices"]
        rows = np.unique(indices)
        rng = np.random.default_rng([self.seed, t, 1])
        table = np.zeros((self.rows, self.dim), dtype=np.float32)
        table[rows] = rng.standard_normal((len(rows), self.dim), dtype=np.float32)
        return table

    def inputs(self, t: int) -> dict[str, np.ndarray]:
        """Indices (locality per `zipf`) and include-last offsets: fixed pooling, or a graph's CSR.  Each
        variant of a workload runs on the same inputs, and a paper-scale graph's take a second to draw
        (a Zipf CDF and a permutation over millions of nodes), so they are drawn once and copied out."""
        return {k: v.copy() for k, v in _cached_inputs(self, t).items()}

    def draw_inputs(self, t: int) -> dict[str, np.ndarray]:
        """inputs(t), drawn now."""
        rng = np.random.default_rng([self.seed, t, 2])
        if self.graph:
            return self._graph_inputs(rng)
        if self.kind == "gather":  # `bags` rows: `split` consecutive ones a lookup
            first = _zipf_rows(rng, self.rows // self.split, self.bags // self.split, self.zipf)
            return {"indices": (first[:, None] * self.split + np.arange(self.split)).ravel()}
        n = self.bags * self.pooling
        offsets = np.arange(0, n + 1, self.pooling, dtype=np.int64)
        return {"indices": _zipf_rows(rng, self.rows, n, self.zipf), "offsets": offsets}

    def _graph_inputs(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Edges into `bags` destination nodes, `pooling` in-edges on average: power-law endpoints
        (Zipf 0.9 over shuffled ids), or for roadNet-CA a near-diagonal mesh of nearby ids."""
        n_edges = self.bags * self.pooling
        if self.graph == "roadNet-CA":
            dst = np.sort(rng.integers(0, self.bags, size=n_edges))
            step = rng.choice(np.array([-1, 1, -64, 64]), size=n_edges)
            src = (dst * (self.rows // self.bags) + step) % self.rows
        else:
            dst = np.sort(_zipf_rows(rng, self.bags, n_edges, 0.9))
            src = _zipf_rows(rng, self.rows, n_edges, 0.9)
        counts = np.bincount(dst, minlength=self.bags)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        out = {"indices": src.astype(np.int64), "offsets": offsets}
        if self.weighted:
            out["weights"] = rng.standard_normal(len(src)).astype(np.float32)
        return out

    def reference(self, t: int, table: np.ndarray | None = None,
                  inputs: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """numpy's answer, to check every simulated run (pass the table and inputs the run used, if at hand)."""
        x = self.inputs(t) if inputs is None else inputs
        table = self.table(t, x["indices"]) if table is None else table
        rows = table[x["indices"]]
        if self.kind == "gather":
            return rows
        if self.weighted:
            rows = rows * x["weights"][:, None]
        out = np.zeros((self.bags, self.dim), dtype=np.float32)
        starts = x["offsets"][:-1]
        full = np.diff(x["offsets"]) > 0  # reduceat would give an empty bag a row, not zeros
        if rows.size:
            out[full] = np.add.reduceat(rows, starts[full], axis=0)
        return out

    def useful_bytes(self) -> int:
        """Gathered rows + indices + offsets + output, each once (the GPU baseline's definition)."""
        lookups = self.lookups // self.tables
        offsets = 0 if self.kind == "gather" else (self.bags + 1) * 8
        per_table = lookups * (self.dim * 4 + 8) + offsets + self.bags * self.dim * 4
        return self.tables * per_table


@lru_cache(maxsize=32)  # the 8 tables of a paper RM workload, across its variants
def _cached_inputs(w: Workload, t: int) -> dict[str, np.ndarray]:
    return w.draw_inputs(t)


def _zipf_rows(rng: np.random.Generator, rows: int, n: int, zipf: float) -> np.ndarray:
    """`n` row ids: uniform for zipf 0, else Zipf(zipf) ranks mapped through a random permutation."""
    if zipf == 0.0:
        return rng.integers(0, rows, size=n).astype(np.int64)
    ranks = np.arange(1, rows + 1, dtype=np.float64)
    cdf = np.cumsum(ranks ** -zipf)
    cdf /= cdf[-1]
    hot = np.minimum(np.searchsorted(cdf, rng.random(n)), rows - 1)
    return rng.permutation(rows)[hot].astype(np.int64)


def suite(scale: str, only: list[str] | None = None) -> list[Workload]:
    """The workloads of scale `scale` (or the huge suite), those whose name starts with one of `only` if given
    (suites.py adds the representation suites)."""
    if scale == "huge":
        rows, dim, pooling, bags = HUGE
        huge = [Workload("RM3_100M", "bag_sum", 1, rows, dim, pooling, bags, 0.0, virtual=True)]
        return matching(huge, only)
    if scale not in SCALES:
        raise ValueError(scale)
    tables, rows, bags = SCALES[scale]
    out = []
    for model, (dim, pooling) in MODELS.items():
        for loc, zipf in LOCALITY.items():
            out.append(Workload(f"{model}_{loc}", "bag_sum", tables, rows, dim, pooling, bags, zipf))
    for graph, (nodes, edges) in GRAPHS.items():
        g_rows, g_bags = GRAPH_SCALES.get(scale, (nodes, MP_BATCH))
        degree = max(1, round(edges / nodes))
        out.append(Workload(f"MP_{graph}", "bag_sum", 1, g_rows, MP_FEATURES, degree, g_bags, 0.9, graph=graph))
    for g, (nodes, edges) in GNN.items():
        degree = max(1, round(edges / nodes))
        g_rows = GRAPH_SCALES.get(scale, (nodes, 0))[0]
        g_bags = max(2 if scale == "tiny" else 4, GNN_BATCH_EDGES[scale] // degree)
        out.append(Workload(f"GNN_{g}", "bag_weighted", 1, g_rows, 128, degree, g_bags, 0.9, graph=g, weighted=True))
    for kg, (entities, _relations) in KG.items():
        shrink, triples = KG_SCALES[scale]
        out.append(Workload(f"KG_{kg}", "gather", 1, max(1_000, entities // shrink), 128, 1, 3 * triples, 0.0))
    seq, block = SPATTN_SCALES[scale]
    split = max(1, block // SPATTN_ROW_TOKENS)
    for k in SPATTN:  # rows: the key blocks, then the value blocks; each query block takes k of each
        blocks = seq // block
        out.append(Workload(f"SpAttn_{k}", "gather", 1, 2 * blocks * split, block * 64 // split, 1,
                            2 * blocks * k * split, 0.0, split=split))
    return matching(out, only)


def matching(workloads: list[Workload], only: list[str] | None) -> list[Workload]:
    """The workloads whose names start with one of the `only` prefixes (all of them without any)."""
    return [w for w in workloads if not only or any(w.name.startswith(o) for o in only)]
