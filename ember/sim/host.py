"""Host operations: ONNX operators run with the `onnx` package's reference implementation.

Their time is a roofline: max(flops / host_flops_per_cycle, bytes moved / DRAM bytes per cycle);
they do not go through the cache model (they stand for the dense part of the model, which the DAE
study does not try to speed up).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ..ir.diagnostics import EmberError
from ..ir.printer import DenseAttr


def onnx_attr(v: Any) -> Any:
    if isinstance(v, DenseAttr):
        return helper.make_tensor("value", helper.np_dtype_to_tensor_dtype(v.array().dtype),
                                  v.array().shape, v.array().reshape(-1).tolist())
    return v


def run_host(op_type: str, inputs: list[np.ndarray], n_out: int, attrs: dict[str, Any], opset: int
             ) -> list[np.ndarray]:
    absent = set(attrs.get("absent", []))
    names, it = [], iter(range(len(inputs)))
    total = len(inputs) + len(absent)
    for i in range(total):
        names.append("" if i in absent else f"x{next(it)}")
    feeds = {n: a for n, a in zip([n for n in names if n], inputs)}
    node = helper.make_node(op_type, names, [f"y{i}" for i in range(n_out)],
                            **{k: onnx_attr(v) for k, v in attrs.items() if k != "absent"})
    try:
        out = ReferenceEvaluator(node, opsets={"": opset or 17}).run(None, feeds)
    except Exception as e:  # the reference implementation's own message says what was wrong
        raise EmberError(f"host operation {op_type} failed: {e}") from None
    return [np.asarray(o) for o in out]


def host_cost(op_type: str, inputs: list[np.ndarray], outputs: list[np.ndarray], flops_per_cycle: float,
              dram_bytes_per_cycle: float) -> tuple[float, float, float]:
    """(cycles, flops, bytes) of a host op under the roofline model."""
    moved = float(sum(a.nbytes for a in inputs) + sum(a.nbytes for a in outputs))
    flops = float(sum(a.size for a in outputs))
    if op_type in ("Gemm", "MatMul") and len(inputs) >= 2 and inputs[0].ndim >= 2:
        k = inputs[0].shape[-1]
        flops = 2.0 * float(sum(a.size for a in outputs)) * float(k)
    return max(flops / flops_per_cycle, moved / dram_bytes_per_cycle), flops, moved
