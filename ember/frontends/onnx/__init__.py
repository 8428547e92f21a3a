"""ONNX frontend: import an exported PyTorch model as an `emb`-level module.

PyTorch has no ONNX operator for EmbeddingBag, so both exporters spell it as a `Loop`.  This
importer recognises those loops by how values flow through them (op types and dataflow, never node
names or the order of carried values) and raises them back to `emb.bag`; a `Gather` on a float
weight becomes `emb.gather`.  Everything else without a subgraph stays a `host.onnx` op.  A loop
that only *looks* like a bag is an error saying what was expected and what was found: a silently
wrong op is worse than a refusal.

    load.py        reading the file, constants, `load_weights`
    graph.py       scopes through subgraphs, static facts, symbolic lengths, shared structural tests
    carried.py     a Loop's carried values, told apart by what they do
    ts_bag.py      the TorchScript exporter's bag loop (opset <= 17)
    dynamo_bag.py  the dynamo exporter's bag loop (opset >= 18)
    dynamo_pad.py  its padding_idx filter loop
    rows.py        single nodes that are embedding ops (gathers, row scatters)
    importer.py    planning and emission of the module

Weights are not copied into the IR: each initializer or top-level `Constant` becomes a `param` naming
it, and `load_weights` reads the same names back from the ONNX file.
"""

from .importer import import_onnx
from .load import load_weights

__all__ = ["import_onnx", "load_weights"]
