"""Save the sample models as TorchScript and torch.export archives (run once; outputs are committed).

Needs torch==2.13.0 (CPU).  Ember reads both archive kinds without torch, so the tests only need
what this script leaves in ``samples/models``: for every model of ``gen_models.cases()``

* ``<name>.traced.pt``      torch.jit.trace + torch.jit.save,
* ``<name>.pt2``            torch.export.export + torch.export.save,
* ``<name>.torch.out.npz``  PyTorch's eager outputs (``output``, or ``output0``, ``output1``, ...),

and, with ``--pad``, the same for the models of ``gen_models.pad_cases()``; with ``--graphs``, for the
message-passing, SpMM, knowledge-graph and attention models of ``gen_models.graph_cases()`` plus
``gen_models.inplace_cases()`` (the same aggregations written with in-place updates, as PyG code often is),
with the inputs of the existing ``<name>.in.npz`` (keyed by the names of ``forward``'s parameters).
With ``--scripted`` it writes ``<name>.scripted.pt`` (torch.jit.script + torch.jit.save) for the models
of ``SCRIPTED``, whose eager outputs must equal the committed ``<name>.torch.out.npz``, and for
``zoo.GatedBag`` (``bag_gated``, with its own inputs and outputs): archives only ember-import's
torch route reads.
The models are built after the same seed as in ``gen_models.py``, so their weights match the ONNX
samples too, but nothing relies on that: each archive is checked against its own eager run.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_models import OUT, bag, cases, graph_cases, inplace_cases, pad_cases  # noqa: E402  (the cases)
from zoo import GatedBag  # noqa: E402


def output_names(result: object) -> dict[str, torch.Tensor]:
    """Name eager outputs the way the importers name module outputs."""
    if isinstance(result, torch.Tensor):
        return {"output": result}
    if isinstance(result, tuple | list) and all(isinstance(r, torch.Tensor) for r in result):
        return {f"output{i}": r for i, r in enumerate(result)}
    raise TypeError(f"unsupported output type {type(result).__name__}")


def check_inputs(name: str, model: torch.nn.Module, feeds: dict[str, np.ndarray]) -> None:
    """The stored inputs must be keyed by forward's parameters, as the importers name them."""
    params = list(inspect.signature(model.forward).parameters)
    if params != list(feeds):
        raise SystemExit(f"{name}: inputs {list(feeds)} do not match forward{tuple(params)}")
    stored = OUT / f"{name}.in.npz"
    if stored.exists():
        old = np.load(stored)
        if sorted(old.files) != sorted(feeds) or any(not np.array_equal(old[k], v) for k, v in feeds.items()):
            raise SystemExit(f"{stored.name} differs from the inputs gen_models.py makes; "
                             "rerun gen_models.py (with --pad for the padded bags) first")
    else:
        np.savez(stored, **feeds)


def save(name: str, model: torch.nn.Module, feeds: dict[str, np.ndarray]) -> None:
    check_inputs(name, model, feeds)
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    with torch.no_grad():
        want = output_names(model(*args))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and serializer chatter about unrelated features
        traced = torch.jit.trace(model, args)
        torch.jit.save(traced, str(OUT / f"{name}.traced.pt"))
        exported = torch.export.export(model, args)
        torch.export.save(exported, str(OUT / f"{name}.pt2"))
    with torch.no_grad():
        for kind, got in (("traced", output_names(traced(*args))),
                          ("exported", output_names(exported.module()(*args)))):
            for k, v in want.items():
                if not torch.allclose(got[k], v, rtol=1e-6, atol=1e-7):
                    raise SystemExit(f"{name}: the {kind} model differs from eager PyTorch on '{k}'")
    np.savez(OUT / f"{name}.torch.out.npz", **{k: v.numpy() for k, v in want.items()})
    print(f"wrote {name}.traced.pt, {name}.pt2, {name}.torch.out.npz: inputs {list(feeds)}, outputs {list(want)}")


def graphs() -> None:
    torch.manual_seed(0)  # TransE's tables
    models = {name: (model, feeds) for name, (model, feeds, _) in graph_cases().items()}
    for name, (model, feeds) in {**models, **inplace_cases()}.items():
        model.eval()
        save(name, model, feeds)


SCRIPTED = ("embedding", "bag_mean", "bag_weighted", "mp_mean", "spmm", "kg_transe", "spattn")


def save_scripted(name: str, model: torch.nn.Module, feeds: dict[str, np.ndarray],
                  want: dict[str, torch.Tensor]) -> None:
    """Script `model`, save it, and check the saved archive reproduces `want` (its eager outputs)."""
    args = tuple(torch.from_numpy(v) for v in feeds.values())
    path = OUT / f"{name}.scripted.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(torch.jit.script(model), str(path))
    with torch.no_grad():
        got = output_names(torch.jit.load(str(path))(*args))
    for k, v in want.items():
        if not torch.allclose(got[k], v, rtol=1e-6, atol=1e-7):
            raise SystemExit(f"{name}: the scripted model differs from eager PyTorch on '{k}'")
    print(f"wrote {path.name}")


def scripted() -> None:
    """Scripted archives of models whose traced archives exist (same seeds, so the same weights)."""
    torch.manual_seed(0)
    models = cases()
    torch.manual_seed(0)
    models.update({name: (model, feeds) for name, (model, feeds, _) in graph_cases().items()})
    for name in SCRIPTED:
        model, feeds = models[name]
        model.eval()
        stored = np.load(OUT / f"{name}.torch.out.npz")
        with torch.no_grad():
            eager = output_names(model(*(torch.from_numpy(v) for v in feeds.values())))
        if any(not np.allclose(stored[k], v.numpy(), rtol=1e-6, atol=1e-7) for k, v in eager.items()):
            raise SystemExit(f"{name}: the model differs from {name}.torch.out.npz; regenerate the archives first")
        save_scripted(name, model, feeds, eager)
    torch.manual_seed(1)
    gated = GatedBag(bag("mean"), scale=True).eval()
    feeds = dict(np.load(OUT / "bag_sum.in.npz"))
    check_inputs("bag_gated", gated, feeds)
    with torch.no_grad():
        want = output_names(gated(*(torch.from_numpy(v) for v in feeds.values())))
    np.savez(OUT / "bag_gated.torch.out.npz", **{k: v.numpy() for k, v in want.items()})
    save_scripted("bag_gated", gated, feeds, want)


def main() -> None:
    if sys.argv[1:] == ["--pad"]:  # only the padding_idx bags (the others stay byte-identical)
        OUT.mkdir(exist_ok=True)
        for name, (model, feeds) in pad_cases().items():
            model.eval()
            save(name, model, feeds)
        return
    if sys.argv[1:] == ["--scripted"]:  # only the scripted archives
        scripted()
        return
    if sys.argv[1:] == ["--graphs"]:  # only the graph models
        OUT.mkdir(exist_ok=True)
        graphs()
        return
    torch.manual_seed(0)
    OUT.mkdir(exist_ok=True)
    for name, (model, feeds) in cases().items():
        model.eval()
        save(name, model, feeds)
    graphs()


if __name__ == "__main__":
    main()
