"""padding_idx in the dynamo exporter's bag loop: each bag first collects the positions of its lookups
that are not the padding row, with an inner loop, then reduces the rows at those positions.

    kept = Loop(cond = start < end) carrying {j = start, kept = []}:
        kept = If(Not(indices[j] (wrapped if negative) == pad), Concat(kept, [j]), kept)
        j = j + 1;  cond = j < end
    row = If(Size(kept) == 0, zeros, Reduce(Gather(rows, kept)))

with start, end = offsets[k], offsets[k + 1].  As in the outer loop, the two carried values are told
apart by what they do, not by their order.
"""

from __future__ import annotations

from dataclasses import dataclass

from onnx import NodeProto

from .carried import carried_values, check_counter, describe_all, split_counter
from .graph import REDUCE, Facts, Mismatch, Scope, attr, need, subgraph


@dataclass
class Pad:
    """What the padded body match finds."""

    offsets: str
    mode: str
    rows: str
    row: int
    indices: str
    wrap: int | None


def match_padded(g: Facts, bs: Scope, eq: NodeProto, es: Scope, row: str, index: set[str]) -> Pad:
    """If(Size(kept) == 0, zeros, Reduce(Gather(rows, kept))), `kept` from the filter loop."""
    sizes = [x for x in eq.input if (n := bs.node(x)) is not None and n.op_type == "Size"]
    need(len(sizes) == 1, "the empty-bag test should compare one Size with 0")
    other = eq.input[1] if eq.input[0] == sizes[0] else eq.input[0]
    need(g.one_int(bs, other) == 0, "the empty-bag test should compare the number of kept lookups with 0")
    kept = g.producer(bs, sizes[0], ("Size",), "the number of kept lookups").input[0]
    red = g.producer(es, row, tuple(REDUCE), "the bag reduction")
    mode = g.reduce_mode(es, red, 1, "the bag reduction")
    rows = g.producer(es, red.input[0], ("Gather",), "the bag's rows")
    need(attr(rows, "axis", 0) == 0 and rows.input[1] == kept, "the bag's rows should be rows[kept]")
    need(g.is_top(rows.input[0]), "the bag's rows should be gathered before the loop")
    loop = g.producer(bs, kept, ("Loop",), "the kept lookups")
    body = subgraph(loop, "body")
    ls = Scope(body, bs)
    vals, scans = carried_values(loop, body)
    need(not loop.input[0] and scans == 0,
         f"the padding filter should be a while-loop without scan outputs; found {describe_all(g, bs, ls, vals)}")
    j, kept_val = split_counter(g, bs, ls, vals, "the padding filter", "the list of kept positions",
                                 lambda c: c.final == kept)
    check_counter(g, bs, ls, j, f"the padding filter's position '{j.inside}'", from_zero=False)
    first = bs.const(kept_val.init)
    need(first is not None and first.shape == (0,) and first.dtype.kind in "iu",
         f"the kept positions should start as an empty integer list; they start as {g.describe(bs, kept_val.init)}")
    start = j.init
    less = g.producer(bs, loop.input[1], ("Less",), "the padding filter's first condition")
    need(less.input[0] == start, "the padding filter should start at the bag start")
    end = less.input[1]
    s, e = (g.producer(bs, x, ("Gather",), "the bag bounds") for x in (start, end))
    need(attr(s, "axis", 0) == 0 and attr(e, "axis", 0) == 0 and s.input[0] == e.input[0]
         and s.input[1] in index and g.plus(bs, e.input[1], s.input[1], 1),
         "the bag bounds should be offsets[k] and offsets[k + 1], k the loop counter")
    step = g.producer(ls, body.output[0].name, ("Less",), "the padding filter's condition")
    need(step.input[0] == j.next and step.input[1] == end, "the padding filter should run while j < end")
    keep = g.producer(ls, kept_val.next, ("If",), "the kept lookups")
    neg = g.producer(ls, keep.input[0], ("Not",), "the padding test")
    same = g.producer(ls, neg.input[0], ("Equal",), "the padding test")
    tb, eb = subgraph(keep, "then_branch"), subgraph(keep, "else_branch")
    need(len(tb.output) == 1 and len(eb.output) == 1, "the padding test should produce one list")
    ts, fs = Scope(tb, ls), Scope(eb, ls)
    need(g.producer(fs, eb.output[0].name, ("Identity",), "a padding lookup's list").input[0] == kept_val.inside,
         "a padding lookup should leave the list as it is")
    cat = g.producer(ts, tb.output[0].name, ("Concat",), "a kept lookup's list")
    need(attr(cat, "axis") == 0 and len(cat.input) == 2 and cat.input[0] == kept_val.inside,
         "a kept lookup should be appended to the list")
    pos = g.producer(ts, cat.input[1], ("Reshape", "Unsqueeze"), "a kept lookup")
    need(pos.input[0] == j.inside and ((pos.op_type == "Reshape" and g.ints(ts, pos.input[1]) == [-1])
                                       or (pos.op_type == "Unsqueeze" and g.axes(ts, pos) == [0])),
         "a kept lookup should append its position j")
    for idx, k in ((same.input[0], same.input[1]), (same.input[1], same.input[0])):
        pad_row = g.one_int(ls, k)
        if pad_row is not None:
            indices, wrap = _looked_up(g, ls, idx, j.inside)
            return Pad(s.input[0], mode, rows.input[0], pad_row, indices, wrap)
    raise Mismatch("the padding test should compare the index with a constant")


def _looked_up(g: Facts, ls: Scope, name: str, j: str) -> tuple[str, int | None]:
    """indices[j], possibly wrapped as If(x < 0, x + n, x): returns (indices, n or None)."""
    wrap = None
    node = g.producer(ls, name, ("Gather", "If"), "the tested index")
    if node.op_type == "If":
        neg = g.producer(ls, node.input[0], ("Less",), "the negative-index test")
        x = neg.input[0]
        need(g.one_int(ls, neg.input[1]) == 0, "the negative-index test should compare with 0")
        tb, eb = subgraph(node, "then_branch"), subgraph(node, "else_branch")
        need(len(tb.output) == 1 and len(eb.output) == 1, "the negative-index test should produce one index")
        add = g.producer(Scope(tb, ls), tb.output[0].name, ("Add",), "a negative index")
        ident = g.producer(Scope(eb, ls), eb.output[0].name, ("Identity",), "a non-negative index")
        need(ident.input[0] == x and x in add.input, "the negative-index test should wrap the index")
        wrap = g.one_int(ls, add.input[1] if add.input[0] == x else add.input[0])
        need(wrap is not None, "a negative index should be wrapped by a constant")
        node = g.producer(ls, x, ("Gather",), "the tested index")
    need(attr(node, "axis", 0) == 0 and node.input[1] == j, "the tested index should be indices[j]")
    need(g.is_top(node.input[0]), "the tested indices are computed inside the loop")
    return node.input[0], wrap
