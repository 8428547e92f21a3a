"""Build the real-model corpus in ``samples/corpus`` (run once; the outputs are committed).

Needs torch==2.13.0 (CPU), onnxscript 0.7.2, onnxruntime and transformers 5.23.0; the TorchRec model
also needs torchrec 1.9.2 with fbgemm-gpu-cpu 1.8.0 (docs/corpus.md says why that pair, and how to
make a throwaway environment to run ``--only torchrec_ebc`` in).  Nothing in Ember imports torch: the
tests only read what this script writes.

Every model is exported every way it can be:

* the TorchScript ONNX exporter (``dynamo=False``, its default opset), static shapes;
* the dynamo ONNX exporter at opsets 18 and 20, with and without ``dynamic_shapes`` (the batch and the
  number of indices), each under the hash seeds of ``HASH_SEEDS``: the exporter lays out the carried
  values of an EmbeddingBag ``Loop`` in an order that depends on ``PYTHONHASHSEED``, so the dynamo
  exports run in subprocesses with that variable set, and each file's order is read back and recorded;
* ``.pt`` (torch.jit.trace + torch.jit.save) and ``.pt2`` (torch.export.export + torch.export.save, with
  and without ``dynamic_shapes``).

An exporter that refuses a model is a fact recorded in the manifest, not a failure.  Identical files
(same bytes) are stored once.  The dynamo exports lose their nodes' ``metadata_props`` (stack traces,
which would be three quarters of the corpus) and nothing else.

Per model, ``samples/corpus/<model>/`` holds ``in.npz`` (keyed by
``forward``'s parameters, which the exports keep as input names), ``torch.out.npz`` (eager PyTorch:
the reference for ``.pt``/``.pt2``) and for every ``.onnx`` file ``<file>.out.npz`` (onnxruntime's
outputs keyed by the graph's output names: the reference for that file).  ``manifest.json`` lists every
export attempt: model, format, exporter, opset, dynamic shapes, hash seed, file or refusal, loop order,
reference file, and how far onnxruntime is from eager PyTorch.

Usage: ``python samples/gen_corpus.py [--only NAME,NAME...]``.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import traceback
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_models import bag_inputs  # noqa: E402  (the samples' index/offset maker)

OUT = Path(__file__).resolve().parent / "corpus"
# PYTHONHASHSEED values for the dynamo exports; on torch 2.13.0 + onnxscript 0.7.2 (CPython 3.11) seed 0
# puts an EmbeddingBag Loop's carried values in the order [result, index_tensor] and seed 1 in the order
# [index_tensor, result].  The manifest records the order each file actually has.
HASH_SEEDS = (0, 1)
OPSETS = (18, 20)
RTOL, ATOL = 1e-4, 1e-5
ROWS, DIM = 40, 8


@dataclass
class Case:
    """A model in eval mode, its inputs (forward's parameter names, in order) and which of their
    dimensions may vary (``{input: {axis: dim name}}``; inputs sharing a dim name share a Dim)."""

    model: nn.Module
    feeds: dict[str, np.ndarray]
    dynamic: dict[str, dict[int, str]]
    least: dict[str, int] = field(default_factory=dict)  # a dim's smallest size, where torch.export needs one


# ---------------------------------------------------------------------------------------------
# torch.nn embedding variants


class Lookup(nn.Module):
    """Wraps one embedding module so every variant has a forward with named tensor parameters."""

    def __init__(self, emb: nn.Module) -> None:
        super().__init__()
        self.emb = emb

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return self.emb(indices)


class BagWithOffsets(nn.Module):
    def __init__(self, bag: nn.EmbeddingBag) -> None:
        super().__init__()
        self.bag = bag

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, offsets)


class WeightedBag(nn.Module):
    def __init__(self, bag: nn.EmbeddingBag) -> None:
        super().__init__()
        self.bag = bag

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, offsets, per_sample_weights=weights)


class WeightedBag2D(nn.Module):
    def __init__(self, bag: nn.EmbeddingBag) -> None:
        super().__init__()
        self.bag = bag

    def forward(self, indices: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, per_sample_weights=weights)


class Take(nn.Module):
    """torch.take on a table: element lookups into the flattened table."""

    def __init__(self) -> None:
        super().__init__()
        self.table = nn.Parameter(torch.randn(ROWS, DIM))

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return torch.take(self.table, indices)


class FunctionalBag(nn.Module):
    """F.embedding_bag on a plain parameter (no nn.EmbeddingBag module)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(ROWS, DIM))

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return F.embedding_bag(indices, self.weight, offsets, mode="mean")


class FunctionalEmbedding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(ROWS, DIM))

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return F.embedding(indices, self.weight)


PAD = 3


def padded(module: nn.Embedding | nn.EmbeddingBag) -> nn.Embedding | nn.EmbeddingBag:
    """Make the padding row nonzero so that leaving it out (or not) shows in the outputs."""
    with torch.no_grad():
        module.weight[PAD] = torch.linspace(-2.0, 3.0, DIM)
    return module


def embedding_cases() -> dict[str, Callable[[], Case]]:
    """The torch.nn embedding variants, on small tables; bags include empty ones, padded bags the padding row."""
    one_d = {"indices": {0: "num_indices"}, "offsets": {0: "batch"}}
    two_d = {"indices": {0: "batch"}}

    def feeds_1d(seed: int, pad: bool = False, last: bool = False) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        indices, offsets = bag_inputs(rng, ROWS, [3, 0, 5, 1, 4, 2])
        if pad:
            indices[indices == PAD] = PAD + 1
            indices[[0, 4, 5, 8, 12]] = PAD  # bags 0, 2 and 4 hold it among others, bag 3 holds only it
        if last:
            offsets = np.append(offsets, len(indices)).astype(np.int64)
        return {"indices": indices, "offsets": offsets}

    def feeds_2d(seed: int, pad: bool = False) -> dict[str, np.ndarray]:
        indices = np.random.default_rng(seed).integers(0, ROWS, size=(5, 3), dtype=np.int64)
        if pad:
            indices[indices == PAD] = PAD + 1
            indices[1, 0] = PAD
            indices[3] = PAD  # a bag of nothing but padding
        return {"indices": indices}

    def bag(mode: str, **kw: object) -> nn.EmbeddingBag:
        return nn.EmbeddingBag(ROWS, DIM, mode=mode, **kw)  # type: ignore[arg-type]

    def weighted(seed: int) -> dict[str, np.ndarray]:
        f = feeds_1d(seed)
        f["weights"] = np.random.default_rng(seed + 100).standard_normal(len(f["indices"])).astype(np.float32)
        return f

    def weighted_2d(seed: int) -> dict[str, np.ndarray]:
        f = feeds_2d(seed)
        f["weights"] = np.random.default_rng(seed + 100).standard_normal(f["indices"].shape).astype(np.float32)
        return f

    large = 3.0  # max_norm below the norm of most rows, so the renormalisation shows
    out: dict[str, Callable[[], Case]] = {
        "embedding": lambda: Case(Lookup(nn.Embedding(ROWS, DIM)), feeds_2d(1), two_d),
        "embedding_padding_idx": lambda: Case(Lookup(padded(nn.Embedding(ROWS, DIM, padding_idx=PAD))),
                                              feeds_2d(2, pad=True), two_d),
        "embedding_max_norm": lambda: Case(Lookup(nn.Embedding(ROWS, DIM, max_norm=large)), feeds_2d(3), two_d),
        "f_embedding": lambda: Case(FunctionalEmbedding(), feeds_2d(4), two_d),
        "take": lambda: Case(Take(), {"indices": np.random.default_rng(5).integers(0, ROWS * DIM, size=(4, 6))},
                             {"indices": {0: "batch"}}),
        "f_embedding_bag": lambda: Case(FunctionalBag(), feeds_1d(6), one_d),
        "bag_max_norm": lambda: Case(BagWithOffsets(bag("sum", max_norm=large)), feeds_1d(7), one_d),
        "bag_last": lambda: Case(BagWithOffsets(bag("sum", include_last_offset=True)), feeds_1d(8, last=True),
                                 one_d, least={"batch": 3}),  # torch.export's guard: two bags at least
        "bag_weighted": lambda: Case(WeightedBag(bag("sum")), weighted(9),
                                     {**one_d, "weights": {0: "num_indices"}}),
        "bag_weighted_2d": lambda: Case(WeightedBag2D(bag("sum")), weighted_2d(10),
                                        {**two_d, "weights": {0: "batch"}}),
    }
    for k, mode in enumerate(("sum", "mean", "max")):
        out[f"bag_{mode}"] = (lambda m=mode, s=20 + k: Case(BagWithOffsets(bag(m)), feeds_1d(s), one_d))
        out[f"bag_{mode}_2d"] = (lambda m=mode, s=30 + k: Case(Lookup(bag(m)), feeds_2d(s), two_d))
        out[f"bag_pad_{mode}"] = (lambda m=mode, s=40 + k: Case(BagWithOffsets(padded(bag(m, padding_idx=PAD))),
                                                                 feeds_1d(s, pad=True), one_d))
    return out


# ---------------------------------------------------------------------------------------------
# DLRM, after facebookresearch/dlrm's dlrm_s_pytorch.py (DLRM_Net with the "dot" interaction)


class DLRMNet(nn.Module):
    """EmbeddingBag tables, a bottom MLP for the dense features, the pairwise dot interaction of the
    dense vector and the pooled embeddings (bmm with its own transpose, then the strictly lower
    triangle, or the lower triangle with the diagonal when ``itself``), concatenated with the dense
    vector, and a top MLP ending in a sigmoid.  ``tril`` selects the triangle with torch.tril_indices
    (the reference's "approach 1") instead of index lists built in Python (its default, "approach 2").
    The forward takes the offsets and indices of each table as separate tensors so that every export
    keeps them as named inputs."""

    def __init__(self, m_spa: int, ln_emb: list[int], ln_bot: list[int], ln_top: list[int],
                 itself: bool, tril: bool, seed: int) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.itself, self.tril = itself, tril
        self.bot_l = self.create_mlp(rng, ln_bot, sigmoid_layer=-1)
        self.top_l = self.create_mlp(rng, ln_top, sigmoid_layer=len(ln_top) - 2)
        self.emb_l = nn.ModuleList()
        for n in ln_emb:
            bag = nn.EmbeddingBag(n, m_spa, mode="sum")
            bound = np.sqrt(1 / n)
            bag.weight.data = torch.tensor(rng.uniform(-bound, bound, size=(n, m_spa)).astype(np.float32))
            self.emb_l.append(bag)

    @staticmethod
    def create_mlp(rng: np.random.Generator, ln: list[int], sigmoid_layer: int) -> nn.Sequential:
        """Linear layers with the reference's Gaussian initialisation, ReLU after each but the sigmoid one."""
        layers: list[nn.Module] = []
        for i, (n, m) in enumerate(zip(ln[:-1], ln[1:])):
            linear = nn.Linear(n, m)
            linear.weight.data = torch.tensor(rng.normal(0.0, np.sqrt(2 / (m + n)), size=(m, n)).astype(np.float32))
            linear.bias.data = torch.tensor(rng.normal(0.0, np.sqrt(1 / m), size=m).astype(np.float32))
            layers += [linear, nn.Sigmoid() if i == sigmoid_layer else nn.ReLU()]
        return nn.Sequential(*layers)

    def apply_emb(self, offsets: list[torch.Tensor], indices: list[torch.Tensor]) -> list[torch.Tensor]:
        return [bag(i, o) for bag, i, o in zip(self.emb_l, indices, offsets)]

    def interact_features(self, x: torch.Tensor, ly: list[torch.Tensor]) -> torch.Tensor:
        batch_size, d = x.shape
        t = torch.cat([x, *ly], dim=1).view((batch_size, -1, d))
        z = torch.bmm(t, torch.transpose(t, 1, 2))
        _, ni, nj = z.shape
        if self.tril:
            li, lj = torch.tril_indices(ni, nj, offset=0 if self.itself else -1)
        else:
            extra = 1 if self.itself else 0
            li = torch.tensor([i for i in range(ni) for _ in range(i + extra)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + extra)])
        return torch.cat([x, z[:, li, lj]], dim=1)

    def sequential_forward(self, dense_x: torch.Tensor, offsets: list[torch.Tensor],
                           indices: list[torch.Tensor]) -> torch.Tensor:
        x = self.bot_l(dense_x)
        return self.top_l(self.interact_features(x, self.apply_emb(offsets, indices)))


class DLRM4(DLRMNet):
    """Four tables, flattened into named inputs."""

    def forward(self, dense_x: torch.Tensor, offsets_0: torch.Tensor, indices_0: torch.Tensor,
                offsets_1: torch.Tensor, indices_1: torch.Tensor, offsets_2: torch.Tensor, indices_2: torch.Tensor,
                offsets_3: torch.Tensor, indices_3: torch.Tensor) -> torch.Tensor:
        return self.sequential_forward(dense_x, [offsets_0, offsets_1, offsets_2, offsets_3],
                                       [indices_0, indices_1, indices_2, indices_3])


def dlrm_case(itself: bool, tril: bool) -> Case:
    ln_emb, m_spa, batch = [40, 30, 50, 20], 8, 6
    pairs = (len(ln_emb) + 1) * (len(ln_emb) + (2 if itself else 0)) // 2
    model = DLRM4(m_spa, ln_emb, [13, 16, m_spa], [m_spa + pairs, 16, 1], itself, tril, seed=3)
    rng = np.random.default_rng(17)
    feeds: dict[str, np.ndarray] = {"dense_x": rng.standard_normal((batch, 13)).astype(np.float32)}
    dynamic: dict[str, dict[int, str]] = {"dense_x": {0: "batch"}}
    for k, rows in enumerate(ln_emb):
        lengths = [int(n) for n in rng.integers(0, 5, size=batch)]
        feeds[f"indices_{k}"], feeds[f"offsets_{k}"] = bag_inputs(rng, rows, lengths)
        dynamic[f"offsets_{k}"], dynamic[f"indices_{k}"] = {0: "batch"}, {0: f"num_indices_{k}"}
    order = list(inspect.signature(model.forward).parameters)
    return Case(model, {k: feeds[k] for k in order}, dynamic)


# ---------------------------------------------------------------------------------------------
# Tiny Hugging Face transformers (random weights from tiny configs; nothing is downloaded)


class Encoder(nn.Module):
    """A transformers model called with ids and mask, returning the last hidden state as one tensor."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def hf_case(kind: str) -> Case:
    import transformers as tf

    torch.manual_seed(11)
    common = {"vocab_size": 64}
    if kind == "bert":
        model = tf.BertModel(tf.BertConfig(**common, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                           intermediate_size=32, max_position_embeddings=32, type_vocab_size=2),
                             add_pooling_layer=False)
    elif kind == "gpt2":
        model = tf.GPT2Model(tf.GPT2Config(**common, n_embd=16, n_layer=2, n_head=2, n_inner=32, n_positions=32,
                                           bos_token_id=0, eos_token_id=0))
    else:
        model = tf.DistilBertModel(tf.DistilBertConfig(**common, dim=16, n_layers=2, n_heads=2, hidden_dim=32,
                                                       max_position_embeddings=32))
    rng = np.random.default_rng(23)
    ids = rng.integers(0, 64, size=(2, 8), dtype=np.int64)
    mask = np.ones((2, 8), dtype=np.int64)
    mask[1, 6:] = 0  # the second sequence is padded
    return Case(Encoder(model), {"input_ids": ids, "attention_mask": mask},
                {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}})


# ---------------------------------------------------------------------------------------------
# TorchRec


class SparseArch(nn.Module):
    """TorchRec's EmbeddingBagCollection over a KeyedJaggedTensor built from flat values and lengths."""

    def __init__(self) -> None:
        super().__init__()
        from torchrec import EmbeddingBagCollection, EmbeddingBagConfig

        torch.manual_seed(13)
        self.keys = ["f0", "f1"]
        self.ebc = EmbeddingBagCollection(tables=[
            EmbeddingBagConfig(name="t0", embedding_dim=DIM, num_embeddings=ROWS, feature_names=["f0"]),
            EmbeddingBagConfig(name="t1", embedding_dim=DIM, num_embeddings=30, feature_names=["f1"]),
        ], device=torch.device("cpu"))

    def forward(self, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        from torchrec import KeyedJaggedTensor

        kjt = KeyedJaggedTensor.from_lengths_sync(keys=self.keys, values=values, lengths=lengths)
        return self.ebc(kjt).values()


def torchrec_case() -> Case:
    lengths = np.array([2, 0, 3, 1, 1, 2, 0, 3], dtype=np.int64)  # f0: 4 bags, then f1: 4 bags
    rng = np.random.default_rng(29)
    values = np.concatenate([rng.integers(0, ROWS, size=6), rng.integers(0, 30, size=6)]).astype(np.int64)
    return Case(SparseArch(), {"values": values, "lengths": lengths}, {"values": {0: "num_values"}})


def all_cases() -> dict[str, Callable[[], Case]]:
    cases: dict[str, Callable[[], Case]] = {
        "bert": lambda: hf_case("bert"), "gpt2": lambda: hf_case("gpt2"),
        "distilbert": lambda: hf_case("distilbert"),
        "dlrm": lambda: dlrm_case(itself=False, tril=False), "dlrm_tril": lambda: dlrm_case(itself=True, tril=True),
        "torchrec_ebc": torchrec_case,
    }
    cases.update(embedding_cases())
    return cases


def build(name: str) -> Case:
    """Build a case afresh with fixed seeds, so every process (and every export) sees the same weights."""
    torch.manual_seed(zlib.crc32(name.encode()))
    case = all_cases()[name]()
    case.model.eval()
    return case


# ---------------------------------------------------------------------------------------------
# Exporting


def tensors(case: Case) -> tuple[torch.Tensor, ...]:
    return tuple(torch.from_numpy(v) for v in case.feeds.values())


def dynamic_shapes(case: Case) -> dict[str, dict[int, object]]:
    dims: dict[str, object] = {}
    spec: dict[str, dict[int, object]] = {}
    for name in case.feeds:
        axes = case.dynamic.get(name, {})
        spec[name] = {ax: dims.setdefault(d, torch.export.Dim(d, min=case.least.get(d, 1))) for ax, d in axes.items()}
    return spec


def refusal(exc: BaseException) -> str:
    """The exporter's own words, first line, short: the manifest says why a file is missing."""
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    lines = [ln.strip() for ln in text if ln.strip()]
    return " ".join(lines[:3])[:400]


def fresh_model(case: Case) -> nn.Module:
    """A deep copy, so that in-place renormalisation (max_norm) by one export does not reach the next."""
    return copy.deepcopy(case.model)


def export_dynamo(case: Case, path: Path, opset: int, dynamic: bool) -> None:
    kwargs = {"dynamic_shapes": dynamic_shapes(case)} if dynamic else {}
    torch.onnx.export(fresh_model(case), tensors(case), str(path), dynamo=True, opset_version=opset,
                      external_data=False, input_names=list(case.feeds), verbose=False, **kwargs)
    strip_node_metadata(path)


def strip_node_metadata(path: Path) -> None:
    """Drop the nodes' metadata_props (the dynamo exporter's stack traces and FX names, three quarters
    of a file's bytes); the graph, its names and its initializers stay as exported."""
    model = onnx.load(str(path))
    stack = [model.graph]
    while stack:
        graph = stack.pop()
        for node in graph.node:
            del node.metadata_props[:]
            stack.extend(a.g for a in node.attribute if a.HasField("g"))
            stack.extend(g for a in node.attribute for g in a.graphs)
    onnx.save(model, str(path))


def export_torchscript(case: Case, path: Path) -> None:
    torch.onnx.export(fresh_model(case), tensors(case), str(path), dynamo=False,
                      input_names=list(case.feeds), output_names=["output"])


def dynamo_worker(names: list[str], folder: Path) -> None:
    """Run in a subprocess under one PYTHONHASHSEED: every dynamo export of `names` into `folder`,
    with the refusals in ``refused.json``."""
    refused: dict[str, str] = {}
    for name in names:
        case = build(name)
        for opset in OPSETS:
            for dynamic in (False, True):
                path = folder / f"{name}.{opset}.{int(dynamic)}.onnx"
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        export_dynamo(case, path, opset, dynamic)
                except Exception as exc:  # noqa: BLE001  an exporter refusing a model is a recorded fact
                    refused[path.name] = refusal(exc)
                    path.unlink(missing_ok=True)
    (folder / "refused.json").write_text(json.dumps(refused, indent=1))


def loop_order(model: onnx.ModelProto) -> str | None:
    """The carried values of the graph's Loops (any depth), named without the exporter's numeric suffix:
    e.g. ``index_tensor,result``; several distinct orders are joined with ``;``, a Loop that carries
    nothing (its results are scan outputs) is ``-``; None without a Loop."""
    orders: list[str] = []

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            for attr in node.attribute:
                for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                    if node.op_type == "Loop" and attr.name == "body":
                        carried = ",".join(i.name.rstrip("0123456789").rstrip("_") for i in sub.input[2:]) or "-"
                        if carried not in orders:
                            orders.append(carried)
                    walk(sub)

    walk(model.graph)
    return ";".join(orders) if orders else None


def eager(case: Case) -> dict[str, np.ndarray]:
    with torch.no_grad():
        out = fresh_model(case)(*tensors(case))
    return {"output": out.numpy()}


def ort_outputs(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    model = onnx.load(str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in model.graph.input]
    got = sess.run(None, {k: feeds[k] for k in names})
    return {o.name: v for o, v in zip(model.graph.output, got)}


def max_diff(got: np.ndarray, want: np.ndarray) -> float | None:
    """Largest absolute difference, or None when the shapes differ."""
    if got.shape != want.shape:
        return None
    return float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0))


class Store:
    """Writes each distinct file once (by content) under the model's folder and builds manifest entries."""

    def __init__(self, name: str, case: Case) -> None:
        self.name, self.case = name, case
        self.folder = OUT / name
        self.by_hash: dict[str, str] = {}
        self.entries: list[dict[str, object]] = []
        self.want = eager(case)

    def add(self, src: Path | None, stem: str, suffix: str, **facts: object) -> None:
        entry: dict[str, object] = {"model": self.name, "format": suffix.lstrip("."), **facts,
                                    "inputs": f"{self.name}/in.npz"}
        if src is None:
            self.entries.append({**entry, "file": None})
            return
        data = src.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self.by_hash:
            rel = f"{self.name}/{stem}{suffix}"
            (OUT / rel).write_bytes(data)
            self.by_hash[digest] = rel
        rel = self.by_hash[digest]
        entry.update(file=rel, sha256=digest[:16])
        if suffix == ".onnx":
            entry.update(self.onnx_facts(OUT / rel))
        else:
            entry.update(reference=f"{self.name}/torch.out.npz", reference_from="torch eager",
                         archive_matches_eager=self.archive_matches(OUT / rel))
        self.entries.append(entry)

    def onnx_facts(self, path: Path) -> dict[str, object]:
        model = onnx.load(str(path))
        ref = path.with_name(path.name[:-5] + ".out.npz")
        opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        facts: dict[str, object] = {"opset_in_file": opset, "loop_order": loop_order(model),
                                    "reference": f"{self.name}/{ref.name}", "reference_from": "onnxruntime"}
        try:
            got = ort_outputs(path, self.case.feeds)
        except Exception as exc:  # noqa: BLE001  recorded: a file onnxruntime cannot run has no reference
            facts.update(reference=None, onnxruntime_error=refusal(exc))
            ref.unlink(missing_ok=True)
            return facts
        np.savez(ref, **got)
        first = next(iter(got.values()))
        diff = max_diff(first, self.want["output"])
        facts["ort_vs_torch_max_abs"] = diff
        facts["ort_matches_torch"] = diff is not None and bool(
            np.allclose(first, self.want["output"], rtol=RTOL, atol=ATOL))
        return facts

    def archive_matches(self, path: Path) -> bool:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            if path.suffix == ".pt":
                got = torch.jit.load(str(path))(*tensors(self.case))
            else:
                got = torch.export.load(str(path)).module()(*tensors(self.case))
        return bool(np.allclose(got.numpy(), self.want["output"], rtol=RTOL, atol=ATOL))


def run_workers(names: list[str], tmp: Path) -> dict[int, Path]:
    """One subprocess per hash seed, each doing every dynamo export of `names`."""
    folders = {seed: tmp / f"hs{seed}" for seed in HASH_SEEDS}
    running = []
    for seed, folder in folders.items():
        folder.mkdir()
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        cmd = [sys.executable, __file__, "--dynamo-worker", str(folder), "--only", ",".join(names)]
        with open(folder / "log.txt", "w") as log:
            running.append((folder, subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)))
    for folder, proc in running:
        if proc.wait() != 0:
            raise SystemExit(f"a dynamo export worker failed; see its log:\n{(folder / 'log.txt').read_text()[-3000:]}")
    return folders


def export_model(name: str, folders: dict[int, Path], tmp: Path) -> list[dict[str, object]]:
    case = build(name)
    store = Store(name, case)
    store.folder.mkdir(parents=True, exist_ok=True)
    for old in store.folder.iterdir():
        old.unlink()
    np.savez(store.folder / "in.npz", **case.feeds)
    np.savez(store.folder / "torch.out.npz", **store.want)

    def attempt(stem: str, suffix: str, write: Callable[[Path], None], **facts: object) -> None:
        path = tmp / f"{name}.{stem}{suffix}"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                write(path)
        except Exception as exc:  # noqa: BLE001  an exporter refusing a model is a recorded fact
            store.add(None, stem, suffix, **facts, refused=refusal(exc))
            return
        store.add(path, stem, suffix, **facts)

    attempt("ts", ".onnx", lambda p: export_torchscript(case, p), exporter="torchscript", opset=None,
            dynamic_shapes=False, hash_seed=None)
    for opset in OPSETS:
        for dynamic in (False, True):
            shape = "dynamic" if dynamic else "static"
            files = {seed: folders[seed] / f"{name}.{opset}.{int(dynamic)}.onnx" for seed in HASH_SEEDS}
            same = len({f.read_bytes() if f.exists() else b"" for f in files.values()}) == 1
            for seed, f in files.items():
                refused = json.loads((folders[seed] / "refused.json").read_text()).get(f.name)
                stem = f"dynamo{opset}.{shape}" + ("" if same else f".hs{seed}")
                store.add(None if refused else f, stem, ".onnx", exporter="dynamo", opset=opset,
                          dynamic_shapes=dynamic, hash_seed=seed, **({"refused": refused} if refused else {}))
    attempt("traced", ".pt", lambda p: torch.jit.save(torch.jit.trace(fresh_model(case), tensors(case)), str(p)),
            exporter="torch.jit.trace", opset=None, dynamic_shapes=False, hash_seed=None)
    for dynamic in (False, True):
        spec = {"dynamic_shapes": dynamic_shapes(case)} if dynamic else {}
        attempt("exported" + (".dynamic" if dynamic else ""), ".pt2",
                lambda p, s=spec: torch.export.save(torch.export.export(fresh_model(case), tensors(case), **s), str(p)),
                exporter="torch.export", opset=None, dynamic_shapes=dynamic, hash_seed=None)
    return store.entries


def torchrec_available() -> bool:
    try:
        import torchrec  # noqa: F401
    except Exception:  # noqa: BLE001  torchrec or its fbgemm_gpu fails to import or load
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model names (default: all)")
    parser.add_argument("--dynamo-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.only.split(",") if args.only else sorted(all_cases())
    if unknown := sorted(set(names) - set(all_cases())):
        raise SystemExit(f"unknown model(s): {', '.join(unknown)}")
    if args.dynamo_worker:
        dynamo_worker(names, args.dynamo_worker)
        return
    if "torchrec_ebc" in names and not torchrec_available():
        if args.only:
            raise SystemExit("torchrec_ebc needs torchrec 1.9.2 and fbgemm-gpu-cpu 1.8.0 (see docs/corpus.md)")
        print("note: torchrec does not import here; keeping the committed torchrec_ebc files", file=sys.stderr)
        names.remove("torchrec_ebc")
    OUT.mkdir(exist_ok=True)
    manifest_path = OUT / "manifest.json"
    kept = [e for e in json.loads(manifest_path.read_text())["exports"] if e["model"] not in names] \
        if manifest_path.exists() else []
    entries: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folders = run_workers(names, Path(tmp))
        for name in names:
            try:
                entries += export_model(name, folders, Path(tmp))
            except Exception:
                traceback.print_exc()
                raise SystemExit(f"{name}: building or checking the model failed") from None
            print(f"{name}: {sum(1 for e in entries if e['model'] == name and e['file'])} exports")
    entries = sorted(kept + entries, key=lambda e: (str(e["model"]), str(e["format"]), str(e.get("file"))))
    manifest = {"torch": torch.__version__, "hash_seeds": list(HASH_SEEDS), "rtol": RTOL, "atol": ATOL,
                "exports": entries}
    tmp_manifest = manifest_path.with_suffix(".json.tmp")
    tmp_manifest.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp_manifest.replace(manifest_path)


if __name__ == "__main__":
    main()
