"""Export the sample and test models with PyTorch (run once; the outputs are committed).

Needs torch==2.13.0 (CPU) and onnxscript; nothing else in Ember imports torch.  The models are
defined in ``zoo.py``; the cases here give them their sizes and inputs.  For every model
and both exporters it writes ``<name>.<exporter>.onnx``, ``<name>.in.npz`` (named after the ONNX
graph inputs) and ``<name>.<exporter>.out.npz`` (onnxruntime's outputs, the reference the tests use).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo  # noqa: E402  (the models are defined there)

OUT = Path(__file__).resolve().parent / "models"
ROWS, DIM = 40, 8
PAD = zoo.PAD


def bag(mode: str, **kw: object) -> nn.EmbeddingBag:
    return nn.EmbeddingBag(ROWS, DIM, mode=mode, **kw)  # type: ignore[arg-type]


def cases() -> dict[str, tuple[nn.Module, dict[str, np.ndarray]]]:
    """The lookups and the DLRM-like network; their weights are drawn in this order after torch seed 0."""
    rng = np.random.default_rng(7)
    lengths = [3, 0, 5, 1, 4, 0]
    ind, off = zoo.bag_inputs(rng, ROWS, lengths)
    last = np.concatenate([off, [len(ind)]]).astype(np.int64)
    w = rng.standard_normal(len(ind)).astype(np.float32)
    idx = rng.integers(0, ROWS, size=(4, 3), dtype=np.int64)
    out: dict[str, tuple[nn.Module, dict[str, np.ndarray]]] = {
        "embedding": (zoo.LookupIdx(nn.Embedding(ROWS, DIM)), {"idx": idx}),
        "bag_sum": (zoo.Bag(bag("sum")), {"indices": ind, "offsets": off}),
        "bag_mean": (zoo.Bag(bag("mean")), {"indices": ind, "offsets": off}),
        "bag_max": (zoo.Bag(bag("max")), {"indices": ind, "offsets": off}),
        "bag_last": (zoo.Bag(bag("sum", include_last_offset=True)), {"indices": ind, "offsets": last}),
        "bag_weighted": (zoo.WeightedBag(bag("sum")), {"indices": ind, "offsets": off, "weights": w}),
    }
    batch = 6
    feeds: dict[str, np.ndarray] = {"dense": rng.standard_normal((batch, 13)).astype(np.float32)}
    for k, rows in enumerate((60, 40, 30)):
        lens = [int(n) for n in rng.integers(0, 6, size=batch)]
        feeds[f"idx{k}"], feeds[f"off{k}"] = zoo.bag_inputs(rng, rows, lens)
    out["dlrm"] = (zoo.DLRMLike((60, 40, 30), DIM), feeds)
    return out


def pad_cases() -> dict[str, tuple[nn.Module, dict[str, np.ndarray]]]:
    """Bags with padding_idx: some bags hold the padding index, bag 2 holds only it, bag 4 is empty."""
    torch.manual_seed(5)
    rng = np.random.default_rng(13)
    lengths = [4, 2, 3, 5, 0, 3]
    ind, off = zoo.bag_inputs(rng, ROWS, lengths)
    ind[ind == PAD] = PAD + 1  # padding only where placed below
    ind[[0, 2, 9, 12, 13]] = PAD
    ind[6:9] = PAD
    feeds = {"indices": ind, "offsets": off}
    return {f"bag_pad_{mode}": (zoo.Bag(zoo.padded(bag(mode, padding_idx=PAD))), dict(feeds))
            for mode in ("sum", "mean", "max")}


def graph_cases() -> dict[str, tuple[nn.Module, dict[str, np.ndarray], tuple[str, ...]]]:
    """Graph workloads, with the exporters that support them (index_add exports only with dynamo)."""
    rng = np.random.default_rng(11)
    nodes, edges, feat = 12, 30, 8
    x = rng.standard_normal((nodes, feat)).astype(np.float32)
    src = rng.integers(0, nodes, size=edges, dtype=np.int64)
    dst = rng.integers(0, nodes, size=edges, dtype=np.int64)
    val = rng.standard_normal(edges).astype(np.float32)
    return {
        "mp_sum": (zoo.MessagePassing(), {"x": x, "src": src, "dst": dst}, ("ts", "dynamo")),
        "mp_mean": (zoo.MessagePassingMean(), {"x": x, "src": src, "dst": dst}, ("ts", "dynamo")),
        "spmm": (zoo.SpMM(), {"x": x, "row": dst, "col": src, "val": val}, ("dynamo",)),
        "kg_transe": (zoo.TransE(50, 7, DIM), {"head": rng.integers(0, 50, size=9),
                                               "rel": rng.integers(0, 7, size=9),
                                               "tail": rng.integers(0, 50, size=9)}, ("ts", "dynamo")),
        "spattn": (zoo.BlockSparseAttention(), {
            "q": rng.standard_normal((16, DIM)).astype(np.float32),
            "k": rng.standard_normal((16, DIM)).astype(np.float32),
            "v": rng.standard_normal((16, DIM)).astype(np.float32),
            "blocks": rng.integers(0, 4, size=(4, 2))}, ("ts", "dynamo")),
        # drawn last, so the models above keep their inputs
        "gcn": (zoo.GCNLayer((rng.standard_normal((feat, 16)) / np.sqrt(feat)).astype(np.float32)),
                {"x": x, "row": dst, "col": src, "val": val}, ("dynamo",)),
    }


def inplace_cases() -> dict[str, tuple[nn.Module, dict[str, np.ndarray]]]:
    """In-place forms of the graph models, on the inputs of mp_sum (saved as torch archives only)."""
    feeds = graph_cases()["mp_sum"][1]
    return {"mp_sum_inplace": (zoo.MessagePassingInPlace(), dict(feeds)),
            "mp_mean_inplace": (zoo.MessagePassingMeanInPlace(), dict(feeds))}


def export(name: str, model: nn.Module, feeds: dict[str, np.ndarray], exporter: str) -> None:
    path = OUT / f"{name}.{exporter}.onnx"
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    names = list(feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "ts":
            torch.onnx.export(model, args, str(path), dynamo=False, opset_version=17,
                              input_names=names, output_names=["output"])
        else:
            torch.onnx.export(model, args, str(path), dynamo=True, opset_version=18,
                              input_names=names, output_names=["output"], external_data=False)
    m = onnx.load(str(path))
    graph_inputs = [i.name for i in m.graph.input]
    run_feeds = {k: feeds[k] for k in graph_inputs}
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, run_feeds)
    with torch.no_grad():
        want = model(*args).numpy()
    if not np.allclose(got[0], want, rtol=1e-5, atol=1e-6, equal_nan=True):
        print(f"note: {path.name}: onnxruntime differs from PyTorch (ONNX semantics kept)", file=sys.stderr)
    np.savez(OUT / f"{name}.{exporter}.out.npz", **{o.name: v for o, v in zip(m.graph.output, got)})
    np.savez(OUT / f"{name}.in.npz", **feeds)
    print(f"wrote {path.name}: inputs {graph_inputs}")


def main() -> None:
    if sys.argv[1:] == ["--graphs"]:  # only the graph models (the others stay byte-identical)
        OUT.mkdir(exist_ok=True)
        for name, (model, feeds, exporters) in graph_cases().items():
            for exporter in exporters:
                export(name, model, feeds, exporter)
        return
    if sys.argv[1:] == ["--pad"]:  # only the padding_idx bags; the TorchScript exporter refuses padding_idx
        OUT.mkdir(exist_ok=True)
        for name, (model, feeds) in pad_cases().items():
            model.eval()
            export(name, model, feeds, "dynamo")
        return
    torch.manual_seed(0)
    OUT.mkdir(exist_ok=True)
    for name, (model, feeds) in cases().items():
        model.eval()
        for exporter in ("ts", "dynamo"):
            export(name, model, feeds, exporter)
    for name, (model, feeds, exporters) in graph_cases().items():
        for exporter in exporters:
            export(name, model, feeds, exporter)


if __name__ == "__main__":
    main()
