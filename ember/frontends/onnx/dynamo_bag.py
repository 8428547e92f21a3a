"""The dynamo exporter's EmbeddingBag (opset >= 18): a while-loop over bags that builds a sequence.

    rows = Gather(table, indices) [* weights]                (before the loop, for every lookup)
    Loop(cond = 0 < n_bags) carrying {k = 0, seq = SequenceEmpty()}:
        row = If(offsets[k] == offsets[k+1], zeros, Reduce(rows[offsets[k]:offsets[k+1]]))
        seq = SequenceInsert(seq, row);  k = k + 1;  cond = k < n_bags
    out = ConcatFromSequence(seq)

`offsets` here is the exporter's own list with len(indices) appended (so include_last_offset, 2-D
input and plain offsets all look alike).  The counter and the sequence are told apart by what they
do (`carried.py`); the exporter orders them by hash seed.  The loop never trip-counts: it stops on
the carried condition, whether or not shapes were exported as dynamic.  Mean splits out the last bag;
padding_idx filters each bag with an inner loop (`dynamo_pad.py`).  An empty bag gives zeros
(`empty = "zero"`), whatever the mode.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import GraphProto, NodeProto

from .carried import carried_values, check_counter, describe_all, is_appended_sequence, split_counter
from .dynamo_pad import Pad, match_padded
from .graph import REDUCE, Bag, Facts, Form, Mismatch, Scope, attr, need, show_form, subgraph
from .load import ELEM

EXPECTED = "a sequence of bag rows (SequenceEmpty, then SequenceInsert of one row per bag)"


@dataclass
class _Ctx:
    """What the body match learns on the way down, checked against the loop's bounds at the end."""

    start: str
    end: str
    index: set[str]
    rows: str | None = None
    lasts: list[tuple[Scope, str]] = field(default_factory=list)
    sizes: list[tuple[Scope, str]] = field(default_factory=list)


def is_dynamo_loop(loop: NodeProto) -> bool:
    """Loops that carry values (the TorchScript exporter's carry none)."""
    return len(loop.input) > 2


def match_dynamo(g: Facts, loop: NodeProto) -> tuple[Bag, NodeProto]:
    """The raised bag and the ConcatFromSequence it replaces."""
    body = subgraph(loop, "body")
    bs = Scope(body, g.top)
    vals, scans = carried_values(loop, body)
    need(scans == 0, f"the bag loop should have no scan outputs; it has {scans} besides "
         f"{describe_all(g, g.top, bs, vals)}")
    counter, seq = split_counter(g, g.top, bs, vals, "the dynamo exporter's EmbeddingBag loop", EXPECTED,
                                  lambda c: is_appended_sequence(bs, c))
    check_counter(g, g.top, bs, counter, f"the bag counter '{counter.inside}'")
    first_seq = g.top.node(seq.init)
    need(first_seq is not None and first_seq.op_type == "SequenceEmpty",
         f"the bag rows should start as an empty sequence (SequenceEmpty); they start as {g.describe(g.top, seq.init)}")
    it, cond_out = body.input[0].name, body.output[0].name
    less = bs.node(cond_out)
    need(less is not None and less.op_type == "Less" and less.input[0] == counter.next,
         f"the loop should go on while the next counter '{counter.next}' is below the number of bags; "
         f"its condition is {g.describe(bs, cond_out)}")
    assert less is not None
    nbags = g.int_form(bs, less.input[1])
    need(nbags is not None, f"cannot tell the number of bags the loop runs for: the counter is compared with "
         f"{g.describe(bs, less.input[1])}")
    assert nbags is not None
    ins = bs.node(seq.next)
    assert ins is not None
    need(len(ins.input) == 2, "each bag row should be appended to the end of the sequence")
    pick = g.producer(bs, ins.input[1], ("If",), "the bag row")
    eq = g.producer(bs, pick.input[0], ("Equal",), "the empty-bag test")
    index = {it, counter.inside}
    zero = _zero_row(g, subgraph(pick, "then_branch"), bs)
    els = subgraph(pick, "else_branch")
    need(len(els.output) == 1, "the non-empty branch should produce one row")
    es = Scope(els, bs)
    pad: Pad | None = None
    if any((n := bs.node(x)) is not None and n.op_type == "Size" for x in eq.input):
        pad = match_padded(g, bs, eq, es, els.output[0].name, index)
        offsets, mode, rows = pad.offsets, pad.mode, pad.rows
        ctx = _Ctx("", "", index)
    else:
        fits = [f for f in (_bounds(g, bs, eq.input[0], eq.input[1], index),
                            _bounds(g, bs, eq.input[1], eq.input[0], index)) if f is not None]
        need(bool(fits), "the empty-bag test should compare offsets[k:k+1] with offsets[k+1:k+2], "
             f"k the bag counter; it compares {g.describe(bs, eq.input[0])} with {g.describe(bs, eq.input[1])}")
        start, end, offsets = fits[0]
        ctx = _Ctx(start, end, index)
        mode = _result(g, es, els.output[0].name, ctx)
        assert ctx.rows is not None
        rows = ctx.rows
    g.index_vector(offsets, "the offsets")
    table, indices, weights = _rows_source(g, rows)
    n_rows, width = g.float_table(table, "the gathered table")
    need(zero == (1, width), f"the empty-bag row should have shape [1, {width}], has {list(zero)}")
    if pad is not None:
        need(pad.indices == indices, "the padding test reads other indices than the bag gathers")
        need(n_rows is not None, "the padding index cannot be checked against a table of unknown size")
        assert n_rows is not None
        need(0 <= pad.row < n_rows, f"the padding index {pad.row} is not a row of the table")
        need(pad.wrap is None or pad.wrap == n_rows,
             "negative indices are wrapped by a count other than the table's rows")
    need(weights is None or mode == "sum", "per-sample weights need mode sum")
    _check_bound(g, loop, offsets, nbags)
    for scope, last in ctx.lasts:
        need(g.int_form(scope, last) == (nbags[0], nbags[1] - 1),
             "the last-bag special case does not test for the last bag")
    ilen = g.len_form(g.top, indices)
    for scope, size in ctx.sizes:
        need(ilen is not None and g.int_form(scope, size) == ilen,
             "the last-bag special case does not end at len(indices)")
    # The sequence must only be concatenated, and the final counter must not be used.
    need(not counter.final or (not g.users.get(counter.final) and counter.final not in g.graph_outputs),
         f"the final bag counter '{counter.final}' is used after the loop")
    users = g.users.get(seq.final, []) if seq.final else []
    need(len(users) == 1 and users[0].op_type == "ConcatFromSequence" and seq.final not in g.graph_outputs,
         f"the sequence of bag rows '{seq.final}' should be used once, by ConcatFromSequence")
    cat = users[0]
    need(attr(cat, "axis") == 0 and attr(cat, "new_axis", 0) == 0, "the bag rows should be concatenated along axis 0")
    return Bag(table, indices, offsets, weights, mode, "zero", cat.output[0], nbags,
               None if pad is None else pad.row), cat


def _check_bound(g: Facts, loop: NodeProto, offsets: str, nbags: Form) -> None:
    """The loop must run once per bag: len(offsets) - 1 times, whatever the trip count and first test."""
    olen = g.len_form(g.top, offsets)
    need(olen is not None, f"cannot tell the length of the offsets '{offsets}'")
    assert olen is not None
    want = (olen[0], olen[1] - 1)
    need(nbags == want, f"the loop should run once per bag, {show_form(want)} times (one fewer than the "
         f"{show_form(olen)} entries of the offsets '{offsets}'), but its condition stops the counter at "
         f"{show_form(nbags)}")
    m, cond0 = loop.input[0], loop.input[1]
    if g.is_true(g.top, cond0):
        need(nbags[0] is None and nbags[1] >= 1, "a loop entered unconditionally needs at least one bag")
    else:
        first = g.top.node(cond0)
        need(first is not None and first.op_type == "Less" and g.one_int(g.top, first.input[0]) == 0
             and g.int_form(g.top, first.input[1]) == nbags,
             f"the loop should be entered when 0 < {show_form(nbags)} (there are bags); its first condition is "
             f"{g.describe(g.top, cond0)}")
    if m:
        trip = g.one_int(g.top, m)
        need(trip is not None and nbags[0] is None and trip >= nbags[1],
             f"the trip count {g.describe(g.top, m)} may stop the loop before the last bag")


def _bounds(g: Facts, scope: Scope, start: str, end: str, index: set[str]) -> tuple[str, str, str] | None:
    """(start, end, offsets) if start = offsets[k:k+1] and end = offsets[k+1:k+2], k the counter."""
    try:
        o1, k, k1 = g.slice0(scope, start, "the bag start")
        o2, k1b, k2 = g.slice0(scope, end, "the bag end")
    except Mismatch:  # not this shape
        return None
    kn = scope.node(k)
    if kn is None or kn.input[0] not in index or o1 != o2:
        return None
    if not ((kn.op_type == "Reshape" and g.ints(scope, kn.input[1]) == [-1])
            or (kn.op_type == "Unsqueeze" and g.axes(scope, kn) == [0])):
        return None
    if not (g.plus(scope, k1, k, 1) and g.plus(scope, k1b, k, 1) and g.plus(scope, k2, k, 2)):
        return None
    return start, end, o1


def _zero_row(g: Facts, then: GraphProto, parent: Scope) -> tuple[int, ...]:
    """The empty-bag branch must yield a constant all-zero float row; returns its shape."""
    need(len(then.output) == 1, "the empty-bag branch should produce one row")
    z = Scope(then, parent).const(then.output[0].name)
    need(z is not None and z.dtype.kind == "f" and not np.any(z), "the empty-bag branch should give zeros")
    assert z is not None
    return tuple(z.shape)


def _result(g: Facts, scope: Scope, name: str, ctx: _Ctx) -> str:
    """Mode of the non-empty branch: Reduce(rows), or the mean's last-bag special case."""
    node = g.producer(scope, name, (*REDUCE, "If"), "the bag reduction")
    if node.op_type != "If":
        mode = g.reduce_mode(scope, node, 1, "the bag reduction")
        _rows(g, scope, node.input[0], ctx)
        return mode
    # mean: the last bag is sum / (len(indices) - start) when that is positive.
    _last_test(g, scope, node.input[0], ctx)
    other = subgraph(node, "else_branch")
    last = subgraph(node, "then_branch")
    need(len(other.output) == 1 and len(last.output) == 1, "the last-bag test should produce one row")
    os_, ls = Scope(other, scope), Scope(last, scope)
    mean = g.producer(os_, other.output[0].name, ("ReduceMean",), "the bag reduction")
    g.reduce_mode(os_, mean, 1, "the bag reduction")
    rows = mean.input[0]
    _rows(g, os_, rows, ctx)
    div_if = g.producer(ls, last.output[0].name, ("If",), "the last bag's mean")
    gt = g.producer(ls, div_if.input[0], ("Greater",), "the last bag's count test")
    need(g.one_int(ls, gt.input[1]) == 0, "the last bag's count should be tested against 0")
    sub = g.producer(ls, gt.input[0], ("Sub",), "the last bag's count")
    need(sub.input[1] == ctx.start, "the last bag's count should be len(indices) - start")
    ctx.sizes.append((ls, sub.input[0]))
    dt, de = subgraph(div_if, "then_branch"), subgraph(div_if, "else_branch")
    need(len(dt.output) == 1 and len(de.output) == 1, "the last bag's mean should produce one row")
    ds, ss = Scope(dt, ls), Scope(de, ls)
    div = g.producer(ds, dt.output[0].name, ("Div",), "the last bag's mean")
    cast = g.producer(ds, div.input[1], ("Cast",), "the last bag's count")
    need(cast.input[0] == gt.input[0], "the last bag's mean should divide by its count")
    ident = g.producer(ss, de.output[0].name, ("Identity",), "the last bag's fallback")
    need(ident.input[0] == div.input[0], "the last bag's fallback should be its sum")
    total = g.producer(ls, div.input[0], ("ReduceSum",), "the last bag's sum")
    g.reduce_mode(ls, total, 1, "the last bag's sum")
    need(total.input[0] == rows, "the last bag's sum should reduce the same rows")
    return "mean"


def _last_test(g: Facts, scope: Scope, name: str, ctx: _Ctx) -> None:
    eq = g.producer(scope, name, ("Equal",), "the last-bag test")
    a, b = eq.input
    need(a in ctx.index or b in ctx.index, "the last-bag test should compare the loop counter")
    ctx.lasts.append((scope, b if a in ctx.index else a))


def _rows(g: Facts, scope: Scope, name: str, ctx: _Ctx) -> None:
    """rows[start:end], or If(last bag, rows[start:len(indices)], rows[start:end]).

    The two are equal whenever offsets end at len(indices), which PyTorch requires of its inputs.
    """
    node = g.producer(scope, name, ("Slice", "If"), "the bag's rows")
    if node.op_type == "If":
        _last_test(g, scope, node.input[0], ctx)
        t, e = subgraph(node, "then_branch"), subgraph(node, "else_branch")
        need(len(t.output) == 1 and len(e.output) == 1, "the last-bag test should produce one value")
        ts = Scope(t, scope)
        data, lo, hi = g.slice0(ts, t.output[0].name, "the last bag's rows")
        need(lo == ctx.start, "the last bag's rows should start at the bag start")
        ctx.sizes.append((ts, hi))
        _note_rows(g, data, ctx)
        _rows(g, Scope(e, scope), e.output[0].name, ctx)
        return
    data, lo, hi = g.slice0(scope, name, "the bag's rows")
    need(lo == ctx.start and hi == ctx.end, "the bag's rows should be rows[start:end]")
    _note_rows(g, data, ctx)


def _note_rows(g: Facts, data: str, ctx: _Ctx) -> None:
    need(g.is_top(data), "the bag's rows should be gathered before the loop")
    need(ctx.rows in (None, data), "the bag's rows come from two different tensors")
    ctx.rows = data


def _rows_source(g: Facts, rows: str) -> tuple[str, str, str | None]:
    """rows = [Cast](Gather(table, indices) * weights): returns (table, indices, weights or None)."""
    node = g.producer(g.top, rows, ("Cast", "Mul", "Gather"), "the gathered rows")
    cast_to = None
    if node.op_type == "Cast":
        cast_to = attr(node, "to")
        node = g.producer(g.top, node.input[0], ("Mul", "Gather"), "the gathered rows")
    scale = None
    if node.op_type == "Mul":
        a, b = node.input
        an = g.top.node(a)
        gather, scale = (a, b) if an is not None and an.op_type == "Gather" else (b, a)
        node = g.producer(g.top, gather, ("Gather",), "the gathered rows")
    need(attr(node, "axis", 0) == 0, "the row Gather should use axis 0")
    table, indices = node.input
    _, width = g.float_table(table, "the gathered table")
    if cast_to is not None:
        need(g.elem(table) == ELEM.get(cast_to), "the rows are cast to another type")
    g.index_vector(indices, "the indices")
    weights = None if scale is None else _scale_weights(g, scale, width, indices)
    return table, indices, weights


def _scale_weights(g: Facts, name: str, width: int, indices: str) -> str | None:
    """The per-row factor: all ones (an unweighted bag, None) or unsqueezed 1-D weights."""
    c = g.top.const(name)
    if c is not None:
        need(c.dtype.kind == "f" and bool(np.all(c == 1)), "the rows are scaled by a constant other than 1")
        n = g.len_form(g.top, indices)
        rows_shape = (n[1] if n is not None and n[0] is None else -1, width)
        fits = c.ndim <= 2 and all(d in (1, want) for d, want in zip(
            reversed(c.shape), reversed(rows_shape[2 - c.ndim:]), strict=True))
        need(fits, "the all-ones scale would broadcast the rows")
        return None
    node = g.producer(g.top, name, ("Unsqueeze", "Reshape"), "the per-sample weights")
    if node.op_type == "Unsqueeze":
        need(g.axes(g.top, node) == [1], "the per-sample weights should be unsqueezed at axis 1")
    else:
        need(g.ints(g.top, node.input[1]) == [-1, 1], "the per-sample weights should be reshaped to [-1, 1]")
    w = node.input[0]
    expand = g.top.node(w)
    if expand is not None and expand.op_type == "Expand":
        ones = g.top.const(expand.input[0])
        need(ones is not None and ones.size == 1 and ones.dtype.kind == "f" and bool(np.all(ones == 1)),
             "the rows are scaled by an expanded value other than 1")
        return None
    g.float_vector(w, "the per-sample weights")
    return w
