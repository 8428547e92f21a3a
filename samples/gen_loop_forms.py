"""Export nn.EmbeddingBag in every loop form the dynamo exporter writes (run once; outputs are committed).

Needs torch==2.13.0 (CPU), onnxscript and onnxruntime; nothing in Ember imports torch.  The exporter
writes a bag as a Loop carrying a counter and a sequence of rows, in an order that depends on the
hash seed of the exporting process.  So each export runs in a subprocess with PYTHONHASHSEED set,
trying seeds until the wanted order comes out, for every

    variant   sum, mean, max, weighted (per_sample_weights), last (include_last_offset),
              pad (padding_idx), 2d (2-D input, mean), maxnorm (max_norm)
    opset     18, 20 (torch 2.13's default), 21
    shapes    static, or dynamic (dynamic_shapes: every extent a Dim)
    order     seq-first or counter-first (the carried values of the bag loop)

into ``loop_forms/<variant>.o<opset>.<shapes>.<order>.onnx``, without the node metadata (stack
traces, most of each file).  ``loop_forms/<variant>.<shapes>.npz`` holds the test inputs (``in.<name>``,
of other sizes than the exported example when shapes are dynamic), onnxruntime's output (``ort``,
the same for every form of the group: checked) and PyTorch's (``torch``).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

OUT = Path(__file__).resolve().parent / "loop_forms"
ROWS, DIM, PAD = 20, 4, 3
VARIANTS = ("sum", "mean", "max", "weighted", "last", "pad", "2d", "maxnorm")
OPSETS = (18, 20, 21)
SHAPES = ("static", "dynamic")
ORDERS = ("seq-first", "counter-first")


class Bag(nn.Module):
    """One EmbeddingBag, called the way the variant calls it."""

    def __init__(self, variant: str) -> None:
        super().__init__()
        self.variant = variant
        kw: dict[str, object] = {"mode": variant if variant in ("mean", "max") else "sum"}
        if variant == "2d":
            kw["mode"] = "mean"
        if variant == "pad":
            kw["padding_idx"] = PAD
        if variant == "last":
            kw["include_last_offset"] = True
        if variant == "maxnorm":
            kw["max_norm"] = 1.0
        torch.manual_seed(0)
        self.bag = nn.EmbeddingBag(ROWS, DIM, **kw)  # type: ignore[arg-type]
        if variant == "pad":  # a nonzero padding row, so that leaving it out shows
            with torch.no_grad():
                self.bag.weight[PAD] = torch.linspace(-2.0, 3.0, DIM)

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        if self.variant == "weighted":
            return self.bag(args[0], args[1], per_sample_weights=args[2])
        if self.variant == "2d":
            return self.bag(args[0])
        return self.bag(args[0], args[1])


def inputs(variant: str, dynamic: bool, example: bool) -> dict[str, np.ndarray]:
    """The export example, or the test inputs (other sizes when dynamic: more bags, an empty last bag).

    Every set has an empty bag, a repeated row (max_norm renormalises it once) and the padding row."""
    if variant == "2d":
        shape = (3, 4) if example or not dynamic else (5, 3)
        rng = np.random.default_rng(1 if example else 2)
        ind = rng.integers(0, ROWS, size=shape, dtype=np.int64)
        ind[0, 0] = ind[1, 1] = PAD
        return {"indices": ind}
    if example or not dynamic:
        ind = np.array([1, 2, 3, 4, 5, 6, 7, 3, 9] if example else [8, 3, 3, 0, 11, 19, 3, 5, 8], dtype=np.int64)
        off = np.array([0, 3, 3, 7] if example else [0, 2, 2, 6], dtype=np.int64)
    else:
        ind = np.array([8, 3, 3, 0, 11, 19, 3, 5, 8, 12, 1, 3, 17], dtype=np.int64)
        off = np.array([0, 2, 2, 6, 7, 13], dtype=np.int64)
    if variant == "last":
        off = np.append(off, len(ind))
    feeds = {"indices": ind, "offsets": off}
    if variant == "weighted":
        feeds["weights"] = np.random.default_rng(3).standard_normal(len(ind)).astype(np.float32)
    return feeds


def export_one(variant: str, opset: int, shapes: str, out: str) -> None:
    """In the child process: one export with this process's hash seed."""
    feeds = inputs(variant, shapes == "dynamic", example=True)
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    dyn = None
    if shapes == "dynamic":
        n, b = torch.export.Dim("N"), torch.export.Dim("B")
        if variant == "2d":
            dyn = {"args": ({0: b, 1: n},)}
        else:
            dyn = {"args": tuple({0: n if k != "offsets" else b} for k in feeds)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Bag(variant).eval(), args, out, dynamo=True, opset_version=opset, input_names=list(feeds),
                          output_names=["output"], external_data=False, dynamic_shapes=dyn)


def order_of(model: onnx.ModelProto) -> str:
    """Which carried value of the (outer) bag loop comes first."""
    loop = next(n for n in model.graph.node if n.op_type == "Loop")
    producers = {o: n for n in model.graph.node for o in n.output}
    first = producers.get(loop.input[2])
    return "seq-first" if first is not None and first.op_type == "SequenceEmpty" else "counter-first"


def strip(graph: onnx.GraphProto) -> None:
    """Drop node metadata (the exporter's stack traces and scopes): tests need none of it."""
    for node in graph.node:
        del node.metadata_props[:]
        node.doc_string = ""
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                strip(a.g)


def export(variant: str, opset: int, shapes: str, order: str) -> Path:
    path = OUT / f"{variant}.o{opset}.{shapes}.{order}.onnx"
    for seed in range(12):
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        subprocess.run([sys.executable, __file__, "--one", variant, str(opset), shapes, str(path)], env=env,
                       check=True, capture_output=True)
        model = onnx.load(str(path))
        if order_of(model) == order:
            strip(model.graph)
            onnx.save(model, str(path))
            print(f"wrote {path.name} (PYTHONHASHSEED={seed})")
            return path
    raise SystemExit(f"{path.name}: no seed in 0..11 gave the order {order}")


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        export_one(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
        return
    OUT.mkdir(exist_ok=True)
    for variant in VARIANTS:
        for shapes in SHAPES:
            feeds = inputs(variant, shapes == "dynamic", example=False)
            with torch.no_grad():  # a fresh module: max_norm renormalises the table in place
                want = copy.deepcopy(Bag(variant)).eval()(*(torch.from_numpy(v) for v in feeds.values())).numpy()
            got = None
            for opset in OPSETS:
                for order in ORDERS:
                    path = export(variant, opset, shapes, order)
                    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
                    out = sess.run(None, feeds)[0]
                    assert got is None or np.array_equal(out, got), f"{path.name}: onnxruntime differs between forms"
                    got = out
            assert got is not None
            if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                print(f"note: {variant}.{shapes}: onnxruntime differs from PyTorch", file=sys.stderr)
            np.savez(OUT / f"{variant}.{shapes}.npz", ort=got, torch=want, **{f"in.{k}": v for k, v in feeds.items()})


if __name__ == "__main__":
    main()
