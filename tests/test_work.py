"""Work records and counts: every compiled program records the emb ops it computes, the records name the
tensors that really hold their operands and results, and `work_counts` gives every variant of a workload
the counts numpy computes from the workload's own inputs."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS, compile_model

from ember.backend.dae import Instr, Program, Symbol, Work
from ember.bench.run import VARIANTS, compile_variant
from ember.bench.workloads import Workload, suite
from ember.ir.diagnostics import EmberError
from ember.sim.host import run_host
from ember.sim.tensors import Tensors
from ember.sim.work import WorkCounts, named_values, tensor_values, vector_lanes, work_counts

LANES = vector_lanes(512)
TINY = suite("tiny")


# ----------------------------------------------------------------------------- the benchmark suite


def bind(program: Program, table: np.ndarray) -> Program:
    """The workload's table as every param's data, as ember-bench gives it."""
    for n, s in enumerate(program.symbols):
        if s.kind == "param":
            program.data[n] = table
    return program


def reference_counts(w: Workload, inputs: dict[str, np.ndarray]) -> WorkCounts:
    """The counts of one table of `w`, from its inputs and shape with numpy alone (no program, no records)."""
    idx = inputs["indices"]
    chunks = math.ceil(w.dim / 16)
    row_bytes = w.dim * 4
    distinct = len(np.unique(idx))
    if w.kind == "gather":
        n = idx.size
        return WorkCounts(lookups=n, distinct_rows=distinct, compulsory_bytes=distinct * row_bytes + idx.nbytes
                          + n * row_bytes, vector_fp_ops=0, row_chunks=distinct * chunks, output_chunks=n * chunks)
    off = inputs["offsets"]
    assert off[0] == 0 and off[-1] == len(idx)  # every index is in a bag
    weights = inputs.get("weights", np.zeros(0, np.float32))
    n, bags = len(idx), len(off) - 1
    # a bag's k distinct rows: k - 1 adds a chunk (k multiply-adds when weighted)
    rows_of = [set(idx[off[b]:off[b + 1]].tolist()) for b in range(bags)]
    ops = sum(len(r) if "weights" in inputs else max(len(r) - 1, 0) for r in rows_of)
    return WorkCounts(lookups=n, distinct_rows=distinct,
                      compulsory_bytes=distinct * row_bytes + idx.nbytes + off.nbytes + weights.nbytes
                      + bags * row_bytes,
                      vector_fp_ops=ops * chunks, row_chunks=distinct * chunks, output_chunks=bags * chunks)


@pytest.mark.parametrize("w", TINY, ids=lambda w: w.name)
def test_every_variant_of_every_tiny_workload_has_numpys_counts(w: Workload) -> None:
    inputs = w.inputs(0)
    table = w.table(0, inputs["indices"])
    want = reference_counts(w, inputs)
    for variant in VARIANTS:
        p = bind(compile_variant(w, variant), table)
        assert len(p.work) == 1, variant
        assert p.work[0].kind == ("gather" if w.kind == "gather" else "bag"), variant
        assert work_counts(p, named_values(p, inputs), LANES) == want, variant
        # timing-only: the table is an address range of its declared shape, and the counts do not change
        timing = compile_variant(w, variant)
        for s in timing.symbols:
            if s.kind == "param":
                s.shape = (w.rows, w.dim)
        assert work_counts(timing, named_values(timing, inputs), LANES) == want, variant


def test_tensor_values_reads_a_runs_tensors() -> None:
    w = next(x for x in TINY if x.weighted)
    inputs = w.inputs(0)
    table = w.table(0, inputs["indices"])
    p = bind(compile_variant(w, "O3"), table)
    t = Tensors(p)
    for n, s in enumerate(p.symbols):
        if s.kind == "input":
            t.set(n, inputs[s.name], s.name)
        elif s.kind == "param":
            t.set(n, table, s.name)
    assert work_counts(p, tensor_values(t), LANES) == reference_counts(w, inputs)


# ----------------------------------------------------------------------------- hand-made records


def program(symbols: list[tuple[str, str, tuple[int | None, ...]]], *work: Work) -> Program:
    p = Program(symbols=[Symbol("input", f"x{i}", dt, shape) for i, (_, dt, shape) in enumerate(symbols)],
                code=[Instr("halt")], work=list(work))
    for s, (kind, _, _) in zip(p.symbols, symbols):
        s.kind = kind
    return p


def counts(p: Program, values: dict[int, np.ndarray | None], lanes: int = 512) -> WorkCounts:
    return work_counts(p, values.get, vector_lanes(lanes))


def test_gather_wraps_negative_indices_to_the_rows_they_name() -> None:
    table = np.zeros((5, 20), np.float32)
    idx = np.array([[3, -2], [3, 3]], np.int64)  # -2 is row 3 when wrapped
    p = program([("param", "f32", (5, 20)), ("input", "i64", (2, 2)), ("output", "f32", (2, 2, 20))],
                Work("gather", table=0, indices=1, output=2, negative="wrap"))
    got = counts(p, {0: table, 1: idx})
    # 20 floats are 2 chunks of 16; one distinct row of 80 bytes; 4 indices of 8 bytes; 4 output rows
    assert got == WorkCounts(lookups=4, distinct_rows=1, compulsory_bytes=80 + 32 + 320, vector_fp_ops=0,
                             row_chunks=2, output_chunks=8)  # the one row read once, stored four times
    unwrapped = program([("param", "f32", (5, 20)), ("input", "i64", (2, 2)), ("output", "f32", (2, 2, 20))],
                        Work("gather", table=0, indices=1, output=2))
    assert counts(unwrapped, {0: table, 1: idx}).distinct_rows == 2  # -2 taken as it stands


BAG_SYMS = [("param", "f32", (10, 8)), ("input", "i64", (5,)), ("input", "i64", (4,)), ("output", "f32", (3, 8)),
            ("input", "f32", (5,))]
IDX = np.array([1, 0, 1, 0, 2], np.int64)
OFF = np.array([0, 2, 2, 5], np.int64)  # three bags, the middle one empty


def bag(mode: str = "sum", **kw: object) -> Program:
    return program(BAG_SYMS, Work("bag", mode, table=0, indices=1, offsets=2, output=3, empty="zero", **kw))


def test_bag_with_padding_idx_reads_every_index_but_not_the_padding_rows() -> None:
    got = counts(bag(padding_idx=0), {0: None, 1: IDX, 2: OFF})
    valid = IDX[IDX != 0]
    assert (got.lookups, got.distinct_rows) == (3, 2) == (len(valid), len(np.unique(valid)))
    # 8 floats: one chunk; rows 1 and 2 once (32 B each), 5 indices and 4 offsets (8 B), 3 output rows
    assert got.compulsory_bytes == 2 * 32 + 5 * 8 + 4 * 8 + 3 * 32
    # bag 0 reads row 1, bag 2 rows 1 and 2: one add; rows 1 and 2 read once; three output rows stored
    assert (got.vector_fp_ops, got.row_chunks, got.output_chunks) == (1, 2, 3)


def test_a_bag_combines_its_distinct_rows_and_mean_and_max_cost_what_sum_does() -> None:
    """Bags {1, 0}, {} and {1, 0, 2}: 1 + 2 combines of the distinct rows; a mean's 1/n folds into a multiply-add."""
    base = counts(bag("sum"), {1: IDX, 2: OFF})
    assert (base.lookups, base.distinct_rows, base.vector_fp_ops, base.row_chunks) == (5, 3, 3, 3)
    assert counts(bag("mean"), {1: IDX, 2: OFF}) == base
    assert counts(bag("max"), {1: IDX, 2: OFF}) == base
    wide = counts(bag("mean"), {1: IDX, 2: OFF}, lanes=128)  # 4 lanes: 2 chunks a row
    assert (wide.vector_fp_ops, wide.row_chunks, wide.output_chunks) == (3 * 2, 3 * 2, 3 * 2)


def test_a_row_repeated_in_its_bag_is_one_combine() -> None:
    """A bag of row 4 three times is 3 x row 4: no add is needed (a multiply by the count at most)."""
    got = counts(bag(), {1: np.array([4, 4, 4, 0, 2]), 2: np.array([0, 3, 3, 5])})
    assert (got.lookups, got.distinct_rows, got.vector_fp_ops, got.row_chunks) == (5, 3, 1, 3)


def test_weighted_bag_counts_each_weight_once_and_a_fused_multiply_add_as_one_op() -> None:
    plain = counts(bag(), {1: IDX, 2: OFF})
    got = counts(bag(weights=4), {1: IDX, 2: OFF, 4: np.ones(5, np.float32)})
    assert got.compulsory_bytes == plain.compulsory_bytes + 5 * 4
    # every distinct row of a bag is scaled by its weight: a bag's first row needs its multiply too
    assert (got.vector_fp_ops, got.lookups) == (plain.vector_fp_ops + 2, plain.lookups)


def test_a_tensor_train_bag_counts_each_distinct_slice_once_and_the_cheapest_chain() -> None:
    """Cores 6x1x4x5 and 7x5x3x1 (p = 6, 7; q = 4, 3; ranks 1, 5, 1): slices of 20 and 15 floats, rows of 12.
    Indices 0, 8, 8, 41 in two bags (offsets 0, 2, 4): digits (x // 7, x % 7) = (0, 0), (1, 1), (1, 1), (5, 6)."""
    p = program([("param", "f32", (6, 1, 4, 5)), ("param", "f32", (7, 5, 3, 1)), ("input", "i64", (4,)),
                 ("input", "i64", (3,)), ("output", "f32", (2, 12))],
                Work("ttbag", "sum", table=0, part1=1, indices=2, offsets=3, output=4, rows=42))
    got = counts(p, {2: np.array([0, 8, 8, 41]), 3: np.array([0, 2, 4])})
    # 3 distinct digits of each core: 3 x 20 + 3 x 15 floats; 4 indices and 3 offsets of 8 bytes; 2 rows out
    assert got.compulsory_bytes == (3 * 20 + 3 * 15) * 4 + 7 * 8 + 2 * 12 * 4
    # 3 distinct rows, each 1*4*5*3*1 = 60 multiply-adds (two cores: one order), 180 in 16-lane fmas; the
    # repeated 8 adds its kept row (one chunk of 12 floats)
    assert (got.lookups, got.distinct_rows, got.vector_fp_ops) == (4, 3, 12 + 1)
    assert (got.row_chunks, got.output_chunks) == (3 * 3, 2)  # 35 floats are 3 chunks a row, each row read once
    narrow = counts(p, {2: np.array([0, 8, 8, 41]), 3: np.array([0, 2, 4])}, lanes=128)  # 4 lanes: rows of 3 chunks
    assert (narrow.vector_fp_ops, narrow.row_chunks, narrow.output_chunks) == (180 // 4 + 3, 3 * 9, 2 * 3)


def test_a_deep_hash_bag_counts_its_mlp_once_per_distinct_index() -> None:
    """Layers 6 -> 5 -> 4 -> 3 (weights 5x6, 4x5, 3x4: 62 floats); indices 3, 3, 9 in bags (0, 1, 3)."""
    p = program([("param", "f32", (5, 6)), ("param", "f32", (4, 5)), ("param", "f32", (3, 4)), ("input", "i64", (3,)),
                 ("input", "i64", (3,)), ("output", "f32", (2, 3))],
                Work("dhe", "sum", table=0, part1=1, part2=2, indices=3, offsets=4, output=5))
    got = counts(p, {3: np.array([3, 3, 9]), 4: np.array([0, 1, 3])})
    assert got.compulsory_bytes == 62 * 4 + 6 * 8 + 2 * 3 * 4  # the weights once, indices and offsets, output
    # 2 distinct indices run the MLP: 62 multiply-adds in 4 fmas of 16 lanes each; the repeated 3 adds a chunk
    assert (got.lookups, got.distinct_rows, got.vector_fp_ops) == (3, 2, 2 * 4 + 1)
    assert (got.row_chunks, got.output_chunks) == (2 + 2 + 1, 2)  # 30, 20 and 12 floats
    mean = counts(program([("param", "f32", (5, 6)), ("param", "f32", (4, 5)), ("param", "f32", (3, 4)),
                           ("input", "i64", (3,)), ("input", "i64", (3,)), ("output", "f32", (2, 3))],
                          Work("dhe", "mean", table=0, part1=1, part2=2, indices=3, offsets=4, output=5)),
                  {3: np.array([3, 3, 9]), 4: np.array([0, 1, 3])})
    assert mean.vector_fp_ops == got.vector_fp_ops  # 1/n folds into the last layer's multiply-adds
    assert counts(p, {3: np.zeros(0, np.int64), 4: np.array([0, 0, 0])}).compulsory_bytes == 3 * 8 + 2 * 3 * 4


def test_a_robe_bag_counts_one_sure_block_and_each_distinct_row() -> None:
    """A 64-element array in blocks of 4, rows of 8; indices 3, 3, 9 in bags (0, 1, 3).  Blocks of different
    rows may overlap, so only one block (4 floats) is sure to be read, and only when there is a lookup."""
    p = program([("param", "f32", (64,)), ("input", "i64", (3,)), ("input", "i64", (3,)), ("output", "f32", (2, 8))],
                Work("robe", "sum", table=0, indices=1, offsets=2, output=3, block=4))
    got = counts(p, {1: np.array([3, 3, 9]), 2: np.array([0, 1, 3])})
    # bags {3} and {3, 9}: one add; rows 3 and 9 read once
    assert got == WorkCounts(lookups=3, distinct_rows=2, compulsory_bytes=4 * 4 + 6 * 8 + 2 * 8 * 4,
                             vector_fp_ops=1, row_chunks=2, output_chunks=2)
    none = counts(p, {1: np.zeros(0, np.int64), 2: np.array([0, 0, 0])})
    assert none.compulsory_bytes == 3 * 8 + 2 * 8 * 4


def test_bags_read_only_the_indices_their_offsets_cover() -> None:
    got = counts(bag(), {1: IDX, 2: np.array([1, 3, 3, 4])})  # positions 1, 2 and 3: rows 0, 1, 0
    assert (got.lookups, got.distinct_rows, got.output_chunks) == (3, 2, 3)
    assert got.vector_fp_ops == 1  # bags {0, 1}, {} and {0}


def test_scatter_rows_reads_each_update_row_once_and_the_data_once() -> None:
    p = program([("input", "f32", (6, 4)), ("input", "i64", (3,)), ("input", "f32", (3, 4)),
                 ("output", "f32", (6, 4))],
                Work("scatter_rows", "max", table=2, targets=1, data=0, output=3))
    targets = np.array([5, 0, 5], np.int64)
    got = counts(p, {0: np.zeros((6, 4), np.float32), 1: targets, 2: np.ones((3, 4), np.float32)})
    # 3 update rows of 16 B, 3 targets of 8 B, the data and the output (6 rows of 16 B each)
    assert got == WorkCounts(lookups=3, distinct_rows=3, compulsory_bytes=48 + 24 + 96 + 96, vector_fp_ops=3,
                             row_chunks=3, output_chunks=6)
    assert counts(p, {1: targets}) == got  # data and updates known by their declared shapes (timing-only)


def test_narrow_tables_count_chunks_at_their_own_width() -> None:
    p = program([("param", "f16", (10, 40)), ("input", "i64", (5,)), ("input", "i64", (4,)),
                 ("output", "f16", (3, 40))], Work("bag", "sum", table=0, indices=1, offsets=2, output=3,
                                                   empty="identity"))
    got = counts(p, {1: IDX, 2: OFF})
    assert (got.row_chunks, got.output_chunks) == (3 * 2, 3 * 2)  # 40 halves: 2 chunks of 32 lanes
    assert got.compulsory_bytes == 3 * 80 + 5 * 8 + 4 * 8 + 3 * 80


def test_counts_add_up_across_records_and_runs() -> None:
    one = bag()
    two = program(BAG_SYMS, *(one.work * 2))
    a = counts(one, {1: IDX, 2: OFF})
    assert counts(two, {1: IDX, 2: OFF}) == a + a == WorkCounts.total([a, a])
    assert WorkCounts.total([]) == WorkCounts() == counts(Program(), {})


def test_an_index_without_a_value_is_an_error_naming_the_record() -> None:
    with pytest.raises(EmberError, match=r"work record 0: symbol @2 \('x2'\) has no value"):
        counts(bag(), {1: IDX})
    dynamic = program([("param", "f32", (None, 8)), *BAG_SYMS[1:]],
                      Work("bag", "sum", table=0, indices=1, offsets=2, output=3, empty="zero"))
    with pytest.raises(EmberError, match="neither a value nor a static shape"):
        counts(dynamic, {1: IDX, 2: OFF})


# ----------------------------------------------------------------------------- the sample models


def _apply(w: Work, v: dict[int, np.ndarray], p: Program) -> np.ndarray:
    """What record `w` says its output holds, computed with numpy from the values of its symbols."""
    assert w.table is not None and w.output is not None
    table = v[w.table].astype(np.float64)
    out_dtype = np.dtype(v[w.table].dtype) if w.kind != "scatter_rows" else v[w.data].dtype  # type: ignore[index]
    if w.kind == "gather":
        idx = v[w.indices]  # type: ignore[index]
        return table[_rows(np.where(idx < 0, idx + len(table), idx) if w.negative == "wrap" else idx)].astype(
            out_dtype)
    if w.kind == "scatter_rows":
        out = v[w.data].astype(np.float64)  # type: ignore[index]
        op = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[w.mode]
        for e, t in enumerate(v[w.targets]):  # type: ignore[index]
            out[t] = op(out[t], table[e])
        return out.astype(out_dtype)
    idx, off = v[w.indices], v[w.offsets]  # type: ignore[index]
    weights = v[w.weights] if w.weights is not None else np.ones(len(idx))
    out = np.zeros((len(off) - 1, table.shape[1]))
    for b in range(len(off) - 1):
        rows, wts = idx[off[b]:off[b + 1]], weights[off[b]:off[b + 1]]
        keep = rows != w.padding_idx if w.padding_idx is not None else np.ones(len(rows), bool)
        r = table[_rows(rows[keep])] * wts[keep][:, None]
        if len(r):
            out[b] = {"sum": r.sum(0), "mean": r.mean(0), "max": r.max(0)}[w.mode]
        elif w.mode == "max" and w.empty == "identity":
            out[b] = -np.inf
    return out.astype(out_dtype)


def _rows(idx: np.ndarray) -> np.ndarray:
    """Row numbers as the simulator takes them: numpy would count a negative one from the end unasked."""
    if (idx < 0).any():
        raise IndexError(f"negative row {idx.min()}")
    return idx


def _evaluate(p: Program, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The program's outputs with its loops replaced by what its records say: host ops and records in any
    order their operands allow.  Equal to the model's reference only if the records are complete and name
    the tensors the loops really read and write."""
    v: dict[int, np.ndarray] = {n: np.asarray(inputs[s.name]) for n, s in enumerate(p.symbols) if s.kind == "input"}
    v.update(p.data)
    pending: list[Instr | Work] = [i for i in p.code if isinstance(i, Instr) and i.op == "host"] + list(p.work)
    while pending:
        ready = next((x for x in pending if all(n in v for n in _reads(x))), None)
        assert ready is not None, f"nothing can run: {pending}"
        pending.remove(ready)
        if isinstance(ready, Work):
            assert ready.output is not None
            v[ready.output] = _apply(ready, v, p)
        else:
            op_type, ins, outs, attrs = ready.args
            for o, a in zip(outs, run_host(op_type, [v[s.n] for s in ins], len(outs), attrs, p.opset)):
                v[o.n] = a
    return {s.name: v[n] for n, s in enumerate(p.symbols) if s.kind == "output"}


def _reads(x: Instr | Work) -> list[int]:
    if isinstance(x, Work):
        return [n for f, n in x.symbols().items() if f != "output"]
    return [s.n for s in x.args[1]]


def _samples() -> list[str]:
    names = [p.name for p in MODELS.glob("*.onnx")] + [p.name for p in MODELS.glob("*.pt2")]
    names += [p.name for p in MODELS.glob("*.traced.pt")]
    return sorted(n for n in names if (MODELS / _expected(n)).exists())


def _expected(model: str) -> str:
    return model.replace(".onnx", ".out.npz") if model.endswith(".onnx") else f"{model.split('.')[0]}.torch.out.npz"


@pytest.mark.parametrize("level", ["O0", "O3", "core"])
@pytest.mark.parametrize("model", _samples())
def test_records_of_every_sample_compute_the_models_outputs(model: str, level: str) -> None:
    p = compile_model(MODELS / model, level)  # through the binary, as ember-sim sees it
    assert p.work, "a model with emb ops has records"
    inputs = dict(np.load(MODELS / f"{model.split('.')[0]}.in.npz"))
    want = dict(np.load(MODELS / _expected(model)))
    got = _evaluate(p, inputs)
    for name, a in want.items():
        assert np.allclose(got[name].astype(np.float64), a.astype(np.float64), rtol=1e-3, atol=1e-3), name


def test_one_record_per_emb_op_whatever_the_pipeline() -> None:
    from ember.frontends import import_model
    from ember.passes import PRESETS, parse_pipeline, run_passes

    path = MODELS / "dlrm.dynamo.onnx"
    for pipeline in [*PRESETS.values(), "lower-emb,vectorize,simplify-mem,codegen"]:
        module = import_model(str(path), path.name)
        emb_ops = [o.name for o in module.walk() if o.name.startswith("emb.")]
        passes = parse_pipeline(pipeline)
        run_passes(module, passes)
        work = passes[-1].program.work  # type: ignore[attr-defined]
        assert [f"emb.{w.kind}" for w in work] == emb_ops == ["emb.bag"] * 3, pipeline


def test_handwritten_copies_are_identical_and_declare_their_work() -> None:
    root = Path(__file__).resolve().parent.parent
    names = sorted(p.stem for p in (root / "ember" / "bench" / "handwritten").glob("*.dae"))
    assert len(names) >= 8
    for name in names:
        kind = next((k for k in ("gather", "qbag", "dhe", "robe", "ttbag") if name.startswith(k)), "bag")
        text = (root / "ember" / "bench" / "handwritten" / f"{name}.dae").read_text()
        assert text == (root / "samples" / "handwritten" / f"{name}.dae").read_text(), name
        assert [line.split()[1] for line in text.splitlines() if line.startswith(".work")] == [kind], name


def test_wrapping_records_read_negative_indices_as_rows_from_the_end() -> None:
    """Shift the indices of every wrapping gather of an input by -rows: the model's outputs stay the same, so
    the records must say `negative=wrap` (and the check notices when they do not)."""
    checked = 0
    for model in _samples():
        p = compile_model(MODELS / model, "O3")
        wraps = [w for w in p.work if w.negative == "wrap" and p.symbols[w.indices].kind == "input"]  # type: ignore[index]
        names = {p.symbols[w.indices].name for w in wraps}  # type: ignore[index]
        others = [p.symbols[w.indices].name for w in p.work if w not in wraps and w.indices is not None]
        if not wraps or names & set(others):
            continue
        inputs = dict(np.load(MODELS / f"{model.split('.')[0]}.in.npz"))
        for w in wraps:
            rows = p.symbols[w.table].shape[0]  # type: ignore[index]
            idx = inputs[p.symbols[w.indices].name]  # type: ignore[index]
            idx[::2] -= rows
        want = dict(np.load(MODELS / _expected(model)))
        got = _evaluate(p, inputs)
        assert all(np.allclose(got[k], a, rtol=1e-3, atol=1e-3) for k, a in want.items()), model
        p.work = [Work(**{**vars(w), "negative": ""}) for w in p.work]
        with pytest.raises(IndexError):  # taken as they stand, the shifted indices are out of range
            _evaluate(p, inputs)
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("old, new, message", [
    ('mode = "sum", ', "", "'work' mode must be \"sum\" or \"mean\" or \"max\" (a record of emb.bag)"),
    ('{op = "emb.bag"', '{op = "emb.pool"', "'work' 'op' must name an emb op"),
    ('empty = "identity"}', 'empty = "identity", padding_idx = 1.5}', "'work' padding_idx must be an integer"),
    (", %output {op", " {op", "'work' a record of emb.bag has 4 or 5 operands"),
])
def test_a_work_op_in_eir_text_is_checked_like_any_op(old: str, new: str, message: str) -> None:
    from ember.ir.core import verify
    from ember.ir.parser import parse_module

    text = (Path(__file__).resolve().parent.parent / "samples" / "levels" / "bag_sum.ts.loop.eir").read_text()
    assert text.count(old) == 1
    with pytest.raises(EmberError) as info:
        verify(parse_module(text.replace(old, new), "x.eir"))
    assert str(info.value).startswith(f"x.eir:36:5: error: {message}")
