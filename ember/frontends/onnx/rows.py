"""Single nodes that are embedding operations: Gathers of tables and of rows, and scatters of whole rows.

Everything else without a subgraph stays a host op.
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from .graph import Facts, attr, label


def classify(g: Facts, node: NodeProto, path: str, warnings: list[str]) -> tuple[str, list[str]]:
    """("gather" | "scatter" | "host", the ONNX inputs of the op to emit) for a node without subgraphs."""
    if node.op_type == "Gather" and (is_embedding(g, node) or is_row_gather(g, node)):
        return "gather", [node.input[0], node.input[1]]
    if node.op_type == "GatherND" and attr(node, "batch_dims", 0) == 0 and g.rank(node.input[0]) == 2:
        idx = row_index(g, node.input[1])
        if idx is not None and is_row_gather(g, node, idx):
            return "gather", [node.input[0], idx]
    if node.op_type == "GatherND" and attr(node, "batch_dims", 0) == 0:
        idx = last_axis_index(g, node.input[1])  # one coordinate per lookup: a Gather of the weight's rows
        if idx is not None and is_embedding(g, node, idx):
            return "gather", [node.input[0], idx]
    if node.op_type in ("ScatterElements", "ScatterND"):
        reduction = reduction_of(node)
        idx = scatter_rows_index(g, node)
        shape = g.shape(node.input[1])
        single = shape is not None and None not in shape and int(np.prod(shape, dtype=np.int64)) <= 1
        if reduction == "none" and not single and not (idx is not None and _distinct(g, idx)):
            warnings.append(f"{path}: warning: {label(node)}: reduction 'none' with indices that may repeat: "
                            f"ONNX leaves the result undefined and runtimes differ (the dynamo exporter writes "
                            f"this for scatter_reduce(mean))")
        if idx is not None and reduction in ("add", "mul", "max", "min"):
            return "scatter", [node.input[0], idx, node.input[2]]
    return "host", list(node.input)


def reduction_of(node: NodeProto) -> str:
    reduction = attr(node, "reduction", b"none")
    return reduction.decode() if isinstance(reduction, bytes) else reduction


def _distinct(g: Facts, idx: str) -> bool:
    """Row indices that cannot repeat: the values Unique returns (max_norm's renormalisation scatters
    the renormalised rows back to the table at Unique(indices))."""
    node = g.top.node(idx)
    return node is not None and node.op_type == "Unique" and node.output[0] == idx


def row_index(g: Facts, name: str) -> str | None:
    """`name` = Unsqueeze(idx, -1 or 1) of a 1-D integer index: the index, else None."""
    node = g.top.node(name)
    if node is None or node.op_type != "Unsqueeze" or g.axes(g.top, node) not in ([-1], [1]):
        return None
    idx = node.input[0]
    return idx if g.rank(idx) == 1 and g.elem(idx) in ("i32", "i64") else None


def last_axis_index(g: Facts, name: str) -> str | None:
    """`name` = Unsqueeze(idx) at a new last axis, of an integer index of any known shape (torch.export's ONNX
    exporter writes `weight[idx]` this way): the index, else None."""
    node = g.top.node(name)
    if node is None or node.op_type != "Unsqueeze":
        return None
    idx = node.input[0]
    rank = g.rank(idx)
    if rank is None or g.axes(g.top, node) not in ([-1], [rank]):
        return None
    return idx if g.elem(idx) in ("i32", "i64") else None


def scatter_rows_index(g: Facts, node: NodeProto) -> str | None:
    """The 1-D row index of a scatter that moves whole rows of 2-D data, else None.

    ScatterElements(axis 0) qualifies when its indices are Expand(Unsqueeze(idx)) to the shape of
    the updates (so every column of update e goes to row idx[e]); ScatterND when its indices are
    Unsqueeze(idx) (one row coordinate per update row)."""
    data, indices, updates = node.input[0], node.input[1], node.input[2]
    if g.rank(data) != 2 or g.rank(updates) != 2 or g.elem(data) not in ("f16", "f32", "f64"):
        return None
    if node.op_type == "ScatterND":
        return row_index(g, indices)
    if attr(node, "axis", 0) != 0:
        return None
    upd_shape = g.shape(updates)
    if upd_shape is not None and upd_shape[1] == 1 and row_index(g, indices) is not None:
        return row_index(g, indices)  # one column: Unsqueeze(idx) already names every row
    expand = g.top.node(indices)
    if expand is None or expand.op_type != "Expand":
        return None
    target = expand.input[1]
    shape_of = g.top.node(target)
    same = (shape_of is not None and shape_of.op_type == "Shape" and shape_of.input[0] == updates
            and not shape_of.attribute)
    if not same:
        want = g.shape(updates)
        same = want is not None and None not in want and g.ints(g.top, target) == list(want)
    return row_index(g, expand.input[0]) if same else None


def is_row_gather(g: Facts, node: NodeProto, idx: str | None = None) -> bool:
    """Gather(axis 0) / GatherND of rows of a float tensor computed by the model (features, blocks);
    the trailing extents must be known, the number of rows need not be."""
    if node.op_type not in ("Gather", "GatherND") or (node.op_type == "Gather" and attr(node, "axis", 0) != 0):
        return False
    shape = g.shape(node.input[0])
    index = idx or node.input[1]
    return (shape is not None and len(shape) >= 2 and None not in shape[1:]
            and g.elem(node.input[0]) in ("f16", "f32", "f64")
            and g.elem(index) in ("i32", "i64") and g.shape(index) is not None)


def is_embedding(g: Facts, node: NodeProto, idx: str | None = None) -> bool:
    """Gather(axis 0) of a float weight by integer indices of known rank: nn.Embedding (or a GatherND that reads
    the same rows, by the index `idx` its indices unsqueeze)."""
    if node.op_type == "Gather" and attr(node, "axis", 0) != 0:
        return False
    if node.op_type not in ("Gather", "GatherND") or not g.is_top(node.input[0]):
        return False
    w = g.top.weight(node.input[0])
    index = idx or node.input[1]
    return (w is not None and (w.dtype.kind == "f" or w.dtype.name == "bfloat16") and w.ndim >= 1
            and g.elem(index) in ("i32", "i64") and g.shape(index) is not None)
