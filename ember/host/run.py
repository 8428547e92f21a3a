"""Running host operators: a list of them as few models as the executors allow, and the import check.

A list of host nodes (a run of consecutive host instructions) becomes one model, run once, with every
value it produces asked for as a graph output.  When the first executor cannot prepare that model
(`auto`: onnxruntime lacks one of the operators), each node goes to the first executor that can run
it alone and neighbours that share an executor are joined again, so the list runs as a few
segments.  When a segment fails while running, its nodes are run one at a time to find the operator
at fault, so an error names one operator with each executor's reason.  Before a segment runs, the
size of everything it makes is checked against the cap (sizes.py).

Each value is handed on in the element type its consumer's program declares for it (as when host
ops ran one at a time): a value whose operator produced another type ends a segment, so it is
converted between the two.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from onnx import ModelProto

from ..ir.diagnostics import EmberError
from .executors import Refused, Run, describe, executors_of, missing, prepare, short, unsupported
from .graph import HostNode, Shape, build_model, strict_types
from .sizes import TooLarge, check_run

Types = Mapping[str, tuple[np.dtype, Shape]]


@dataclass(frozen=True)
class _Segment:
    executor: str
    nodes: tuple[int, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    run: Run


def _model(nodes: Sequence[HostNode], group: Sequence[int], inputs: Types, dtypes: Mapping[str, np.dtype],
           opset: int) -> tuple[tuple[str, ...], tuple[str, ...], ModelProto]:
    """(inputs, outputs, model) of the nodes at `group`: what they read and nobody in the group
    produces is a graph input, typed as the run's input or as the dtype its producer's program declares."""
    made: set[str] = set()
    reads: list[str] = []
    for k in group:
        for i in nodes[k].inputs:
            if i and i not in made and i not in reads:
                reads.append(i)
        made.update(nodes[k].produced)
    types = {i: inputs[i] if i in inputs else (dtypes[i], None) for i in reads}
    outs = tuple(o for k in group for o in nodes[k].produced)
    return tuple(reads), outs, build_model([nodes[k] for k in group], types, outs, opset)


def _prepare(executor: str, nodes: Sequence[HostNode], group: Sequence[int], inputs: Types,
             dtypes: Mapping[str, np.dtype], opset: int) -> _Segment:
    try:
        reads, outs, model = _model(nodes, group, inputs, dtypes, opset)
    except (ValueError, TypeError) as e:  # an attribute ONNX cannot hold
        raise Refused(f"cannot build the ONNX node: {short(e)}") from None
    return _Segment(executor, tuple(group), reads, outs, prepare(executor, model))


class HostFailure(EmberError):
    """A host operator no executor ran: the node and each executor's reason, worded by `run_nodes`."""

    def __init__(self, node: HostNode, reasons: dict[str, str]):
        super().__init__(f"host operation {node.op_type} failed: {describe(reasons)}")
        self.node, self.reasons = node, reasons

    def named(self, names: Mapping[str, str]) -> EmberError:
        """The error with the caller's names for the node's values (its results name the operator)."""
        if not names:
            return self
        results = ", ".join(f"'{names.get(o, o)}'" for o in self.node.produced)
        why = describe(self.reasons)
        for v in sorted({*self.node.inputs, *self.node.produced} - {""}, key=len, reverse=True):
            if v in names:
                why = re.sub(rf"(?<![\w']){re.escape(v)}(?![\w'])", f"'{names[v]}'", why)
        return EmberError(f"host operation {self.node.op_type} computing {results} failed: {why}")


def _place(nodes: Sequence[HostNode], group: Sequence[int], inputs: Types, dtypes: Mapping[str, np.dtype],
           opset: int, prefs: tuple[str, ...]) -> list[_Segment]:
    """Segments for `group`: one model if the first executor takes it whole, else each node to the
    first executor that takes it alone, neighbours on the same executor joined again."""
    try:
        return [_prepare(prefs[0], nodes, group, inputs, dtypes, opset)]
    except Refused as e:
        if len(group) == 1:
            reasons = {prefs[0]: str(e)}
            for x in prefs[1:]:
                try:
                    return [_prepare(x, nodes, group, inputs, dtypes, opset)]
                except Refused as again:
                    reasons[x] = str(again)
            raise HostFailure(nodes[group[0]], reasons) from None
    singles = [_place(nodes, [k], inputs, dtypes, opset, prefs)[0] for k in group]
    segments: list[_Segment] = []
    start = 0
    for end in range(1, len(singles) + 1):
        if end == len(singles) or singles[end].executor != singles[start].executor:
            part = [s.nodes[0] for s in singles[start:end]]
            try:
                segments.append(_prepare(singles[start].executor, nodes, part, inputs, dtypes, opset))
            except Refused:
                segments.extend(singles[start:end])
            start = end
    return segments


_PLANS: OrderedDict[tuple[object, ...], list[_Segment]] = OrderedDict()
_CUTS: dict[tuple[object, ...], frozenset[int]] = {}  # runs whose values need converting between nodes


def _plan(nodes: Sequence[HostNode], inputs: Types, dtypes: Mapping[str, np.dtype], opset: int,
          prefs: tuple[str, ...], key: tuple[object, ...], cuts: frozenset[int]) -> list[_Segment]:
    k = (*key, cuts)
    plan = _PLANS.get(k)
    if plan is None:
        plan = []
        group: list[int] = []
        for n in range(len(nodes)):
            group.append(n)
            if n in cuts or n == len(nodes) - 1:
                plan.extend(_place(nodes, group, inputs, dtypes, opset, prefs))
                group = []
        _PLANS[k] = plan
        if len(_PLANS) > 256:
            _PLANS.popitem(last=False)
    return plan


def _one_by_one(seg: _Segment, nodes: Sequence[HostNode], values: dict[str, np.ndarray],
                dtypes: Mapping[str, np.dtype], opset: int, prefs: tuple[str, ...]) -> list[np.ndarray]:
    """The segment's outputs computed node by node, each by the first executor that prepares it.  A node
    that fails while running is the error: another executor is tried only when one refuses the node,
    or says at run time that it does not implement the case (under `auto`, onnx.reference would
    otherwise hide onnxruntime's run-time checks, such as an integer division by zero, behind a
    result of its own)."""
    local, raw = dict(values), {}
    for k in seg.nodes:
        node = nodes[k]
        types = {i: (local[i].dtype, local[i].shape) for i in node.inputs if i}
        reasons = {}
        check_run([node], {i: local[i] for i in node.inputs if i}, dtypes, opset)
        for x in prefs:
            try:
                one = _prepare(x, nodes, [k], types, dtypes, opset)
            except Refused as e:
                reasons[x] = str(e)
                continue
            try:
                outs = one.run({i: local[i] for i in one.inputs})
                break
            except Exception as e:  # whatever the executor raises, worded as its reason
                reasons[x] = short(e)
                if not unsupported(e):
                    raise HostFailure(node, reasons) from None
        else:
            raise HostFailure(node, reasons)
        for name, o in zip(one.outputs, outs):
            o = np.asarray(o)
            want = dtypes.get(name, o.dtype)
            local[name] = o.astype(want) if o.dtype != want else o
            raw[name] = o
    return [raw[o] for o in seg.outputs]


def run_nodes(nodes: Sequence[HostNode], feeds: Mapping[str, np.ndarray], inputs: Types,
              dtypes: Mapping[str, np.dtype], opset: int, choice: str | None = None,
              names: Mapping[str, str] | None = None) -> dict[str, np.ndarray]:
    """Every value `nodes` produce, by name, as their operators produced it.

    `feeds` holds the values they read that exist before them, `inputs` the declared (dtype, shape)
    of each (the key prepared models are kept under, so declare dynamic extents as None);
    `dtypes` the type each produced value is converted to before a later node reads it; `names` what
    an error calls each value (the program's names for them)."""
    try:
        return _run_nodes(nodes, feeds, inputs, dtypes, opset, choice)
    except (HostFailure, TooLarge) as e:
        raise e.named(names or {}) from None


def _run_nodes(nodes: Sequence[HostNode], feeds: Mapping[str, np.ndarray], inputs: Types,
               dtypes: Mapping[str, np.dtype], opset: int, choice: str | None) -> dict[str, np.ndarray]:
    prefs = executors_of(choice)
    key: tuple[object, ...] = (prefs, opset, tuple(n.key() for n in nodes),
                               tuple(sorted((k, str(t), s) for k, (t, s) in inputs.items())),
                               tuple(sorted((k, str(v)) for k, v in dtypes.items())))
    while True:
        cuts = _CUTS.get(key, frozenset())
        values = dict(feeds)
        raw: dict[str, np.ndarray] = {}
        late: set[int] = set()
        for seg in _plan(nodes, inputs, dtypes, opset, prefs, key, cuts):
            feed = {n: values[n] for n in seg.inputs}
            if check_run([nodes[k] for k in seg.nodes], feed, dtypes, opset) or len(seg.nodes) == 1:
                try:
                    outs = seg.run(feed)
                except Exception:
                    outs = _one_by_one(seg, nodes, values, dtypes, opset, prefs)
            else:  # a size inference cannot tell in advance: each node is checked once its inputs exist
                outs = _one_by_one(seg, nodes, values, dtypes, opset, prefs)
            producer = {o: k for k in seg.nodes for o in nodes[k].produced}
            for name, o in zip(seg.outputs, outs):
                o = np.asarray(o)
                raw[name] = o
                want = dtypes.get(name, o.dtype)
                values[name] = o.astype(want) if o.dtype != want else o
                if o.dtype != want and any(name in nodes[k].inputs for k in seg.nodes if k > producer[name]):
                    late.add(producer[name])
        if not late:
            return raw
        _CUTS[key] = cuts | late  # read inside its segment unconverted: end the segment at its producer


def check_node(node: HostNode, inputs: Types, opset: int, choice: str | None = None) -> dict[str, str] | None:
    """None if an executor of the runtime choice can run `node` on inputs of these types, else each
    executor's reason.  onnx.reference is trusted only with a node that passes ONNX's strict type
    check: it never checks input types or counts itself."""
    reasons = missing(choice)
    for x in executors_of(choice):
        try:
            seg = _prepare(x, [node], [0], inputs, {}, opset)
            if x == "reference":
                _, _, model = _model([node], seg.nodes, inputs, {}, opset)
                try:
                    strict_types(model)
                except Exception as e:  # onnx's checker and inference errors share no base class
                    raise Refused(short(e)) from None
            return None
        except Refused as e:
            reasons[x] = str(e)
    return reasons
