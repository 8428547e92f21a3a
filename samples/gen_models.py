"""Export the sample and test models with PyTorch (run once; the outputs are committed).

Needs torch==2.13.0 (CPU) and onnxscript; nothing else in Ember imports torch.  For every model
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

OUT = Path(__file__).resolve().parent / "models"
ROWS, DIM = 40, 8


class Embedding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(ROWS, DIM)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.emb(idx)


class Bag(nn.Module):
    def __init__(self, mode: str, last: bool = False) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(ROWS, DIM, mode=mode, include_last_offset=last)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, offsets)


class WeightedBag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(ROWS, DIM, mode="sum")

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, offsets, per_sample_weights=weights)


class PadBag(nn.Module):
    """An EmbeddingBag whose padding row is left out; that row is made nonzero so leaving it out shows."""

    def __init__(self, mode: str, pad: int) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(ROWS, DIM, mode=mode, padding_idx=pad)
        with torch.no_grad():
            self.bag.weight[pad] = torch.linspace(-2.0, 3.0, DIM)

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, offsets)


def mlp(sizes: list[int], last_sigmoid: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        last = i == len(sizes) - 2
        layers.append(nn.Sigmoid() if last and last_sigmoid else nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """Bottom MLP, three sum bags, pairwise dot-product interaction, top MLP (as in DLRM)."""

    def __init__(self) -> None:
        super().__init__()
        self.bot = mlp([13, 16, DIM], last_sigmoid=False)
        self.bags = nn.ModuleList(nn.EmbeddingBag(n, DIM, mode="sum") for n in (60, 40, 30))
        n_feat = 4
        self.top = mlp([DIM + n_feat * (n_feat - 1) // 2, 16, 1], last_sigmoid=True)
        li, lj = torch.tril_indices(n_feat, n_feat, offset=-1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)

    def forward(self, dense: torch.Tensor, idx0: torch.Tensor, off0: torch.Tensor, idx1: torch.Tensor,
                off1: torch.Tensor, idx2: torch.Tensor, off2: torch.Tensor) -> torch.Tensor:
        x = self.bot(dense)
        e = [bag(i, o) for bag, i, o in zip(self.bags, (idx0, idx1, idx2), (off0, off1, off2))]
        t = torch.stack([x, *e], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        flat = z[:, self.li, self.lj]
        return self.top(torch.cat([x, flat], dim=1))


class MessagePassing(nn.Module):
    """PyG-style sum aggregation: gather source rows, scatter-add them into destinations."""

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        msg = x.index_select(0, src)
        out = torch.zeros_like(x)
        return out.scatter_add(0, dst.unsqueeze(-1).expand_as(msg), msg)


class MessagePassingMean(nn.Module):
    """PyG's mean idiom: two scatter-adds (messages and counts), clamp, divide."""

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        msg = x.index_select(0, src)
        total = torch.zeros_like(x).scatter_add(0, dst.unsqueeze(-1).expand_as(msg), msg)
        ones = torch.ones(dst.shape[0], 1, dtype=x.dtype)
        count = torch.zeros(x.shape[0], 1, dtype=x.dtype).scatter_add(0, dst.unsqueeze(-1), ones)
        return total / count.clamp(min=1)


class SpMM(nn.Module):
    """COO sparse x dense written densely: gather columns, scale by values, index_add into rows."""

    def forward(self, x: torch.Tensor, row: torch.Tensor, col: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        msg = x[col] * val.unsqueeze(-1)
        return torch.zeros_like(x).index_add(0, row, msg)


class TransE(nn.Module):
    """Knowledge-graph scoring: -|h + r - t|_1 per (head, relation, tail) triple."""

    def __init__(self) -> None:
        super().__init__()
        self.entity = nn.Embedding(50, DIM)
        self.relation = nn.Embedding(7, DIM)

    def forward(self, head: torch.Tensor, rel: torch.Tensor, tail: torch.Tensor) -> torch.Tensor:
        h, r, t = self.entity(head), self.relation(rel), self.entity(tail)
        return -(h + r - t).abs().sum(dim=-1)


class BlockSparseAttention(nn.Module):
    """Each query block attends to k key/value blocks it gathers by index (block-sparse attention)."""

    def __init__(self, block: int = 4) -> None:
        super().__init__()
        self.block = block

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
        n, d = q.shape
        nb = n // self.block
        kb = k.reshape(nb, self.block, d).index_select(0, blocks.reshape(-1))  # [nb * kk, block, d]
        vb = v.reshape(nb, self.block, d).index_select(0, blocks.reshape(-1))
        kk = blocks.shape[1]
        kb = kb.reshape(nb, kk * self.block, d)
        vb = vb.reshape(nb, kk * self.block, d)
        qb = q.reshape(nb, self.block, d)
        att = torch.softmax(qb @ kb.transpose(1, 2) / d**0.5, dim=-1)
        return (att @ vb).reshape(n, d)


def graph_cases() -> dict[str, tuple[nn.Module, dict[str, np.ndarray], tuple[str, ...]]]:
    """Graph workloads, with the exporters that support them (index_add exports only with dynamo)."""
    rng = np.random.default_rng(11)
    nodes, edges, feat = 12, 30, 8
    x = rng.standard_normal((nodes, feat)).astype(np.float32)
    src = rng.integers(0, nodes, size=edges, dtype=np.int64)
    dst = rng.integers(0, nodes, size=edges, dtype=np.int64)
    val = rng.standard_normal(edges).astype(np.float32)
    return {
        "mp_sum": (MessagePassing(), {"x": x, "src": src, "dst": dst}, ("ts", "dynamo")),
        "mp_mean": (MessagePassingMean(), {"x": x, "src": src, "dst": dst}, ("ts", "dynamo")),
        "spmm": (SpMM(), {"x": x, "row": dst, "col": src, "val": val}, ("dynamo",)),
        "kg_transe": (TransE(), {"head": rng.integers(0, 50, size=9), "rel": rng.integers(0, 7, size=9),
                                 "tail": rng.integers(0, 50, size=9)}, ("ts", "dynamo")),
        "spattn": (BlockSparseAttention(), {
            "q": rng.standard_normal((16, DIM)).astype(np.float32),
            "k": rng.standard_normal((16, DIM)).astype(np.float32),
            "v": rng.standard_normal((16, DIM)).astype(np.float32),
            "blocks": rng.integers(0, 4, size=(4, 2))}, ("ts", "dynamo")),
    }


class MessagePassingInPlace(nn.Module):
    """Sum aggregation into a buffer updated in place: new_zeros, view(-1, 1).expand(-1, F), scatter_add_."""

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        msg = x.index_select(0, src)
        out = x.new_zeros(x.shape)
        out.scatter_add_(0, dst.view(-1, 1).expand(-1, x.size(1)), msg)
        return out


class MessagePassingMeanInPlace(nn.Module):
    """PyG's mean written with index_add_: messages and per-node counts (a 1-D scatter), clamp(min=1)."""

    def forward(self, x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        out = torch.zeros(x.size(0), x.size(1), dtype=x.dtype)
        out.index_add_(0, dst, x[src])
        count = x.new_zeros(x.size(0))
        count.index_add_(0, dst, torch.ones_like(dst, dtype=x.dtype))
        return out / count.clamp(min=1).unsqueeze(-1)


def inplace_cases() -> dict[str, tuple[nn.Module, dict[str, np.ndarray]]]:
    """In-place forms of the graph models, on the inputs of mp_sum (saved as torch archives only)."""
    feeds = graph_cases()["mp_sum"][1]
    return {"mp_sum_inplace": (MessagePassingInPlace(), dict(feeds)),
            "mp_mean_inplace": (MessagePassingMeanInPlace(), dict(feeds))}


class GatedBag(nn.Module):
    """A bag whose forward branches on a flag and loops: scripted, its code keeps that control flow."""

    def __init__(self, scale: bool) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(ROWS, DIM, mode="mean")
        self.scale = scale

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        y = self.bag(indices, offsets)
        if self.scale:
            y = y * 0.5
        for _ in range(2):
            y = torch.tanh(y) + y
        return y


def bag_inputs(rng: np.random.Generator, rows: int, lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    indices = rng.integers(0, rows, size=sum(lengths), dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return indices, offsets


def cases() -> dict[str, tuple[nn.Module, dict[str, np.ndarray]]]:
    rng = np.random.default_rng(7)
    lengths = [3, 0, 5, 1, 4, 0]
    ind, off = bag_inputs(rng, ROWS, lengths)
    last = np.concatenate([off, [len(ind)]]).astype(np.int64)
    w = rng.standard_normal(len(ind)).astype(np.float32)
    out: dict[str, tuple[nn.Module, dict[str, np.ndarray]]] = {
        "embedding": (Embedding(), {"idx": rng.integers(0, ROWS, size=(4, 3), dtype=np.int64)}),
        "bag_sum": (Bag("sum"), {"indices": ind, "offsets": off}),
        "bag_mean": (Bag("mean"), {"indices": ind, "offsets": off}),
        "bag_max": (Bag("max"), {"indices": ind, "offsets": off}),
        "bag_last": (Bag("sum", last=True), {"indices": ind, "offsets": last}),
        "bag_weighted": (WeightedBag(), {"indices": ind, "offsets": off, "weights": w}),
    }
    batch = 6
    feeds: dict[str, np.ndarray] = {"dense": rng.standard_normal((batch, 13)).astype(np.float32)}
    for k, rows in enumerate((60, 40, 30)):
        lens = [int(n) for n in rng.integers(0, 6, size=batch)]
        feeds[f"idx{k}"], feeds[f"off{k}"] = bag_inputs(rng, rows, lens)
    out["dlrm"] = (DLRM(), feeds)
    return out


PAD = 3


def pad_cases() -> dict[str, tuple[nn.Module, dict[str, np.ndarray]]]:
    """Bags with padding_idx: some bags hold the padding index, bag 2 holds only it, bag 4 is empty."""
    torch.manual_seed(5)
    rng = np.random.default_rng(13)
    lengths = [4, 2, 3, 5, 0, 3]
    ind, off = bag_inputs(rng, ROWS, lengths)
    ind[ind == PAD] = PAD + 1  # padding only where placed below
    ind[[0, 2, 9, 12, 13]] = PAD
    ind[6:9] = PAD
    feeds = {"indices": ind, "offsets": off}
    return {f"bag_pad_{mode}": (PadBag(mode, PAD), dict(feeds)) for mode in ("sum", "mean", "max")}


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
