"""The raisings' integer evaluator (frontends/raising/matching.py) against onnx.reference, op by op: it decides
whether an index expression is a TT digit or a ROBE hash, so it must compute what the ONNX ops compute, negative
operands included (ONNX's integer Div truncates toward zero; its Mod with fmod=0 takes the divisor's sign)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx.reference import ReferenceEvaluator

from ember.frontends.raising.matching import NoMatch, _apply
from ember.ir.core import new_op

RNG = np.random.default_rng(11)
A = RNG.integers(-50, 50, 64).astype(np.int64)
B = np.where((b := RNG.integers(-7, 8, 64)) == 0, 3, b).astype(np.int64)
P, Q = A % 3 == 0, B > 0


def reference(kind: str, args: list[np.ndarray], **attrs: int) -> np.ndarray:
    names = [f"i{k}" for k in range(len(args))]
    types = {np.dtype(bool): onnx.TensorProto.BOOL, np.dtype(np.int64): onnx.TensorProto.INT64}
    inputs = [oh.make_tensor_value_info(n, types[a.dtype], a.shape) for n, a in zip(names, args)]
    graph = oh.make_graph([oh.make_node(kind, names, ["y"], **attrs)], "g", inputs,
                          [oh.make_tensor_value_info("y", onnx.TensorProto.UNDEFINED, None)])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 19)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, args)))[0]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("kind", "args", "attrs"), [
    ("Div", [A, B], {}), ("Mod", [A, B], {}), ("Mod", [A, B], {"fmod": 1}), ("Sub", [A, B], {}),
    ("Less", [A, B], {}), ("Greater", [A, B], {}), ("Equal", [A % 4, B % 4], {}), ("And", [P, Q], {}),
    ("Or", [P, Q], {}), ("Xor", [P, Q], {}), ("Not", [P], {}), ("Where", [P, A, B], {}),
    ("Cast", [A], {"to": onnx.TensorProto.BOOL}), ("Cast", [P], {"to": onnx.TensorProto.INT64})])
def test_each_op_computes_what_onnx_reference_computes(kind: str, args: list[np.ndarray], attrs: dict) -> None:
    got = _apply(new_op("host.onnx", [], [], {"op": kind, **attrs}), args)
    want = reference(kind, args, **attrs)
    assert got.dtype == want.dtype and (got == want).all(), (kind, got, want)


@pytest.mark.parametrize(("kind", "args", "attrs"), [
    ("Add", [P, A], {}),  # arithmetic on a boolean
    ("And", [A, B], {}),  # logic on integers
    ("Cast", [A], {"to": onnx.TensorProto.FLOAT}),  # to a type the evaluator does not hold
    ("Div", [A, np.zeros_like(A)], {})])
def test_what_it_cannot_evaluate_is_no_match(kind: str, args: list[np.ndarray], attrs: dict) -> None:
    with pytest.raises(NoMatch):
        _apply(new_op("host.onnx", [], [], {"op": kind, **attrs}), args)
