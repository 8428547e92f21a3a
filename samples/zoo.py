"""The PyTorch models the sample generators export, each defined once.

Imported by ``gen_models.py`` / ``gen_torch_archives.py`` (``samples/models``), ``gen_corpus.py``
(``samples/corpus``) and ``gen_aten_cases.py`` (``samples/aten``, and ``tests/test_aten_ops.py`` through
it).  Each generator picks the sizes, weights, seeds and inputs of its own cases; a model used with
different settings is one class with parameters here, so a change to a model reaches every collection.

* embedding lookups: wrappers giving ``nn.Embedding`` / ``nn.EmbeddingBag`` (any mode and options) a
  ``forward`` with named tensor parameters, ``torch.take``, ``F.embedding`` and ``F.embedding_bag`` on a
  plain parameter, a bag with Python control flow for scripting;
* DLRM after facebookresearch/dlrm's ``DLRM_Net`` (``dot`` interaction, either triangle form, optional
  weighted pooling and output clamp), and the simpler DLRM-like network of ``samples/models``;
* graph workloads (message passing, SpMM, TransE, block-sparse attention) and dense-operator models;
* tiny Hugging Face BERT, GPT-2 and DistilBERT, and TorchRec's ``EmbeddingBagCollection`` (their
  libraries are imported only when those models are built).

Nothing in Ember imports this module: it needs torch, which Ember does not.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

Feeds = dict[str, Any]  # forward's parameter -> array, or a list of arrays for a List[Tensor] parameter
PAD = 3  # the padding row of the padded tables
M = TypeVar("M", bound=nn.Module)


@dataclass
class Case:
    """A model in eval mode and its inputs, keyed by ``forward``'s parameters in order, with what the
    exporters need to know about them."""

    model: nn.Module
    feeds: Feeds
    dynamic: dict[str, dict[int, str]] = field(default_factory=dict)  # {input: {axis: dim name}}; shared names
    least: dict[str, int] = field(default_factory=dict)  # a dim's smallest size, where torch.export needs one
    trace_feeds: Feeds | None = None  # same shapes, other values: what the archives are traced with
    max_norm: float | None = None  # the table's rows above it that `feeds` looks up are renormalised


def as_torch(feeds: Feeds) -> tuple[Any, ...]:
    return tuple([torch.from_numpy(a) for a in v] if isinstance(v, list) else torch.from_numpy(v)
                 for v in feeds.values())


def eager(case: Case) -> np.ndarray:
    """The model's output on `case.feeds`, from a copy (max_norm renormalises the table it runs on)."""
    with torch.no_grad():
        return copy.deepcopy(case.model).eval()(*as_torch(case.feeds)).numpy()


def bag_inputs(rng: np.random.Generator, rows: int, lengths: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Random indices for bags of the given lengths, and the bags' offsets."""
    indices = rng.integers(0, rows, size=sum(lengths), dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    return indices, offsets


def with_weight(module: M, weight: torch.Tensor) -> M:
    """`module` with its table overwritten by `weight` (its own initialisation still draws from torch's RNG)."""
    with torch.no_grad():
        module.weight.copy_(weight)
    return module


def padded(module: nn.Embedding | nn.EmbeddingBag) -> nn.Embedding | nn.EmbeddingBag:
    """Make the padding row nonzero so that leaving it out (or not) shows in the outputs."""
    with torch.no_grad():
        module.weight[module.padding_idx] = torch.linspace(-2.0, 3.0, module.embedding_dim)
    return module


# ---------------------------------------------------------------------------------------------
# Embedding lookups


class Lookup(nn.Module):
    """An nn.Embedding, or an nn.EmbeddingBag on a 2-D input (one bag per row), called on indices."""

    def __init__(self, emb: nn.Module) -> None:
        super().__init__()
        self.emb = emb

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return self.emb(indices)


class LookupIdx(Lookup):
    """`Lookup` whose input is named ``idx``, as ``samples/models/embedding.*`` name it."""

    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.emb(idx)


class Bag(nn.Module):
    """An nn.EmbeddingBag on 1-D indices and offsets."""

    def __init__(self, bag: nn.EmbeddingBag) -> None:
        super().__init__()
        self.bag = bag

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, offsets)


class WeightedBag(Bag):
    def forward(self, indices: torch.Tensor, offsets: torch.Tensor,  # type: ignore[override]
                weights: torch.Tensor) -> torch.Tensor:
        return self.bag(indices, offsets, per_sample_weights=weights)


class WeightedBag2D(Bag):
    def forward(self, indices: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.bag(indices, per_sample_weights=weights)


class GatedBag(Bag):
    """A mean bag whose forward branches on a flag and loops: scripted, its code keeps that control flow."""

    def __init__(self, bag: nn.EmbeddingBag, scale: bool) -> None:
        super().__init__(bag)
        self.scale = scale

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        y = self.bag(indices, offsets)
        if self.scale:
            y = y * 0.5
        for _ in range(2):
            y = torch.tanh(y) + y
        return y


class Take(nn.Module):
    """torch.take on a table: element lookups into the flattened table."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = nn.Parameter(table)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return torch.take(self.table, indices)


class FunctionalEmbedding(nn.Module):
    """F.embedding on a plain parameter (no nn.Embedding module)."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return F.embedding(indices, self.weight)


class FunctionalBag(nn.Module):
    """F.embedding_bag on a plain parameter, with any of its keyword options."""

    def __init__(self, weight: torch.Tensor, mode: str, **kw: Any) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight)
        self.mode, self.kw = mode, kw

    def forward(self, indices: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return F.embedding_bag(indices, self.weight, offsets, mode=self.mode, **self.kw)


# ---------------------------------------------------------------------------------------------
# DLRM


def mlp(ln: Sequence[int], sigmoid_layer: int, rng: np.random.Generator | np.random.RandomState | None = None
        ) -> nn.Sequential:
    """Linear layers, a ReLU after each but layer `sigmoid_layer` (a sigmoid); with `rng`, initialised as
    facebookresearch/dlrm's create_mlp does (Gaussian), else PyTorch's default initialisation."""
    layers: list[nn.Module] = []
    for i, (n, m) in enumerate(zip(ln[:-1], ln[1:])):
        linear = nn.Linear(n, m)
        if rng is not None:
            linear.weight.data = torch.tensor(rng.normal(0.0, np.sqrt(2 / (m + n)), size=(m, n)).astype(np.float32))
            linear.bias.data = torch.tensor(rng.normal(0.0, np.sqrt(1 / m), size=m).astype(np.float32))
        layers += [linear, nn.Sigmoid() if i == sigmoid_layer else nn.ReLU()]
    return nn.Sequential(*layers)


class DLRMNet(nn.Module):
    """facebookresearch/dlrm's DLRM_Net (dlrm_s_pytorch.py), sequential_forward with the "dot" interaction.

    A bottom MLP on the dense features, one ``EmbeddingBag(mode="sum")`` per table (``ln_emb`` rows each,
    width ``m_spa``), the dot interaction (``bmm`` of the concatenated features with their transpose,
    then the pairs below the diagonal, with it when ``itself``: from ``torch.tril_indices`` when
    ``tril``, the reference's "approach 1", else from index lists built in Python, its default), the
    dense vector concatenated, and a top MLP ending in a sigmoid.  Weights are drawn from `rng` in the
    reference's order (MLPs, tables, then the pooling weights when ``weighted``); ``threshold`` clamps
    the output as the reference's ``loss_threshold`` does.  ``forward`` takes the offsets and indices
    as the reference does: lists of per-table tensors, or ``[tables, batch]`` tensors.
    """

    def __init__(self, m_spa: int, ln_emb: list[int], ln_bot: list[int], ln_top: list[int],
                 rng: np.random.Generator | np.random.RandomState, *, itself: bool = False, tril: bool = False,
                 weighted: bool = False, threshold: float = 0.0, sparse: bool = False) -> None:
        super().__init__()
        self.itself, self.tril, self.loss_threshold = itself, tril, threshold
        self.bot_l = mlp(ln_bot, -1, rng)
        self.top_l = mlp(ln_top, len(ln_top) - 2, rng)
        self.emb_l = nn.ModuleList()
        for n in ln_emb:
            bag = nn.EmbeddingBag(n, m_spa, mode="sum", sparse=sparse)
            bound = np.sqrt(1 / n)
            bag.weight.data = torch.tensor(rng.uniform(-bound, bound, size=(n, m_spa)).astype(np.float32))
            self.emb_l.append(bag)
        # the reference keeps the pooling weights as plain tensors (constants of a trace)
        self.v_W_l = [torch.tensor(rng.uniform(0.5, 1.5, n).astype(np.float32)) if weighted else None
                      for n in ln_emb]

    def apply_emb(self, lS_o: Any, lS_i: Any) -> list[torch.Tensor]:  # noqa: N803  (the reference's names)
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            w = self.v_W_l[k]
            per_sample_weights = w.gather(0, sparse_index_group_batch) if w is not None else None
            ly.append(self.emb_l[k](sparse_index_group_batch, lS_o[k], per_sample_weights=per_sample_weights))
        return ly

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

    def forward(self, dense_x: torch.Tensor, lS_o: Any, lS_i: Any) -> torch.Tensor:  # noqa: N803
        x = self.bot_l(dense_x)
        p = self.top_l(self.interact_features(x, self.apply_emb(lS_o, lS_i)))
        if 0.0 < self.loss_threshold < 1.0:
            p = torch.clamp(p, min=self.loss_threshold, max=(1.0 - self.loss_threshold))
        return p


class DLRM4(DLRMNet):
    """Four tables, each table's offsets and indices a named input (so every exporter keeps them)."""

    def forward(self, dense_x: torch.Tensor, offsets_0: torch.Tensor,  # type: ignore[override]
                indices_0: torch.Tensor, offsets_1: torch.Tensor, indices_1: torch.Tensor, offsets_2: torch.Tensor,
                indices_2: torch.Tensor, offsets_3: torch.Tensor, indices_3: torch.Tensor) -> torch.Tensor:
        return super().forward(dense_x, [offsets_0, offsets_1, offsets_2, offsets_3],
                               [indices_0, indices_1, indices_2, indices_3])


class DLRMLike(nn.Module):
    """A smaller DLRM-like network: bottom MLP, three sum bags, the pairs below the diagonal of the
    stacked features' dot products (from index buffers), top MLP; PyTorch's default initialisation."""

    def __init__(self, rows: tuple[int, int, int], dim: int) -> None:
        super().__init__()
        self.bot = mlp([13, 16, dim], -1)
        self.bags = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum") for n in rows)
        n_feat = len(rows) + 1
        self.top = mlp([dim + n_feat * (n_feat - 1) // 2, 16, 1], 1)
        li, lj = torch.tril_indices(n_feat, n_feat, offset=-1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)

    def forward(self, dense: torch.Tensor, idx0: torch.Tensor, off0: torch.Tensor, idx1: torch.Tensor,
                off1: torch.Tensor, idx2: torch.Tensor, off2: torch.Tensor) -> torch.Tensor:
        x = self.bot(dense)
        e = [bag(i, o) for bag, i, o in zip(self.bags, (idx0, idx1, idx2), (off0, off1, off2))]
        t = torch.stack([x, *e], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        return self.top(torch.cat([x, z[:, self.li, self.lj]], dim=1))


# ---------------------------------------------------------------------------------------------
# Graph workloads


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


class SpMM(nn.Module):
    """COO sparse x dense written densely: gather columns, scale by values, index_add into rows."""

    def forward(self, x: torch.Tensor, row: torch.Tensor, col: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        msg = x[col] * val.unsqueeze(-1)
        return torch.zeros_like(x).index_add(0, row, msg)


class GCNLayer(nn.Module):
    """One graph-convolution layer (Kipf and Welling): relu(A X W), the normalised adjacency A given as COO
    (row, col, val).  The SpMM is written as SpMM above; the dense transform is a MatMul with W."""

    def __init__(self, weight: np.ndarray) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.from_numpy(weight))

    def forward(self, x: torch.Tensor, row: torch.Tensor, col: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        agg = torch.zeros_like(x).index_add(0, row, x[col] * val.unsqueeze(-1))
        return torch.relu(agg @ self.weight)


class TransE(nn.Module):
    """Knowledge-graph scoring: -|h + r - t|_1 per (head, relation, tail) triple."""

    def __init__(self, entities: int, relations: int, dim: int) -> None:
        super().__init__()
        self.entity = nn.Embedding(entities, dim)
        self.relation = nn.Embedding(relations, dim)

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


# ---------------------------------------------------------------------------------------------
# Dense operators the models above do not use


class Elementwise(nn.Module):
    """Arithmetic, comparisons and logic on floats, integers and booleans, with PyTorch's promotion."""

    def forward(self, x: torch.Tensor, i: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = torch.rsub(x, 2.0, alpha=0.5) + torch.div(x, 0.7, rounding_mode="floor")
        y = y + torch.div(x, -0.3, rounding_mode="trunc") + i / 4 + (i * 0.5) + torch.pow(x.abs() + 1, x)
        y = y + torch.maximum(x, -x * 0.5) - torch.minimum(x, i)
        y = y + torch.clamp(x, torch.zeros_like(x) - 0.5).clamp(max=0.8)
        y = y + x.neg().sign() + (x.abs() + 0.1).reciprocal() + (x.abs() + 0.1).rsqrt() + x.exp().log()
        y = y + x.abs().sqrt() + torch.erf(x) + x.sin() * x.cos() + x.floor() + x.ceil() + torch.round(x * 3)
        y = y + F.silu(x) + torch.relu(x) + torch.sigmoid(x) + torch.tanh(x) + F.gelu(x, approximate="tanh")
        c = (x > 0) & b | (i == 2) ^ (x <= -0.5)
        c = torch.logical_or(torch.logical_and(c, i != 3), torch.logical_not(b)) | ~(i >= 4) & (x < 0.2)
        y = torch.where(c, y, -y) + c.sum(dim=1, keepdim=True) + torch.logical_xor(b, i > 1).float()
        y = y.masked_fill(i == 0, 7.0) + torch.cumsum(x, dim=1) + torch.tril(x) - torch.triu(x, 1)
        y = y + x.amax(dim=1, keepdim=True) - x.amin(dim=0) + x.mean(dim=-1, keepdim=True) + x.sum()
        return torch.log_softmax(y, dim=-1) + torch.softmax(y.double(), dim=0, dtype=torch.float32) + i.type_as(x)


class Shapes(nn.Module):
    """Splitting, joining, views, factories and index tables."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=1)
        c, d, e = torch.split(x, [1, 2, 3], dim=1)
        y = torch.cat([b, a], dim=1) + torch.cat([e, d, c], 1) + x.narrow(1, 2, 1) + x[:, -1:]
        y = y + torch.stack([x, x * 2], dim=0).sum(0) + x.t().t() + x.permute(1, 0).flatten().view(6, 4).t()
        z = x.unsqueeze(0).repeat(2, 1, 1).squeeze(0).sum(0) + x.select(1, -2).unsqueeze(1).expand_as(x)
        ri, ci = torch.triu_indices(4, 6, 1)
        rows = torch.arange(0.5, 4.0, 1.0).unsqueeze(1) + torch.full_like(x, 0.25) + x.new_full((4, 6), 2.0)
        parts = torch.unbind(x, dim=0)
        return y + z + rows + x[ri, ci].sum() + parts[1] + x.numel()


class Attention(nn.Module):
    """Attention blocks written the ways models write them."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.norm = nn.LayerNorm(8, elementwise_affine=False, eps=1e-6)
        self.proj = nn.Parameter(torch.randn(8, 8, generator=g) * 0.3)
        self.bias = nn.Parameter(torch.randn(2, 1, 5, generator=g) * 0.1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q = self.norm(x)
        k = F.gelu(q @ self.proj)
        causal = F.scaled_dot_product_attention(q, k, x, is_causal=True)
        masked = F.scaled_dot_product_attention(q, k, x, attn_mask=mask)
        scores = torch.baddbmm(self.bias, q, k.transpose(1, 2), beta=0.5, alpha=0.25)
        scores = scores.masked_fill(~mask, float("-inf"))
        return causal + masked + torch.softmax(scores, dim=-1) @ x


# ---------------------------------------------------------------------------------------------
# Tiny Hugging Face transformers (random weights from tiny configs; nothing is downloaded)


class Encoder(nn.Module):
    """A transformers model called with ids and mask, returning the last hidden state as one tensor."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


HF_KINDS = ("bert", "gpt2", "distilbert")


def hf_case(kind: str, attn: str | None = None) -> Case:
    """`kind` of HF_KINDS (vocabulary 64, width 16, 2 layers, 2 heads, 32 positions, feed-forward 32),
    weights from torch seed 11, with transformers' default attention (SDPA) or `attn` ("eager", "sdpa");
    called on two sequences of 8 ids, the second padded, so the attention mask matters."""
    import transformers as tf

    torch.manual_seed(11)
    common: dict[str, Any] = {"vocab_size": 64, "attn_implementation": attn}
    if kind == "bert":
        model = tf.BertModel(tf.BertConfig(**common, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                           intermediate_size=32, max_position_embeddings=32, type_vocab_size=2),
                             add_pooling_layer=False)
    elif kind == "gpt2":
        model = tf.GPT2Model(tf.GPT2Config(**common, n_embd=16, n_layer=2, n_head=2, n_inner=32, n_positions=32,
                                           bos_token_id=0, eos_token_id=0))
    elif kind == "distilbert":
        model = tf.DistilBertModel(tf.DistilBertConfig(**common, dim=16, n_layers=2, n_heads=2, hidden_dim=32,
                                                       max_position_embeddings=32))
    else:
        raise ValueError(f"unknown transformer {kind!r}; one of {HF_KINDS}")
    rng = np.random.default_rng(23)
    ids = rng.integers(0, 64, size=(2, 8), dtype=np.int64)
    mask = np.ones((2, 8), dtype=np.int64)
    mask[1, 6:] = 0
    return Case(Encoder(model).eval(), {"input_ids": ids, "attention_mask": mask},
                {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}})


# ---------------------------------------------------------------------------------------------
# TorchRec


class SparseArch(nn.Module):
    """TorchRec's EmbeddingBagCollection (table t<k> of rows[k] rows for feature f<k>, from torch seed 13)
    over a KeyedJaggedTensor built from flat values and lengths."""

    def __init__(self, rows: Sequence[int], dim: int) -> None:
        super().__init__()
        from torchrec import EmbeddingBagCollection, EmbeddingBagConfig

        torch.manual_seed(13)
        self.keys = [f"f{k}" for k in range(len(rows))]
        self.ebc = EmbeddingBagCollection(tables=[
            EmbeddingBagConfig(name=f"t{k}", embedding_dim=dim, num_embeddings=n, feature_names=[f"f{k}"])
            for k, n in enumerate(rows)], device=torch.device("cpu"))

    def forward(self, values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        from torchrec import KeyedJaggedTensor

        kjt = KeyedJaggedTensor.from_lengths_sync(keys=self.keys, values=values, lengths=lengths)
        return self.ebc(kjt).values()
