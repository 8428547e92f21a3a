"""What ember-plan reads: a model file or an .eir at level emb, with the weights its tables come from, or a bench
workload (its tables and inputs generated as the benchmark generates them)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import dialects  # noqa: F401  (registers the ops verify checks)
from ..bench.suites import SUITES
from ..bench.suites import suite as workloads
from ..files import base_dir, display_name, read_text, rebase
from ..frontends import import_model
from ..ir.core import Block, Op, Value, new_op, verify
from ..ir.diagnostics import EmberError
from ..ir.parser import parse_module
from ..ir.types import tensor
from ..passes.derived import read_weights

MODEL_SUFFIXES = (".onnx", ".pt", ".pt2")


@dataclass
class Source:
    module: Op
    label: str
    table_data: Callable[[str], np.ndarray | None]  # a table's float rows, or None when they cannot be read
    inputs: dict[str, np.ndarray] = field(default_factory=dict)  # the model's inputs, by name
    why_no_data: str = ""  # what the error figures say when table_data gives None
    note: str = ""  # how the inputs were chosen, when the report should say


def read_source(given: str, output: str | None, suite: str) -> Source:
    """The model, .eir or workload named `given`; the module's `weights` is rewritten as seen from `output`."""
    path = Path(given)
    if given == "-" or path.suffix.lower() == ".eir":
        module = parse_module(read_text(given), display_name(given))
        ref = module.attrs.get("weights")
        weights_path = str(base_dir(given) / ref) if isinstance(ref, str) and ref else ""
        if isinstance(ref, str) and output:
            module.attrs["weights"] = rebase(ref, given, output)
        return Source(module, display_name(given), _file_tables(weights_path),
                      why_no_data="" if weights_path else "the module names no weights file")
    if path.suffix.lower() in MODEL_SUFFIXES or path.exists():
        ref = os.path.relpath(os.path.abspath(given), base_dir(output or "-"))
        return Source(import_model(given, ref), given, _file_tables(given))
    return workload_source(given, suite)


def _file_tables(path: str) -> Callable[[str], np.ndarray | None]:
    """A table's data from a weights file, read once, when first asked for."""
    loaded: list[dict[str, np.ndarray] | None] = []

    def table(name: str) -> np.ndarray | None:
        if not loaded:
            loaded.append(read_weights(path))
        weights = loaded[0]
        return None if weights is None or name not in weights else np.asarray(weights[name])

    return table


def workload_source(name: str, suite: str) -> Source:
    """A bench workload as one module: bag t over the param `table<t>` with inputs `indices<t>`, `offsets<t>` (and
    `weights<t>`), one per table of the workload; its tables' data are generated when asked for.  The tables are
    drawn alike, so every table's bag runs on table 0's inputs: the planner then simulates each form once."""
    if suite not in SUITES:
        raise EmberError(f"unknown suite '{suite}' (valid: {', '.join(SUITES)})")
    every = workloads(suite)
    wanted = name.upper().replace("-", "_")
    matches = [w for w in every if w.name.upper() == wanted] or [w for w in every if w.name.upper() == wanted + "_L0"]
    if not matches:
        raise EmberError(f"'{name}' is no model file (.eir, .onnx, .pt, .pt2) and no bench workload of suite "
                         f"'{suite}' ({', '.join(w.name for w in every if w.kind != 'gather')})")
    w = matches[0]
    if w.kind == "gather":
        raise EmberError(f"workload {w.name} gathers rows (emb.gather) and has no bags to plan")
    args: list[Value] = []
    body = Block(args)
    outs = []
    inputs: dict[str, np.ndarray] = {}
    drawn = w.inputs(0)
    for t in range(w.tables):
        idx = Value(tensor((len(drawn["indices"]),), "i64"), f"indices{t}")
        off = Value(tensor((w.bags + 1,), "i64"), f"offsets{t}")
        operands = [idx, off]
        if w.weighted:
            operands.append(Value(tensor((len(drawn["weights"]),), "f32"), f"weights{t}"))
        args.extend(operands)
        inputs |= {f"{k}{t}": v for k, v in drawn.items()}
        table = body.add(new_op("param", [], [tensor((w.rows, w.dim), "f32")], {"name": f"table{t}"})).result
        table.name = f"table{t}"
        out = body.add(new_op("emb.bag", [table, *operands], [tensor((None, w.dim), "f32")],
                              {"mode": "sum", "empty": "zero"})).result
        out.name = f"output{t}"
        outs.append(out)
    body.args = args
    for a in args:
        a.owner = body
    body.add(new_op("return", outs))
    func = new_op("func", attrs={"sym_name": "main", "results": [o.type for o in outs]}, regions=[body])
    module = new_op("module", attrs={"inputs": [a.name for a in args], "outputs": [o.name for o in outs]},
                    regions=[Block([], [func])])
    func.parent = module.body
    verify(module)

    def table_data(table: str) -> np.ndarray | None:
        return None if w.virtual else w.table(int(table.removeprefix("table")))

    note = (f"the {w.tables} tables are drawn alike: each bag runs on table 0's inputs, so each form is simulated "
            f"once" if w.tables > 1 else "")
    return Source(module, f"{w.name} ({suite} suite)", table_data, inputs,
                  "the workload's tables hold no data" if w.virtual else "", note)
