"""The representations suite: the RM1-RM3 tables in every form Ember has, as benchmark workloads.

Each RM model's table (its rows, width, pooling and bags at the chosen scale, uniform lookups) is benchmarked
as a float table and in five other forms.  Each lossy form is made from the float table by the pass a user
would run (`quantize-tables`, `tt-decompose`, `robe`): the workload's module is the float bag with that
transform applied, its derived params are linked from the table as `ember-asm` links them, and the transform's
own figures give the reconstruction error.  DHE replaces the table by an MLP that must be trained, so no
transform makes it: its module is built directly, with untrained weights of a stated shape (its cycles mean
something, an error would not).

With data, the table holds a standard normal value in every row (not only the looked-up ones, as the other
suites' tables do), so that the error is that of a whole table; each run's output is checked against numpy's
bag over the rows the form stands for (dequantized, the train contracted, the array read through its hashes,
the MLP applied).  At paper scale the tables are address ranges and only timing-only runs simulate them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

import numpy as np

from ..ir.core import Block, Op, Value, new_op, verify
from ..ir.types import tensor
from ..passes.derived import Figures, link_param
from ..passes.quantize_tables import unpack
from ..passes.robe import parse_name
from ..passes.table_transform import table_transform, transform
from ..passes.tt_decompose import parse_name_for, tt_rows
from ..sim.fast.engine import virtual_symbols
from ..sim.tensors import dtype_of
from .workloads import MODELS, SCALES, Workload

if TYPE_CHECKING:
    from ..backend.dae import Program

# kind (what the workload computes) -> (the form's name in tables, the transform that makes it from a float table)
FORMS: dict[str, tuple[str, str]] = {
    "bag_sum": ("float32", ""),
    "qbag8": ("int8", "quantize-tables{bits=8}"),
    "qbag4": ("int4", "quantize-tables{bits=4}"),
    "ttbag": ("TT", "tt-decompose{ranks=16}"),
    "robe": ("ROBE", "robe{size=1000x}"),
    "dhe": ("DHE", ""),
}
DHE_HASHES, DHE_HIDDEN = 16, 64  # k hashes, one hidden layer of this width (ReLU), then D outputs
DHE_BUCKETS = 1_000_000
DHE_PRIME = 2_038_074_743
HASHES = ("slope", "bias", "prime")  # DHE's integer params
SUITE_SCALES = {"representations-tiny": "tiny", "representations": "quick", "representations-paper": "paper"}


@dataclass(frozen=True)
class FormWorkload(Workload):
    """An RM table in one form (`kind`, a key of FORMS)."""

    @property
    def form(self) -> str:
        return FORMS[self.kind][0]

    @property
    def transform(self) -> str:
        return FORMS[self.kind][1]

    def module(self) -> Op:
        """The float bag with the form's transform applied (no data: the error is `figures`' business), or the
        DHE bag."""
        if self.kind == "dhe":
            return self._dhe_module()
        mod = Workload.module(self)  # an emb.bag: any kind but gather builds one
        if self.transform:
            transform(table_transform(self.transform), mod, None, None)
        return mod

    def _dhe_module(self) -> Op:
        idx = Value(tensor((self.bags * self.pooling,), "i64"), "indices")
        off = Value(tensor((self.bags + 1,), "i64"), "offsets")
        body = Block([idx, off])
        params = []
        for name, shape in dhe_shapes(self.dim).items():
            elem = "i64" if name in HASHES else "f32"
            p = body.add(new_op("param", [], [tensor(shape, elem)], {"name": name})).result
            p.name = name
            params.append(p)
        out = body.add(new_op("emb.dhe", [*params, idx, off], [tensor((None, self.dim), "f32")],
                              {"buckets": DHE_BUCKETS, "layers": 2, "mode": "sum"})).result
        out.name = "output"
        body.add(new_op("return", [out]))
        func = new_op("func", attrs={"sym_name": "main", "results": [out.type]}, regions=[body])
        mod = new_op("module", attrs={"inputs": ["indices", "offsets"], "outputs": ["output"]},
                     regions=[Block([], [func])])
        func.parent = mod.body
        verify(mod)
        return mod

    @cached_property
    def param_bytes(self) -> int:
        """The memory the form takes: the bytes of every param of one table's program, times the tables."""
        func = next(op for op in self.module().body.ops if op.name == "func")
        size = 0
        for op in func.body.ops:
            if op.name == "param":
                t = op.result.type
                size += math.prod(t.shape) * dtype_of(t.elem.name).itemsize  # type: ignore[union-attr, arg-type]
        return self.tables * size

    @cached_property
    def lookup_bytes(self) -> int:
        """The bytes of params one lookup reads: a row of the table (float, or int8/int4 codes with scale and bias),
        one slice of each TT core, D elements of the ROBE array; none for DHE, whose MLP every lookup shares."""
        if self.kind in ("bag_sum", "robe"):
            return self.dim * 4
        if self.kind == "dhe":
            return 0
        func = next(op for op in self.module().body.ops if op.name == "func")
        shapes = [op.result.type.shape for op in func.body.ops if op.name == "param"]  # type: ignore[union-attr]
        if self.kind == "ttbag":  # core k: p_k x R_k x q_k x R_k+1, a lookup reads one p_k slice of each
            return sum(4 * math.prod(s[1:]) for s in shapes)
        return int(shapes[0][1])  # a quantized row's bytes

    def useful_bytes(self) -> int:
        """As Workload.useful_bytes, with the form's bytes a lookup in place of a float row's."""
        return Workload.useful_bytes(self) - self.lookups * (self.dim * 4 - self.lookup_bytes)

    def table(self, t: int, indices: np.ndarray | None = None) -> np.ndarray:
        """Table t with a standard normal value in every element (see the module's docstring)."""
        self.require_data()
        return dense_table(self.rows, self.dim, self.seed, t)

    def weights(self, t: int) -> dict[str, np.ndarray]:
        """What the program's params are linked from: the float table t, or the DHE's hashes and untrained MLP
        (which need no table data, so timing-only runs have them too)."""
        return dhe_weights(self.dim, self.seed, t) if self.kind == "dhe" else {"table": self.table(t)}

    @cached_property
    def figures(self) -> Figures | None:
        """The transform's figures for table 0 (bytes, and the reconstruction error when the table has data);
        None for the float table and DHE."""
        if not self.transform:
            return None
        p = table_transform(self.transform)
        data = None if self.virtual else {"table": self.table(0)}
        transform(p, Workload.module(self), None, data)
        return p.stats[0]  # type: ignore[attr-defined, no-any-return]

    def bind(self, program: Program, t: int, table: np.ndarray | None) -> None:
        """Link the program's params as ember-asm does: each one computed from table t (its derived params), or
        DHE's from its seeded weights.  Timing-only (no table): the float params are address ranges, and the
        others, which the engine reads, get values: zeros for int8 or int4 rows, the real DHE hash coefficients
        (a zero prime would divide by zero)."""
        if self.kind == "bag_sum":
            Workload.bind(self, program, t, table)
            return
        virtual = virtual_symbols(program) if table is None else frozenset()
        for n, s in enumerate(program.symbols):
            if s.kind != "param" or n in virtual:
                continue
            if table is None and self.kind != "dhe":  # a hand-written kernel's rows are `?`: the table's, or the
                # elements of a ROBE array named by its ratio, or a TT core's p
                size = hand_rows(s.name, self.rows, self.dim)
                s.shape = tuple(size if d is None else d for d in s.shape)
                program.data[n] = np.zeros(s.shape, dtype_of(s.dtype))
            else:
                program.data[n] = linked(self, t, s.name)

    def stored_rows(self, t: int, table: np.ndarray) -> np.ndarray:
        """The rows the form stands for (what a lookup of each row adds), as float32: numpy's side of the check."""

        if self.kind == "bag_sum":
            return table
        if self.kind == "dhe":
            return dhe_rows(dhe_weights(self.dim, self.seed, t), self.rows)
        names = derived_names(self)
        if self.kind in ("qbag8", "qbag4"):
            return unpack(linked(self, t, names[0]), 8 if self.kind == "qbag8" else 4)
        if self.kind == "ttbag":
            cores = [linked(self, t, n) for n in names]
            return tt_rows(cores, 0, self.rows).astype(np.float32)
        layout = parse_name(names[0].partition("#robe/")[2], self.dim)
        return layout.rows(linked(self, t, names[0]), np.arange(self.rows), self.dim)

    def reference(self, t: int, table: np.ndarray | None = None,
                  inputs: dict[str, np.ndarray] | None = None) -> np.ndarray:
        table = self.table(t) if table is None else table
        return Workload.reference(self, t, self.stored_rows(t, table), inputs)


def dhe_shapes(dim: int) -> dict[str, tuple[int, ...]]:
    """The DHE params in emb.dhe's operand order: k hashes' coefficients, then (out x in) weights and biases."""
    k, h = DHE_HASHES, DHE_HIDDEN
    return {"slope": (k,), "bias": (k,), "prime": (k,), "w0": (h, k), "b0": (h,), "w1": (dim, h), "b1": (dim,)}


@lru_cache(maxsize=8)
def dhe_weights(dim: int, seed: int, t: int) -> dict[str, np.ndarray]:
    """Untrained DHE params: random hash coefficients, and layers drawn as nn.Linear's default init draws them
    (uniform within 1 / sqrt(inputs))."""
    rng = np.random.default_rng([seed, t, 3])
    k = DHE_HASHES
    out = {"slope": rng.integers(1, DHE_PRIME, k), "bias": rng.integers(0, DHE_PRIME, k),
           "prime": np.full(k, DHE_PRIME, np.int64)}
    shapes = dhe_shapes(dim)
    for layer in ("0", "1"):
        bound = 1.0 / math.sqrt(shapes["w" + layer][1])
        for name in ("w" + layer, "b" + layer):
            out[name] = rng.uniform(-bound, bound, shapes[name]).astype(np.float32)
    return out


def dhe_rows(p: dict[str, np.ndarray], rows: int) -> np.ndarray:
    """Rows 0 .. rows-1 as emb.dhe defines them: hash, encode uniformly in [-1, 1] (float32), then the MLP in
    float64 with ReLU after the hidden layer."""
    x = np.arange(rows, dtype=np.int64)[:, None]
    h = (x * p["slope"] + p["bias"]) % p["prime"] % DHE_BUCKETS
    enc = (h.astype(np.float32) / np.float32(DHE_BUCKETS - 1) * np.float32(2) - np.float32(1)).astype(np.float64)
    hidden = np.maximum(enc @ p["w0"].T.astype(np.float64) + p["b0"], 0.0)
    return (hidden @ p["w1"].T.astype(np.float64) + p["b1"]).astype(np.float32)


def hand_rows(name: str, rows: int, dim: int) -> int:
    """The first extent of a hand-written kernel's param `name`, linked from a table of `rows` rows of `dim`
    elements: a ROBE array's elements (`...#robe/<size or ratio>/...`), a TT core's p (`...#tt/auto/<q>/.../k`:
    the factoring tt-decompose picks), or else the table's rows."""

    if "#robe/" in name:
        return parse_name(name.partition("#robe/")[2], dim, rows * dim).size
    if "#tt/" in name:
        p, _, _, k = parse_name_for(name.partition("#tt/")[2], rows)
        return p[k]
    return rows


def dense_table(rows: int, dim: int, seed: int, t: int) -> np.ndarray:
    return np.random.default_rng([seed, t, 1]).standard_normal((rows, dim), dtype=np.float32)


def derived_names(w: FormWorkload) -> list[str]:
    """The names of the params the transform put in place of the table, in operand order."""
    func = next(op for op in w.module().body.ops if op.name == "func")
    return [str(op.attrs["name"]) for op in func.body.ops if op.name == "param"]


@lru_cache(maxsize=16)
def linked(w: FormWorkload, t: int, name: str) -> np.ndarray:
    """Param `name` of table t's program, computed from the workload's table t once for all its variants (TT-SVD
    and the ROBE fit take a while)."""
    data = link_param(w.weights(t), name)
    assert data is not None, name
    return data


def suite(name: str) -> list[FormWorkload]:
    """RM1-RM3 at the suite's scale (quick: with data; paper: address ranges), uniform lookups, every form."""
    tables, rows, bags = SCALES[SUITE_SCALES[name]]
    out = []
    for model, (dim, pooling) in MODELS.items():
        for kind, (form, _) in FORMS.items():
            out.append(FormWorkload(f"{model}_{form}", kind, tables, rows, dim, pooling, bags, 0.0,
                                    virtual=SUITE_SCALES[name] == "paper"))
    return out
