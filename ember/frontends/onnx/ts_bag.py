"""The TorchScript exporter's EmbeddingBag (opset <= 17): a Loop with a trip count and one scan output.

    Loop(len(offsets) - 1) { i -> Reduce(Gather(table, Slice(indices, A[i], B[i])) [* weights[A[i]:B[i]]]) }

where A is the offsets and B = Slice(offsets, 1, <large>).  An empty bag reduces nothing, which ONNX
defines as the reduction's identity (0, or -inf for max): the bag keeps `empty = "identity"`.
"""

from __future__ import annotations

from onnx import NodeProto

from .graph import REDUCE, TO_END, Bag, Facts, Scope, attr, need, subgraph


def is_ts_loop(loop: NodeProto) -> bool:
    """The TorchScript exporter's loops carry nothing; the dynamo exporter's carry values."""
    return len(loop.input) == 2


def match_ts(g: Facts, loop: NodeProto) -> Bag:
    body = subgraph(loop, "body")
    need(len(loop.output) == 1 and len(body.input) == 2 and len(body.output) == 2,
         "the bag loop should have a trip count, a condition, no carried values and one scan output (a bag row)")
    bs = Scope(body, g.top)
    it, cond_in = body.input[0].name, body.input[1].name
    need(not loop.input[1] or g.is_true(g.top, loop.input[1]), "the initial condition is not constant true")
    need(g.keeps_going(bs, body.output[0].name, cond_in), "the body's condition output is not constant true")
    red = g.producer(bs, body.output[1].name, tuple(REDUCE), "the scan output")
    mode = g.reduce_mode(bs, red, 0, "the bag reduction")
    rows, scale = red.input[0], None
    mul = bs.node(rows)
    if mul is not None and mul.op_type == "Mul":
        a, b = mul.input
        an = bs.node(a)
        rows, scale = (a, b) if an is not None and an.op_type == "Gather" else (b, a)
    gather = g.producer(bs, rows, ("Gather",), "the bag rows")
    need(attr(gather, "axis", 0) == 0, "the row Gather should use axis 0")
    table = gather.input[0]
    g.float_table(table, "the gathered table")
    indices, us, ue = g.slice0(bs, gather.input[1], "the bag's indices")
    g.index_vector(indices, "the indices")
    s = g.producer(bs, g.unsqueezed(bs, us, 0, "the bag start"), ("Gather",), "the bag start")
    e = g.producer(bs, g.unsqueezed(bs, ue, 0, "the bag end"), ("Gather",), "the bag end")
    need(s.input[1] == it and e.input[1] == it and attr(s, "axis", 0) == 0 and attr(e, "axis", 0) == 0,
         "the bag bounds should be read at the iteration number")
    offsets, ends = s.input[0], e.input[0]
    g.index_vector(offsets, "the offsets")
    data, st, en = g.slice0(g.top, ends, "the bag ends")
    end = g.one_int(g.top, en)
    need(data == offsets and g.one_int(g.top, st) == 1 and end is not None and end >= TO_END,
         "the bag ends should be the offsets without their first entry (Slice(offsets, 1, <large>))")
    weights = None
    if scale is not None:
        ws = g.unsqueezed(bs, scale, 1, "the per-sample weights")
        weights, wst, wen = g.slice0(bs, ws, "the per-sample weights")
        need(wst == us and wen == ue, "the weights should be sliced with the same bounds as the indices")
        g.float_vector(weights, "the per-sample weights")
        need(mode == "sum", "per-sample weights need mode sum")
    bags = g.len_form(g.top, offsets)
    need(bags is not None, "cannot tell the number of bags")
    assert bags is not None
    bags = (bags[0], bags[1] - 1)
    need(loop.input[0] != "" and g.int_form(g.top, loop.input[0]) == bags,
         "the trip count is not provably len(offsets) - 1")
    return Bag(table, indices, offsets, weights, mode, "identity", loop.output[0], bags)
