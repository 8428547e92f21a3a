"""A Loop's carried values, followed by what they do rather than where they sit.

The dynamo exporter writes a loop's carried values in an order that depends on the Python hash
seed of the exporting process, so a matcher must tell the bag counter from the sequence of bag
rows by their dataflow: the counter starts at a constant and becomes itself plus a constant; the
sequence starts empty and has one row inserted per iteration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from onnx import GraphProto, NodeProto

from .graph import Facts, Mismatch, Scope, need


@dataclass
class Carried:
    """One carried value of a Loop: its initial value, its name in the body, the body's update of it,
    and the loop output holding its final value ('' when unused)."""

    init: str
    inside: str
    next: str
    final: str


def carried_values(loop: NodeProto, body: GraphProto) -> tuple[list[Carried], int]:
    """The loop's carried values, in their (meaningless) order, and its number of scan outputs."""
    n = len(loop.input) - 2
    need(len(body.input) == 2 + n and len(body.output) >= 1 + n,
         f"the loop body should take the iteration number, the condition and {n} carried values and "
         f"return the condition and {n} updated values; it takes {len(body.input)} and returns {len(body.output)}")
    outs = list(loop.output) + [""] * (n - len(loop.output))
    vals = [Carried(loop.input[2 + k], body.input[2 + k].name, body.output[1 + k].name, outs[k]) for k in range(n)]
    return vals, len(body.output) - 1 - n


def describe_carried(g: Facts, outer: Scope, body: Scope, c: Carried) -> str:
    """One carried value in the model's terms: where it starts and what each iteration makes of it."""
    start = g.describe(outer, c.init)
    step = g.step(body, c.next, c.inside)
    if step == 0:
        update = "left unchanged"
    elif step is not None:
        update = _change(step)
    else:
        node = body.node(c.next)
        update = f"replaced by {g.describe(body, c.next)}" if node is None else f"updated by {node.op_type}"
    return f"'{c.inside}' starting as {start}, {update} each iteration"


def _change(step: int) -> str:
    return f"increased by {step}" if step >= 0 else f"decreased by {-step}"


def describe_all(g: Facts, outer: Scope, body: Scope, vals: list[Carried]) -> str:
    if not vals:
        return "no carried values"
    parts = "; ".join(f"{k + 1}. {describe_carried(g, outer, body, c)}" for k, c in enumerate(vals))
    return f"{len(vals)} carried value{'s' if len(vals) != 1 else ''}: {parts}"


def is_counter(g: Facts, body: Scope, c: Carried) -> bool:
    """Becomes itself plus a nonzero constant each iteration."""
    return g.step(body, c.next, c.inside) not in (None, 0)


def is_appended_sequence(body: Scope, c: Carried) -> bool:
    """Becomes SequenceInsert(itself, x) each iteration."""
    node = body.node(c.next)
    return node is not None and node.op_type == "SequenceInsert" and node.input[0] == c.inside


def check_counter(g: Facts, outer: Scope, body: Scope, c: Carried, what: str, from_zero: bool = True) -> None:
    """The counter steps by 1, and starts at 0 unless the caller checks its start itself."""
    if from_zero:
        need(g.one_int(outer, c.init) == 0, f"{what} should start at 0; it starts as {g.describe(outer, c.init)}")
    step = g.step(body, c.next, c.inside)
    need(step == 1, f"{what} should step by 1; it is {_change(step or 0)} each iteration")


def split_counter(g: Facts, outer: Scope, body: Scope, vals: list[Carried], loop: str, other: str,
                  is_other: Callable[[Carried], bool]) -> tuple[Carried, Carried]:
    """(counter, the other value) of a loop that should carry exactly those two, whatever their order.

    `is_other(c)` recognises the other value by its dataflow; `loop` and `other` name the loop and
    the value for the message."""
    expected = (f"{loop} should carry two values, a counter (0, 1, 2, ...) and {other}; found "
                f"{describe_all(g, outer, body, vals)}")
    if len(vals) != 2:
        raise Mismatch(expected)
    others = [c for c in vals if is_other(c)]
    if len(others) != 1:
        raise Mismatch(expected)
    counter = vals[1] if others[0] is vals[0] else vals[0]
    need(is_counter(g, body, counter), expected)
    return counter, others[0]
