"""Work counts: the least an embedding operation needs, whatever code computes it.

A speed-of-light bound judged against a program must not come from that program, or a program
that does less than the operation needs would raise its own bar.  Each program's `.work` records
(`ember/backend/dae.py`) say which embedding operations it computes on which of its symbols, and
`work_counts` counts them from the tensors' values alone.  Every variant of a workload (-O0..-O3,
core-only, hand-written) computes the same operations on the same data, so all get the same counts.

Row widths are in elements of the table; a vector *chunk* is `elem_lanes(table itemsize)` of them
(16 for f32 on a 512-bit machine).  A narrow (f16, bf16) table's chunks are counted at its own
width, so they never exceed what a wider accumulator needs: the counts stay lower bounds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from ..backend.dae import Program, Work
from ..ir.diagnostics import EmberError
from .tensors import Tensors, dtype_of

Values = Callable[[int], np.ndarray | None]  # a symbol's final array, or None when it holds no data


@dataclass(frozen=True)
class WorkCounts:
    """What the operations of a run need at the very least (summed over records, and over runs with +)."""

    lookups: int = 0  # table rows that must be read: index entries, less the padding_idx ones a bag skips
    distinct_rows: int = 0  # distinct table rows among them (a wrapped negative index counts as its row)
    compulsory_bytes: int = 0  # distinct rows, every index/offset/target/weight, a scatter's data and the output, once
    vector_fp_ops: int = 0  # fewest vector float ops: a reduction's combines of the distinct rows of each bag, by chunk
    row_chunks: int = 0  # fewest vector reads of row data by the core: distinct rows x chunks
    output_chunks: int = 0  # fewest vector stores of results: output rows x chunks

    def __add__(self, other: WorkCounts) -> WorkCounts:
        return WorkCounts(*(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))))

    @staticmethod
    def total(counts: Iterable[WorkCounts]) -> WorkCounts:
        """The sum of several runs' counts (cores, tables); all zeros for none."""
        return sum(counts, WorkCounts())


def work_counts(program: Program, value: Values, elem_lanes: Callable[[int], int]) -> WorkCounts:
    """The counts of every `.work` record of `program`, from the final tensor values `value(sym)`.

    Only a table (or a scatter's data) may have no value, as in a timing-only run: its declared shape is
    used instead.  Indices, offsets, targets and weights must have values.  `elem_lanes(itemsize)` is the
    machine's vector lanes for elements of that many bytes."""
    return WorkCounts.total(_record(program, i, w, value, elem_lanes) for i, w in enumerate(program.work))


def tensor_values(t: Tensors) -> Values:
    """`value` for `work_counts` from a reference-engine run's tensors (None where a symbol got no data)."""
    return lambda n: t.arrays[n]


def named_values(program: Program, inputs: dict[str, np.ndarray]) -> Values:
    """`value` from what a run starts with: inputs by name and the program's param data.  Enough when the
    records name only inputs and params (a temp, such as an exporter's offsets, needs the run's tensors)."""
    def value(n: int) -> np.ndarray | None:
        s = program.symbols[n]
        if s.kind == "input":
            return np.asarray(inputs[s.name]) if s.name in inputs else None
        return program.data.get(n) if s.kind == "param" else None

    return value


def vector_lanes(bits: int) -> Callable[[int], int]:
    """`elem_lanes` for vectors of `bits` bits (512: 16 four-byte lanes)."""
    return lambda itemsize: max(1, bits // (8 * itemsize))


def _record(p: Program, i: int, w: Work, value: Values, elem_lanes: Callable[[int], int]) -> WorkCounts:
    """One record's counts; see WorkCounts for what each one means."""
    assert w.table is not None and w.output is not None
    table_shape = _shape(p, i, w.table, value)
    width = math.prod(table_shape[1:])
    itemsize = dtype_of(p.symbols[w.table].dtype).itemsize
    chunks = -(-width // elem_lanes(itemsize))
    out_item = dtype_of(p.symbols[w.output].dtype).itemsize
    if w.kind == "scatter_rows":  # update e is row e of `table`: each read once, in order
        assert w.targets is not None and w.data is not None
        targets = _need(p, i, w.targets, value)
        lookups = distinct = targets.size
        out_rows = _shape(p, i, w.data, value)[0]
        other_bytes = targets.nbytes + out_rows * width * dtype_of(p.symbols[w.data].dtype).itemsize
        pairs = bags = 0
        fp_ops = lookups * chunks
    else:
        assert w.indices is not None
        indices = _need(p, i, w.indices, value)
        if w.kind == "gather":
            read = indices.reshape(-1)
            out_rows, other_bytes = read.size, read.nbytes
        else:
            assert w.offsets is not None
            offsets = _need(p, i, w.offsets, value).astype(np.int64)
            positions, bag = _bag_positions(offsets)
            read = indices[positions]
            out_rows = len(offsets) - 1
            other_bytes = read.nbytes + offsets.nbytes
            if w.weights is not None:
                weights = _need(p, i, w.weights, value)
                other_bytes += positions.size * weights.itemsize
        rows = read.astype(np.int64)
        if w.negative == "wrap":
            rows = np.where(rows < 0, rows + table_shape[0], rows)
        kept = rows != w.padding_idx if w.padding_idx is not None else np.ones(rows.size, dtype=bool)
        rows = rows[kept]
        lookups, distinct = rows.size, np.unique(rows).size
        if w.kind == "gather":
            pairs = bags = 0
        else:
            pairs, bags = _pairs(bag[kept], rows)
        fp_ops = combines(pairs, bags, w.weights is not None) * chunks
    if w.kind == "dhe":
        return _deep_hash(p, i, w, value, int(lookups), int(distinct), pairs, other_bytes, out_rows, out_item,
                          elem_lanes)
    if w.kind == "robe":  # rows of the output's width, from blocks that may overlap: only one block is sure, and
        # only when there is a lookup at all
        dim = p.symbols[w.output].shape[1] or int(_need(p, i, w.output, value).shape[1])
        chunks = -(-dim // elem_lanes(4))
        return WorkCounts(lookups=int(lookups), distinct_rows=int(distinct),
                          compulsory_bytes=int((min(table_shape[0], w.block or 1) * itemsize if lookups else 0)
                                               + other_bytes
                                               + out_rows * dim * out_item),
                          vector_fp_ops=int(combines(pairs, bags, w.weights is not None) * chunks),
                          row_chunks=int(distinct * -(-dim // elem_lanes(itemsize))),
                          output_chunks=int(out_rows * chunks))
    if w.kind == "ttbag":
        return _train(p, i, w, value, rows, pairs, other_bytes, out_rows, elem_lanes)
    if w.kind == "qbag":
        return _quantized(w, table_shape[1], lookups, distinct, pairs, other_bytes, out_rows, elem_lanes)
    return WorkCounts(
        lookups=int(lookups),
        distinct_rows=int(distinct),
        compulsory_bytes=int(distinct * width * itemsize + other_bytes + out_rows * width * out_item),
        vector_fp_ops=int(fp_ops),
        row_chunks=int(distinct * chunks),
        output_chunks=int(out_rows * chunks),
    )


def _pairs(bag: np.ndarray, rows: np.ndarray) -> tuple[int, int]:
    """(distinct (bag, row) pairs, bags with at least one row) of a bag operation's lookups."""
    if rows.size == 0:
        return 0, 0
    low = int(rows.min())
    span = int(rows.max()) - low + 1
    return int(np.unique(bag * span + (rows - low)).size), int(np.unique(bag).size)


def combines(pairs: int, bags: int, weighted: bool) -> int:
    """The fewest vector ops a chunk of a reduction needs: a bag's k distinct rows take k - 1 combines (its first
    row is the accumulator's start, a repeated row one op with its count folded in), a weighted bag's a multiply
    or fused multiply-add each, and a mean's divide folds into them (a multiply by 1/n in each)."""
    return pairs if weighted else pairs - bags


def _quantized(w: Work, row_bytes: int, lookups: int, distinct: int, pairs: int, other_bytes: int,
               out_rows: int, elem_lanes: Callable[[int], int]) -> WorkCounts:
    """A quantized bag (emb.qbag), its width D from the table's and `bits` alone: each distinct row's bytes once,
    read by the core once; each distinct row of a bag converts each float32 chunk of its codes (vcvt: vector
    arithmetic takes floats) and scales it into the accumulator (one fused multiply-add); the biases are scalars
    a bag can sum and fold into its first multiply-add."""
    code_bytes = row_bytes - (8 if w.bits == 8 else 4)
    dim = code_bytes * (8 // (w.bits or 8))
    chunks = -(-dim // elem_lanes(4))
    return WorkCounts(
        lookups=int(lookups),
        distinct_rows=int(distinct),
        compulsory_bytes=int(distinct * row_bytes + other_bytes + out_rows * dim * 4),
        vector_fp_ops=int(pairs * chunks * 2),
        row_chunks=int(distinct * -(-code_bytes // elem_lanes(1))),
        output_chunks=int(out_rows * chunks),
    )


def _deep_hash(p: Program, i: int, w: Work, value: Values, lookups: int, distinct: int, pairs: int,
               other_bytes: int, out_rows: int, out_item: int, elem_lanes: Callable[[int], int]) -> WorkCounts:
    """A bag over deep hash embeddings (emb.dhe): the layers' multiply-adds once per distinct index, the last one
    accumulating into its bag (a program may keep a row it computed and add it again for the same index in
    another bag, bit for bit the same: an add per chunk); the weights read at least once, but only when there is
    a lookup at all."""
    shapes = [_shape(p, i, c, value) for c in w.cores()]
    dim, lanes = shapes[-1][0], elem_lanes(4)
    chunks = -(-dim // lanes)
    weights = sum(math.prod(s) for s in shapes) if lookups else 0
    return WorkCounts(lookups=lookups, distinct_rows=distinct,
                      compulsory_bytes=int(weights * 4 + other_bytes + out_rows * dim * out_item),
                      vector_fp_ops=int(distinct * -(-weights // lanes) + (pairs - distinct) * chunks),
                      row_chunks=int(sum(-(-math.prod(s) // lanes) for s in shapes) if lookups else 0),
                      output_chunks=int(out_rows * chunks))


def _train(p: Program, i: int, w: Work, value: Values, rows: np.ndarray, pairs: int, other_bytes: int,
           out_rows: int, elem_lanes: Callable[[int], int]) -> WorkCounts:
    """A bag over a tensor train (emb.ttbag): a lookup needs one slice of each core, picked by a digit of its index;
    each distinct slice is read from memory once and each distinct row's are read by the core.  A row is contracted
    once, one vector fused multiply-add per `lanes` multiply-adds, the last accumulating into its bag (pooling adds
    nothing, and a mean's 1/n folds into the last factor); the same row in another bag can add the row kept from
    before, a chunk's add.  Distinct rows that agree on the digits of neighbouring cores may share the partial
    product over them (shared_chain_macs); a row that shares no two neighbouring digits with another reads all its
    slices, one that does at least one, the smallest."""
    shapes = [_shape(p, i, c, value) for c in w.cores()]
    p_, ranks, q = [s[0] for s in shapes], [s[1] for s in shapes] + [1], [s[2] for s in shapes]
    slices = [ranks[k] * q[k] * ranks[k + 1] for k in range(len(shapes))]
    lanes, dim = elem_lanes(4), math.prod(q)
    distinct_slices = 0
    for k in range(len(shapes)):
        digits = (rows // math.prod(p_[k + 1:])) % p_[k] if len(rows) else rows
        distinct_slices += np.unique(digits).size * slices[k]
    chunks = -(-dim // lanes)
    lookups, distinct = rows.size, np.unique(rows)
    alone = _alone(distinct, p_)
    fp_ops = -(-shared_chain_macs(distinct, p_, ranks, q) // lanes) + (pairs - distinct.size) * chunks
    return WorkCounts(
        lookups=int(lookups),
        distinct_rows=int(distinct.size),
        compulsory_bytes=int(distinct_slices * 4 + other_bytes + out_rows * dim * 4),
        vector_fp_ops=int(fp_ops),
        row_chunks=int(alone * -(-sum(slices) // lanes) + (distinct.size - alone) * -(-min(slices) // lanes)),
        output_chunks=int(out_rows * chunks),
    )


def _alone(rows: np.ndarray, p: list[int]) -> int:
    """How many of the distinct `rows` of a train with digit bases `p` share no pair of neighbouring digits (k, k+1)
    with another row: no product over two or more cores can serve another row of theirs."""
    if len(p) < 3 or not rows.size:  # two cores: a pair of digits is the whole row
        return int(rows.size)
    digits = [(rows // math.prod(p[k + 1:])) % p[k] for k in range(len(p))]
    alone = np.ones(rows.size, dtype=bool)
    for k in range(len(p) - 1):
        _, where, count = np.unique(digits[k] * p[k + 1] + digits[k + 1], return_inverse=True, return_counts=True)
        alone &= count[where] == 1
    return int(alone.sum())


def shared_chain_macs(rows: np.ndarray, p: list[int], ranks: list[int], q: list[int]) -> int:
    """The fewest multiply-adds that contract the distinct `rows` of a train, when rows agreeing on the digits of
    cores a..b may share one product over those cores: matrix-chain order for each row, where joining a..m and
    m+1..b costs as in chain_macs divided by the number of rows that could share the product over a..b (each row
    pays at least its share of every product it uses).  A row that shares nothing costs chain_macs."""
    n = len(p)
    if not rows.size:
        return 0
    sharers = {}
    for a in range(n):
        for b in range(a + 1, n):
            key = (rows // math.prod(p[b + 1:])) % math.prod(p[a:b + 1])
            _, where, count = np.unique(key, return_inverse=True, return_counts=True)
            sharers[a, b] = count[where.reshape(-1)]
    best = {(k, k): np.zeros(rows.size) for k in range(n)}
    for span in range(1, n):
        for a in range(n - span):
            b = a + span
            best[a, b] = np.min([best[a, m] + best[m + 1, b] + ranks[a] * math.prod(q[a:m + 1]) * ranks[m + 1]
                                 * math.prod(q[m + 1:b + 1]) * ranks[b + 1] / sharers[a, b] for m in range(a, b)],
                                axis=0)
    return math.floor(float(best[0, n - 1].sum()) + 1e-6)


def chain_macs(ranks: list[int], q: list[int]) -> int:
    """The fewest multiply-adds that contract a tensor train's slices into one row: the matrix-chain order over
    cores k of R_k x q_k x R_k+1, where joining the products of cores a..m and m+1..b costs
    R_a * (q_a ... q_m) * R_m+1 * (q_m+1 ... q_b) * R_b+1."""
    n = len(q)
    best = {(k, k): 0 for k in range(n)}
    for span in range(1, n):
        for a in range(n - span):
            b = a + span
            best[a, b] = min(best[a, m] + best[m + 1, b] + ranks[a] * math.prod(q[a:m + 1]) * ranks[m + 1]
                             * math.prod(q[m + 1:b + 1]) * ranks[b + 1] for m in range(a, b))
    return best[0, n - 1]


def _bag_positions(offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The index positions the bags read, bag after bag: [offsets[b], offsets[b+1]) for each b (a bag whose
    end is before its start reads nothing, as its loop runs no iteration), and the bag of each."""
    starts = offsets[:-1]
    lengths = np.maximum(offsets[1:] - starts, 0)
    first = np.cumsum(lengths) - lengths  # where each bag's run starts in the result
    total = int(lengths.sum())
    bag = np.repeat(np.arange(len(starts), dtype=np.int64), lengths)
    return np.repeat(starts - first, lengths) + np.arange(total, dtype=np.int64), bag


def _need(p: Program, i: int, n: int, value: Values) -> np.ndarray:
    """The value of a symbol a record reads that must have data."""
    a = value(n)
    if a is None:
        raise EmberError(f"work record {i}: symbol @{n} ('{p.symbols[n].name}') has no value to count from")
    return np.asarray(a)


def _shape(p: Program, i: int, n: int, value: Values) -> tuple[int, ...]:
    """A symbol's shape: its value's, else (timing-only) its declared one, which must then be static."""
    a = value(n)
    if a is not None:
        return tuple(np.shape(a))
    shape = p.symbols[n].shape
    if any(d is None for d in shape):
        raise EmberError(f"work record {i}: symbol @{n} ('{p.symbols[n].name}') has neither a value nor a "
                         "static shape")
    return tuple(d for d in shape if d is not None)
