"""Host operations in the simulator: run through ember.host, charged a roofline cost.

Their time is a roofline: max(flops / rate, bytes moved / DRAM bytes per cycle), the rate being
matrix_flops_per_cycle for a Gemm or MatMul (2 M N K flops) and host_flops_per_cycle otherwise;
they do not go through the cache model (they stand for the dense part of the model, which the DAE
study does not try to speed up).

Both engines run them the same way: a run of consecutive host instructions (no label between them,
so control enters only at its first) is one ONNX model, executed when its first instruction is
reached.  Each instruction then takes its own inputs and outputs from that execution, so it is
charged its own roofline cost and its outputs get their addresses in program order, exactly as when
every instruction ran alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ..backend.dae import Instr, Program, SymRef
from ..host import HostNode, run_nodes
from .tensors import dtype_of


def run_host(op_type: str, inputs: list[np.ndarray], n_out: int, attrs: dict[str, Any], opset: int
             ) -> list[np.ndarray]:
    """One host operator on its own (for checks that evaluate a program's host ops one by one)."""
    names = [f"x{k}" for k in range(len(inputs))]
    node = HostNode.of(op_type, names, [f"y{k}" for k in range(n_out)], attrs)
    got = run_nodes([node], dict(zip(names, inputs)), {n: (a.dtype, a.shape) for n, a in zip(names, inputs)}, {},
                    opset)
    return [got[o] for o in node.produced]


def host_cost(op_type: str, inputs: list[np.ndarray], outputs: list[np.ndarray], flops_per_cycle: float,
              dram_bytes_per_cycle: float, matrix_flops_per_cycle: float | None = None,
              attrs: dict[str, Any] | None = None) -> tuple[float, float, float]:
    """(cycles, flops, bytes) of a host op under the roofline model; a Gemm, MatMul or Einsum computes at the
    matrix rate (a core's matrix unit, where it has one), every other op at `flops_per_cycle`.  An Einsum is
    two flops a term of its sum: the product of every index's extent (an Einsum charged its output's size
    alone computed an embedding bag as a count matrix times the table below the speed of light)."""
    moved = float(sum(a.nbytes for a in inputs) + sum(a.nbytes for a in outputs))
    flops = float(sum(a.size for a in outputs))
    if op_type in ("Gemm", "MatMul") and len(inputs) >= 2 and inputs[0].ndim >= 2:
        k = inputs[0].shape[-1]
        flops = 2.0 * float(sum(a.size for a in outputs)) * float(k)
        flops_per_cycle = matrix_flops_per_cycle or flops_per_cycle
    elif op_type == "Einsum" and attrs is not None and isinstance(attrs.get("equation"), str | bytes):
        flops = max(flops, 2.0 * einsum_terms(attrs["equation"], inputs))
        flops_per_cycle = matrix_flops_per_cycle or flops_per_cycle
    return max(flops / flops_per_cycle, moved / dram_bytes_per_cycle), flops, moved


def einsum_terms(equation: str | bytes, inputs: list[np.ndarray]) -> float:
    """The terms an Einsum adds up: the product of the extents of every index its operands name (an ellipsis'
    dimensions count once each, as the output keeps them)."""
    text = equation.decode() if isinstance(equation, bytes) else equation
    sides = text.replace(" ", "").split("->")[0].split(",")
    extent: dict[str, int] = {}
    for spec, a in zip(sides, inputs):
        dots = a.ndim - len(spec.replace("...", ""))
        names = spec.replace("...", "".join(f"\0{k}" for k in range(max(dots, 0))))
        for name, size in zip(re.findall(r"\0\d+|[A-Za-z]", names), a.shape):
            extent[name] = max(extent.get(name, 1), int(size))
    return float(np.prod([float(v) for v in extent.values()])) if extent else 0.0


def host_runs(program: Program) -> dict[int, list[int]]:
    """Instruction index -> the host instructions from it to the end of its run.  A run ends at
    anything that is not a host instruction, and before an instruction that writes a symbol the run
    has already written (its values must stay one per name)."""
    runs: dict[int, list[int]] = {}
    current: list[int] = []
    written: set[int] = set()
    for i, ins in enumerate([*program.code, None]):
        host = isinstance(ins, Instr) and ins.op == "host"
        outs = {s.n for s in ins.args[2]} if host else set()  # type: ignore[union-attr]
        if current and (not host or outs & written):
            for k, first in enumerate(current):
                runs[first] = current[k:]
            current, written = [], set()
        if host:
            current.append(i)
            written |= outs
    return runs


class HostRunner:
    """Gives each host instruction its inputs and outputs, running its whole run when it starts.

    `read(n)` is symbol n's value before the run (raising if it has none).  Outputs are as the
    operator produced them; the engine converts them to the symbol's type when it stores them."""

    def __init__(self, program: Program, read: Callable[[int], np.ndarray]):
        self.p = program
        self.read = read
        self.runs = host_runs(program)
        self.ready: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        # what an error calls the values execute() names in<n> and s<n>: the program's symbol names
        self.names = {f"{p}{n}": s.name for n, s in enumerate(program.symbols) for p in ("in", "s")}

    def step(self, index: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """(inputs, outputs) of the host instruction at `index`."""
        got = self.ready.pop(index, None)
        return got if got is not None else self.execute(index)

    def execute(self, index: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Run the host instructions from `index` to the end of its run as one model."""
        syms = self.p.symbols
        run = [self.p.code[i] for i in self.runs[index]]
        made: set[int] = set()
        feeds: dict[str, np.ndarray] = {}
        types: dict[str, tuple[np.dtype, tuple[int | None, ...]]] = {}
        nodes = []
        for ins in run:
            assert isinstance(ins, Instr)
            op_type, ins_syms, out_syms, attrs = ins.args
            names = []
            for s in ins_syms:
                assert isinstance(s, SymRef)
                if s.n in made:
                    names.append(f"s{s.n}")
                    continue
                name = f"in{s.n}"
                if name not in feeds:
                    feeds[name] = self.read(s.n)
                    types[name] = (dtype_of(syms[s.n].dtype), tuple(syms[s.n].shape))
                names.append(name)
            nodes.append(HostNode.of(op_type, names, [f"s{s.n}" for s in out_syms], attrs))
            made.update(s.n for s in out_syms)
        dtypes = {f"s{n}": dtype_of(syms[n].dtype) for n in made}
        raw = run_nodes(nodes, feeds, types, dtypes, self.p.opset, names=self.names)
        stored = {name: a.astype(dtypes[name]) if a.dtype != dtypes[name] else a for name, a in raw.items()}
        stored.update(feeds)
        for i, node in zip(self.runs[index], nodes):
            self.ready[i] = ([stored[n] for n in node.inputs if n], [raw[o] for o in node.produced])
        return self.ready.pop(index)
