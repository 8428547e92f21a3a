"""Aten operators -> Ember IR, shared by the TorchScript (.pt) and torch.export (.pt2) frontends.

Both formats name PyTorch's aten operators (`embedding`, `embedding_bag`, `linear`, `bmm`, ...), the
first positionally in TorchScript source, the second with named arguments in JSON; `AtenLowering`
turns each call into IR.  The modules follow the kinds of operator:

    values.py     what decoded arguments are, element types, shape arithmetic
    archive.py    reading the zip archives and the tensors in them
    base.py       the operator table, argument binding, type promotion, the IR emitted
    layout.py     views, slicing, joins, factories, index tables, sizes
    dense.py      arithmetic, activations, normalization, products, attention, reductions
    embedding.py  embeddings, bags, row gathers and scatters: the `emb` ops

docs/operators.md lists every operator with what it becomes; tests/gen_operators_doc.py writes it
from `OPERATORS`.
"""

from __future__ import annotations

from .archive import has_member, open_zip, read_member, strided_tensor
from .base import DOC, OPERATORS, Operator, build_module
from .embedding import EmbeddingOps
from .values import ELEM, MAX_DEPTH, OPSET, TorchDType, Unsupported, Weight, dim

__all__ = ["DOC", "ELEM", "MAX_DEPTH", "OPERATORS", "OPSET", "AtenLowering", "Operator", "TorchDType",
           "Unsupported", "Weight", "build_module", "dim", "has_member", "open_zip", "read_member",
           "strided_tensor"]


class AtenLowering(EmbeddingOps):
    """Every aten operator Ember translates, emitted into one block (see `Lowering`)."""
