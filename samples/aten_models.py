"""PyTorch models whose `.pt` and `.pt2` archives exercise the aten operators Ember translates.

Used by ``gen_aten_cases.py`` (which saves some of them under ``samples/aten``) and by
``tests/test_aten_ops.py`` (which builds all of them when torch is installed).  Every case is a model,
its inputs keyed by ``forward``'s parameters (a list for a ``List[Tensor]`` parameter) and optionally
the inputs it is traced with, which differ from the test inputs only in values:

* embedding variants: ``nn.Embedding`` plain, with ``padding_idx`` and ``max_norm``;
  ``nn.EmbeddingBag`` sum/mean/max with 1-D indices + offsets and with 2-D indices, per-sample weights,
  ``include_last_offset``, ``padding_idx`` and ``max_norm``; ``torch.take``; ``F.embedding_bag``;
* DLRM after facebookresearch/dlrm's ``DLRM_Net.sequential_forward``: a bottom MLP, one
  ``EmbeddingBag(mode="sum")`` per table, the dot interaction (``bmm`` of the concatenated features,
  then the pairs below the diagonal, from ``torch.tril_indices`` or from the reference's index lists),
  a top MLP with a sigmoid, optional weighted pooling and output clamp; inputs as the Criteo loader
  stacks them (``[tables, batch]`` tensors) or as the random-data generator gives them (lists);
* dense-operator models (elementwise arithmetic and comparisons, shapes, attention blocks);
* tiny Hugging Face BERT, GPT-2 and DistilBERT (eager and SDPA attention), when transformers is installed.

The ``max_norm`` models are traced on indices that only touch rows within the norm, so the tables the
archives store still hold rows above it (torch.jit.trace runs the model, and ``max_norm`` renormalises
the table in place); the test inputs look those rows up.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

Feeds = dict[str, Any]  # name -> array, or a list of arrays for a List[Tensor] parameter


@dataclass
class Case:
    model: nn.Module
    feeds: Feeds
    trace_feeds: Feeds | None = None  # same shapes; what the archives are traced / exported with
    max_norm: float | None = None  # the table's rows above it that `feeds` looks up are renormalised


def flat(feeds: Feeds) -> dict[str, np.ndarray]:
    """Inputs by the names Ember gives them: a list parameter `p` becomes p_0, p_1, ..."""
    out: dict[str, np.ndarray] = {}
    for k, v in feeds.items():
        if isinstance(v, list):
            out.update({f"{k}_{i}": a for i, a in enumerate(v)})
        else:
            out[k] = v
    return out


def as_torch(feeds: Feeds) -> tuple[Any, ...]:
    return tuple([torch.from_numpy(a) for a in v] if isinstance(v, list) else torch.from_numpy(v)
                 for v in feeds.values())


def eager(case: Case) -> np.ndarray:
    """The model's output on `case.feeds`, from a copy (max_norm updates the table it runs on)."""
    with torch.no_grad():
        return copy.deepcopy(case.model).eval()(*as_torch(case.feeds)).numpy()


def save(case: Case, stem: Path) -> None:
    """Write `<stem>.pt` (torch.jit.trace + save) and `<stem>.pt2` (torch.export + save), each from its own
    copy of the model, traced on `case.trace_feeds` (else the test inputs)."""
    args = as_torch(case.trace_feeds or case.feeds)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer warnings about Python values in the trace
        traced = torch.jit.trace(copy.deepcopy(case.model).eval(), args, check_trace=False)
        torch.jit.save(traced, str(stem.with_suffix(".pt")))
        program = torch.export.export(copy.deepcopy(case.model).eval(), args)
        torch.export.save(program, str(stem.with_suffix(".pt2")))


# ---------------------------------------------------------------------------------------------
# Embedding variants

ROWS, DIM = 20, 6


def table(seed: int, big: int = 3) -> torch.Tensor:
    """Rows of norm about 0.7, except every `big`-th row from row 1, about ten times that."""
    w = torch.randn(ROWS, DIM, generator=torch.Generator().manual_seed(seed)) * 0.3
    w[1::big] *= 10
    return w


class Emb(nn.Module):
    def __init__(self, **kw: Any) -> None:
        super().__init__()
        self.emb = nn.Embedding(ROWS, DIM, **kw)
        with torch.no_grad():
            self.emb.weight.copy_(table(1))
            if kw.get("padding_idx") is not None:
                self.emb.weight[kw["padding_idx"]] = 0

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.emb(idx)


class Bag(nn.Module):
    def __init__(self, mode: str, **kw: Any) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(ROWS, DIM, mode=mode, **kw)
        with torch.no_grad():
            self.bag.weight.copy_(table(2))

    def forward(self, idx: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.bag(idx, offsets)


class Bag2D(Bag):
    def forward(self, idx: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.bag(idx)


class WeightedBag(Bag):
    def forward(self, idx: torch.Tensor, offsets: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.bag(idx, offsets, per_sample_weights=w)


class WeightedBag2D(Bag):
    def forward(self, idx: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.bag(idx, per_sample_weights=w)


class Take(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(table(3))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return torch.take(self.w, idx)


class FunctionalBag(nn.Module):
    def __init__(self, mode: str, **kw: Any) -> None:
        super().__init__()
        self.w = nn.Parameter(table(4))
        self.mode, self.kw = mode, kw

    def forward(self, idx: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return F.embedding_bag(idx, self.w, offsets, mode=self.mode, **self.kw)


def embedding_cases() -> dict[str, Callable[[], Case]]:
    rng = np.random.default_rng(1)
    idx2 = rng.integers(0, ROWS, size=(4, 3)).astype(np.int64)
    idx1 = rng.integers(0, ROWS, size=10).astype(np.int64)
    off = np.array([0, 3, 3, 7], np.int64)  # bag 1 is empty
    last = np.append(off, idx1.size).astype(np.int64)
    w1 = rng.random(10).astype(np.float32)
    w2 = rng.random((4, 3)).astype(np.float32)
    small1, small2 = np.zeros_like(idx1), np.zeros_like(idx2)  # row 0 is within every max_norm below
    bag = {"idx": idx1, "offsets": off}
    out: dict[str, Callable[[], Case]] = {
        "emb_plain": lambda: Case(Emb(), {"idx": idx2}),
        "emb_padding_idx": lambda: Case(Emb(padding_idx=int(idx2[0, 0])), {"idx": idx2}),
        "emb_max_norm": lambda: Case(Emb(max_norm=1.0), {"idx": idx2}, {"idx": small2}, 1.0),
        "emb_max_norm_l1": lambda: Case(Emb(max_norm=2.0, norm_type=1.0), {"idx": idx2}, {"idx": small2}, 2.0),
        "take": lambda: Case(Take(), {"idx": rng.integers(-ROWS * DIM, ROWS * DIM, (3, 5)).astype(np.int64)}),
        "bag_weighted": lambda: Case(WeightedBag("sum"), {"idx": idx1, "offsets": off, "w": w1}),
        "bag_weighted_2d": lambda: Case(WeightedBag2D("sum"), {"idx": idx2, "w": w2}),
        "fbag_sum_max_norm": lambda: Case(FunctionalBag("sum", max_norm=1.0), bag,
                                          {"idx": small1, "offsets": off}, 1.0),
        "fbag_max_last": lambda: Case(FunctionalBag("max", include_last_offset=True), {"idx": idx1, "offsets": last}),
    }
    for mode in ("sum", "mean", "max"):
        out |= {
            f"bag_{mode}": lambda m=mode: Case(Bag(m), bag),
            f"bag_{mode}_2d": lambda m=mode: Case(Bag2D(m), {"idx": idx2}),
            f"bag_{mode}_last": lambda m=mode: Case(Bag(m, include_last_offset=True), {"idx": idx1, "offsets": last}),
            f"bag_{mode}_padding_idx": lambda m=mode: Case(Bag(m, padding_idx=int(idx1[2])), bag),
            f"bag_{mode}_padding_idx_2d": lambda m=mode: Case(Bag2D(m, padding_idx=int(idx2[1, 1])), {"idx": idx2}),
            f"bag_{mode}_max_norm": lambda m=mode: Case(Bag(m, max_norm=1.5), bag, {"idx": small1, "offsets": off},
                                                        1.5),
            f"fbag_{mode}": lambda m=mode: Case(FunctionalBag(m), bag),
        }
    return out


# ---------------------------------------------------------------------------------------------
# DLRM


class DLRM(nn.Module):
    """facebookresearch/dlrm's DLRM_Net, sequential_forward, with the arch_interaction_op "dot"."""

    def __init__(self, ln_bot: list[int], ln_emb: list[int], m_spa: int, ln_top: list[int], tril: bool = False,
                 itself: bool = False, weighted: bool = False, threshold: float = 0.0) -> None:
        super().__init__()
        rs = np.random.RandomState(3)
        self.bot_l = self.create_mlp(ln_bot, -1, rs)
        self.top_l = self.create_mlp(ln_top, len(ln_top) - 2, rs)
        self.emb_l = nn.ModuleList()
        for n in ln_emb:
            e = nn.EmbeddingBag(n, m_spa, mode="sum", sparse=True)
            e.weight.data = torch.tensor(rs.uniform(-np.sqrt(1 / n), np.sqrt(1 / n), (n, m_spa)).astype(np.float32))
            self.emb_l.append(e)
        # the reference keeps the pooling weights as plain tensors (constants of the trace)
        self.v_W_l = [torch.tensor(rs.uniform(0.5, 1.5, n).astype(np.float32)) if weighted else None
                      for n in ln_emb]
        self.tril, self.itself, self.loss_threshold = tril, itself, threshold

    @staticmethod
    def create_mlp(ln: list[int], sigmoid_layer: int, rs: np.random.RandomState) -> nn.Sequential:
        layers: list[nn.Module] = []
        for i in range(len(ln) - 1):
            n, m = ln[i], ln[i + 1]
            lin = nn.Linear(n, m, bias=True)
            lin.weight.data = torch.tensor(rs.normal(0.0, np.sqrt(2 / (m + n)), (m, n)).astype(np.float32))
            lin.bias.data = torch.tensor(rs.normal(0.0, np.sqrt(1 / m), m).astype(np.float32))
            layers += [lin, nn.Sigmoid() if i == sigmoid_layer else nn.ReLU()]
        return nn.Sequential(*layers)

    def apply_emb(self, lS_o: Any, lS_i: Any) -> list[torch.Tensor]:  # noqa: N803  (the reference's names)
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            w = self.v_W_l[k]
            per_sample_weights = w.gather(0, sparse_index_group_batch) if w is not None else None
            ly.append(self.emb_l[k](sparse_index_group_batch, lS_o[k], per_sample_weights=per_sample_weights))
        return ly

    def interact_features(self, x: torch.Tensor, ly: list[torch.Tensor]) -> torch.Tensor:
        (batch_size, d) = x.shape
        T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))  # noqa: N806
        Z = torch.bmm(T, torch.transpose(T, 1, 2))  # noqa: N806
        _, ni, nj = Z.shape
        if self.tril:  # the reference's "approach 1"
            li, lj = torch.tril_indices(ni, nj, offset=0 if self.itself else -1)
        else:  # "approach 2", the one it runs
            offset = 1 if self.itself else 0
            li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
            lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
        return torch.cat([x] + [Z[:, li, lj]], dim=1)

    def forward(self, dense_x: torch.Tensor, lS_o: Any, lS_i: Any) -> torch.Tensor:  # noqa: N803
        x = self.bot_l(dense_x)
        z = self.interact_features(x, self.apply_emb(lS_o, lS_i))
        p = self.top_l(z)
        if 0.0 < self.loss_threshold < 1.0:
            p = torch.clamp(p, min=self.loss_threshold, max=(1.0 - self.loss_threshold))
        return p


def dlrm_cases() -> dict[str, Callable[[], Case]]:
    rng = np.random.default_rng(7)
    batch, ln_emb, m_spa = 4, [30, 20, 40], 4
    dense = rng.standard_normal((batch, 5)).astype(np.float32)
    # the Criteo loader: one index per sample and table, offsets range(batch), both stacked
    criteo = {"dense_x": dense, "lS_o": np.tile(np.arange(batch, dtype=np.int64), (3, 1)),
              "lS_i": np.stack([rng.integers(0, n, batch) for n in ln_emb]).astype(np.int64)}
    # the random-data generator: lists of per-table offsets and indices, bags of 0 to 3 lookups
    lengths = [[1, 2, 0, 3], [2, 2, 1, 1], [0, 1, 1, 4]]
    lists = {"dense_x": dense,
             "lS_o": [np.concatenate([[0], np.cumsum(n)[:-1]]).astype(np.int64) for n in lengths],
             "lS_i": [rng.integers(0, rows, sum(n)).astype(np.int64) for rows, n in zip(ln_emb, lengths)]}

    def make(feeds: Feeds, **kw: Any) -> Callable[[], Case]:
        n_top = m_spa + (len(ln_emb) + 1) * (len(ln_emb) + 2 if kw.get("itself") else len(ln_emb)) // 2
        return lambda: Case(DLRM([5, 8, m_spa], ln_emb, m_spa, [n_top, 8, 1], **kw), feeds)

    return {
        "dlrm": make(criteo),
        "dlrm_tril": make(criteo, tril=True),
        "dlrm_itself": make(criteo, itself=True),
        "dlrm_tril_itself": make(criteo, tril=True, itself=True),
        "dlrm_lists": make(lists),
        "dlrm_lists_weighted": make(lists, weighted=True, threshold=0.05),
    }


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


def op_cases() -> dict[str, Callable[[], Case]]:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    ints = rng.integers(0, 6, (4, 6)).astype(np.int64)
    flags = rng.random((4, 6)) > 0.5
    mask = np.tril(np.ones((5, 5), dtype=bool)) | (rng.random((2, 5, 5)) > 0.6)
    return {
        "elementwise": lambda: Case(Elementwise(), {"x": x, "i": ints, "b": flags}),
        "shapes": lambda: Case(Shapes(), {"x": x}),
        "attention": lambda: Case(Attention(), {"x": rng.standard_normal((2, 5, 8)).astype(np.float32),
                                                "mask": mask}),
    }


# ---------------------------------------------------------------------------------------------
# Hugging Face models


class HuggingFace(nn.Module):
    """The model's last hidden state, from input ids and an attention mask."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask)[0]


def hf_cases() -> dict[str, Callable[[], Case]]:
    """Tiny BERT, GPT-2 and DistilBERT (vocabulary 64, width 16, 2 layers, 2 heads), each with eager and
    SDPA attention; the second sequence is padded, so the attention mask matters."""
    import transformers as tf

    rng = np.random.default_rng(0)
    mask = np.ones((2, 8), np.int64)
    mask[1, 6:] = 0
    feeds = {"input_ids": rng.integers(1, 64, (2, 8)).astype(np.int64), "attention_mask": mask}
    small = {"vocab_size": 64, "max_position_embeddings": 32}

    def make(build: Callable[[str], nn.Module], attn: str) -> Callable[[], Case]:
        def case() -> Case:
            torch.manual_seed(0)
            return Case(HuggingFace(build(attn)).eval(), feeds)
        return case

    def bert(attn: str) -> nn.Module:
        return tf.BertModel(tf.BertConfig(hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                          intermediate_size=32, attn_implementation=attn, **small),
                            add_pooling_layer=False)

    def gpt2(attn: str) -> nn.Module:
        return tf.GPT2Model(tf.GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=2, n_head=2,
                                          use_cache=False, bos_token_id=0, eos_token_id=0, attn_implementation=attn))

    def distilbert(attn: str) -> nn.Module:
        return tf.DistilBertModel(tf.DistilBertConfig(dim=16, n_layers=2, n_heads=2, hidden_dim=32,
                                                      attn_implementation=attn, **small))

    return {f"{name}_{attn}": make(build, attn) for name, build in (("bert", bert), ("gpt2", gpt2),
                                                                    ("distilbert", distilbert))
            for attn in ("eager", "sdpa")}
