"""The aten-operator cases: models of ``zoo.py`` whose ``.pt`` and ``.pt2`` archives exercise the aten
operators Ember translates, and the script that saves some of them under ``samples/aten`` (run once; the
outputs are committed, so the tests cover these operators without torch).

``tests/test_aten_ops.py`` builds every case here when torch is installed.  Each case is a model and its
inputs keyed by ``forward``'s parameters (a list for a ``List[Tensor]`` parameter), and optionally the
inputs it is traced with, which differ from the test inputs only in values:

* embedding variants: ``nn.Embedding`` plain, with ``padding_idx`` and ``max_norm``; ``nn.EmbeddingBag``
  sum/mean/max with 1-D indices + offsets and with 2-D indices, per-sample weights,
  ``include_last_offset``, ``padding_idx`` and ``max_norm``; ``torch.take``; ``F.embedding_bag``;
  tables of 20 x 6 whose every third row has ten times the norm of the others;
* DLRM (``zoo.DLRMNet``, the reference's initialisation from ``np.random.RandomState(3)``, sparse
  tables as the reference makes them): both triangle forms, with and without the diagonal; inputs as
  the Criteo loader stacks them (``[tables, batch]`` tensors) or as the random-data generator gives
  them (lists), the latter also with weighted pooling and an output clamp;
* the dense-operator models; tiny BERT, GPT-2 and DistilBERT (eager and SDPA attention) when
  transformers is installed.

The ``max_norm`` models are traced on indices that only touch rows within the norm, so the tables the
archives store still hold rows above it (torch.jit.trace runs the model, and ``max_norm`` renormalises
the table in place); the test inputs look those rows up.

Needs torch==2.13.0 (CPU).  For each name in ``COMMITTED`` the script writes ``<name>.pt``
(torch.jit.trace + save), ``<name>.pt2`` (torch.export + save), ``<name>.in.npz`` (the inputs, named as
Ember names them) and ``<name>.torch.out.npz`` (PyTorch's eager output, ``output``), after checking that
both archives, loaded back with torch, give that output too.
"""

from __future__ import annotations

import copy
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import zoo  # noqa: E402  (the models are defined there)
from zoo import Case, Feeds, as_torch, eager  # noqa: E402

OUT = Path(__file__).resolve().parent / "aten"
COMMITTED = ("emb_max_norm", "bag_mean_max_norm", "bag_sum_2d", "bag_weighted_2d", "take", "dlrm_tril",
             "dlrm_lists_weighted", "shapes", "attention")
ROWS, DIM = 20, 6


def flat(feeds: Feeds) -> dict[str, np.ndarray]:
    """Inputs by the names Ember gives them: a list parameter `p` becomes p_0, p_1, ..."""
    out: dict[str, np.ndarray] = {}
    for k, v in feeds.items():
        if isinstance(v, list):
            out.update({f"{k}_{i}": a for i, a in enumerate(v)})
        else:
            out[k] = v
    return out


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
# Cases


def table(seed: int, big: int = 3) -> torch.Tensor:
    """Rows of norm about 0.7, except every `big`-th row from row 1, about ten times that."""
    w = torch.randn(ROWS, DIM, generator=torch.Generator().manual_seed(seed)) * 0.3
    w[1::big] *= 10
    return w


def emb(**kw: Any) -> nn.Embedding:
    """An nn.Embedding on table 1; its padding row, if any, zero as nn.Embedding makes it."""
    module = zoo.with_weight(nn.Embedding(ROWS, DIM, **kw), table(1))
    if module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx] = 0
    return module


def bag(mode: str, **kw: Any) -> nn.EmbeddingBag:
    """An nn.EmbeddingBag on table 2."""
    return zoo.with_weight(nn.EmbeddingBag(ROWS, DIM, mode=mode, **kw), table(2))


def embedding_cases() -> dict[str, Callable[[], Case]]:
    rng = np.random.default_rng(1)
    idx2 = rng.integers(0, ROWS, size=(4, 3)).astype(np.int64)
    idx1 = rng.integers(0, ROWS, size=10).astype(np.int64)
    off = np.array([0, 3, 3, 7], np.int64)  # bag 1 is empty
    last = np.append(off, idx1.size).astype(np.int64)
    w1 = rng.random(10).astype(np.float32)
    w2 = rng.random((4, 3)).astype(np.float32)
    small1, small2 = np.zeros_like(idx1), np.zeros_like(idx2)  # row 0 is within every max_norm below
    one_d, two_d = {"indices": idx1, "offsets": off}, {"indices": idx2}
    with_last = {"indices": idx1, "offsets": last}
    out: dict[str, Callable[[], Case]] = {
        "emb_plain": lambda: Case(zoo.Lookup(emb()), two_d),
        "emb_padding_idx": lambda: Case(zoo.Lookup(emb(padding_idx=int(idx2[0, 0]))), two_d),
        "emb_max_norm": lambda: Case(zoo.Lookup(emb(max_norm=1.0)), two_d, trace_feeds={"indices": small2},
                                     max_norm=1.0),
        "emb_max_norm_l1": lambda: Case(zoo.Lookup(emb(max_norm=2.0, norm_type=1.0)), two_d,
                                        trace_feeds={"indices": small2}, max_norm=2.0),
        "take": lambda: Case(zoo.Take(table(3)),
                             {"indices": rng.integers(-ROWS * DIM, ROWS * DIM, (3, 5)).astype(np.int64)}),
        "bag_weighted": lambda: Case(zoo.WeightedBag(bag("sum")), {**one_d, "weights": w1}),
        "bag_weighted_2d": lambda: Case(zoo.WeightedBag2D(bag("sum")), {**two_d, "weights": w2}),
        "fbag_sum_max_norm": lambda: Case(zoo.FunctionalBag(table(4), "sum", max_norm=1.0), one_d,
                                          trace_feeds={"indices": small1, "offsets": off}, max_norm=1.0),
        "fbag_max_last": lambda: Case(zoo.FunctionalBag(table(4), "max", include_last_offset=True), with_last),
    }
    for mode in ("sum", "mean", "max"):
        out |= {
            f"bag_{mode}": lambda m=mode: Case(zoo.Bag(bag(m)), one_d),
            f"bag_{mode}_2d": lambda m=mode: Case(zoo.Lookup(bag(m)), two_d),
            f"bag_{mode}_last": lambda m=mode: Case(zoo.Bag(bag(m, include_last_offset=True)), with_last),
            f"bag_{mode}_padding_idx": lambda m=mode: Case(zoo.Bag(bag(m, padding_idx=int(idx1[2]))), one_d),
            f"bag_{mode}_padding_idx_2d": lambda m=mode: Case(zoo.Lookup(bag(m, padding_idx=int(idx2[1, 1]))),
                                                              two_d),
            f"bag_{mode}_max_norm": lambda m=mode: Case(zoo.Bag(bag(m, max_norm=1.5)), one_d,
                                                        trace_feeds={"indices": small1, "offsets": off},
                                                        max_norm=1.5),
            f"fbag_{mode}": lambda m=mode: Case(zoo.FunctionalBag(table(4), m), one_d),
        }
    return out


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
        return lambda: Case(zoo.DLRMNet(m_spa, ln_emb, [5, 8, m_spa], [n_top, 8, 1], np.random.RandomState(3),
                                        sparse=True, **kw), feeds)

    return {
        "dlrm": make(criteo),
        "dlrm_tril": make(criteo, tril=True),
        "dlrm_itself": make(criteo, itself=True),
        "dlrm_tril_itself": make(criteo, tril=True, itself=True),
        "dlrm_lists": make(lists),
        "dlrm_lists_weighted": make(lists, weighted=True, threshold=0.05),
    }


def op_cases() -> dict[str, Callable[[], Case]]:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    ints = rng.integers(0, 6, (4, 6)).astype(np.int64)
    flags = rng.random((4, 6)) > 0.5
    mask = np.tril(np.ones((5, 5), dtype=bool)) | (rng.random((2, 5, 5)) > 0.6)
    return {
        "elementwise": lambda: Case(zoo.Elementwise(), {"x": x, "i": ints, "b": flags}),
        "shapes": lambda: Case(zoo.Shapes(), {"x": x}),
        "attention": lambda: Case(zoo.Attention(), {"x": rng.standard_normal((2, 5, 8)).astype(np.float32),
                                                    "mask": mask}),
    }


def torch_cases() -> dict[str, Callable[[], Case]]:
    """Every case but the Hugging Face ones (those need transformers)."""
    return {**embedding_cases(), **dlrm_cases(), **op_cases()}


def hf_cases() -> dict[str, Callable[[], Case]]:
    """The corpus's tiny transformers (zoo.hf_case), each with eager and with SDPA attention."""
    return {f"{kind}_{attn}": lambda k=kind, a=attn: zoo.hf_case(k, a)
            for kind in zoo.HF_KINDS for attn in ("eager", "sdpa")}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    cases = torch_cases()
    for name in COMMITTED:
        case = cases[name]()
        want = eager(case)
        save(case, OUT / name)
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            for kind, model in (("traced", torch.jit.load(str(OUT / f"{name}.pt"))),
                                ("exported", torch.export.load(str(OUT / f"{name}.pt2")).module())):
                got = model(*as_torch(case.feeds)).numpy()
                if not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                    raise SystemExit(f"{name}: the {kind} archive differs from eager PyTorch")
        np.savez(OUT / f"{name}.in.npz", **flat(case.feeds))
        np.savez(OUT / f"{name}.torch.out.npz", output=want)
        print(f"wrote {name}.pt, {name}.pt2, {name}.in.npz, {name}.torch.out.npz")


if __name__ == "__main__":
    main()
