"""Scripted TorchScript archives, read with torch (the optional `ember[torch]` extra).

The torch-free reader (ember/frontends/torchscript.py) follows traced code only: straight-line calls
of aten operators.  A module saved from `torch.jit.script` has control flow (its own, and that of the
scripted `torch.nn.functional` helpers such as `embedding_bag`) and records no input shapes, so that
reader raises `NeedsTorch` for it.  Here torch loads the archive and `torch.export` traces it into a
`.pt2` file, which the torch-free `.pt2` reader then imports like any other.

Why this route (measured with torch 2.13 on scripted forms of every sample model): the TorchScript
ONNX exporter fails on scripted modules (it cannot type values produced inside `prim::If`), the
dynamo ONNX exporter and `torch.export` refuse a ScriptModule outright, `TS2EPConverter` fails on
`prim::If`, and `torch.jit.trace` of a ScriptModule returns it unchanged.  `torch.export` in
non-strict mode of a thin `nn.Module` that calls the ScriptModule runs the TorchScript interpreter on
fake tensors: branches on attributes, shapes and dtypes are taken, loops of known trip count unroll,
and a branch on tensor *data* fails (it cannot be decided without values), so the result never
depends on the example values, only on their shapes and dtypes.

The `.pt2` is written beside the `.eir` and is what the `.eir` names for its weights, so the later
tools (ember-asm, ember-sim) need no torch.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import warnings
from typing import Any

import numpy as np

from ..ir.diagnostics import EmberError
from ..signals import sigint_deferred
from .aten.archive import check_declared
from .needs_torch import NeedsTorch

__all__ = ["export_scripted"]


def _one_line(e: BaseException) -> str:
    """torch's messages run over many lines (tracebacks of the TorchScript interpreter): the gist."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = lines[0] if lines else type(e).__name__
    for ln in lines:  # the TorchScript interpreter puts the real error last
        if ln.startswith(("RuntimeError:", "ValueError:", "TypeError:", "IndexError:")):
            text = ln
    return text if len(text) <= 240 else text[:237] + "..."


def _inputs(names: list[str], required: list[str], given: dict[str, np.ndarray] | None,
            need: NeedsTorch, path: str) -> dict[str, np.ndarray]:
    """Example inputs by forward's parameter names: the user's, else zeros of the traced shapes."""
    if given is None:
        if need.inputs is None:
            raise EmberError(f"{need.reason}; pass --example-inputs IN.npz with one array per parameter of "
                             f"forward ({', '.join(names)}): only their shapes and dtypes are used", path)
        given = {k: np.zeros(shape, dtype=np.dtype(dtype)) for k, (shape, dtype) in need.inputs.items()}
    unknown = [k for k in given if k not in names]
    missing = [k for k in required if k not in given]
    present = [k for k in names if k in given]
    if unknown or missing or present != names[:len(present)]:
        what = (f"has no parameter {', '.join(unknown)}" if unknown else f"needs {', '.join(missing)}" if missing
                else "takes them in order, so only trailing parameters with defaults may be left out")
        raise EmberError(f"the example inputs do not match forward({', '.join(names)}): forward {what}", path)
    return {k: given[k] for k in present}


def export_scripted(path: str, need: NeedsTorch, example_inputs: dict[str, np.ndarray] | None, dest: str) -> None:
    """Load the TorchScript archive at `path` with torch and save it to `dest` as a torch.export archive."""
    check_declared(path)  # torch inflates every member, to the size it declares
    try:
        with sigint_deferred():
            import torch
    except ImportError:
        raise EmberError(f"{need.reason}; Ember reads such archives with torch, which is not installed: "
                         "pip install 'ember[torch]'", path) from None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.jit.load is deprecated, and exactly what reads this archive
            loaded = torch.jit.load(path, map_location="cpu")
    except Exception as e:  # torch's loader fails in many ways on a damaged or foreign archive
        raise EmberError(f"torch cannot load the archive: {_one_line(e)}", path) from None
    schema = loaded.forward.schema.arguments[1:]
    names = [a.name for a in schema]
    required = [a.name for a in schema if not a.has_default_value()]
    feeds = _inputs(names, required, example_inputs, need, path)
    args = tuple(torch.from_numpy(np.ascontiguousarray(v)) for v in feeds.values())
    module = _wrap(torch, loaded, list(feeds))
    try:
        with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")  # torch.export's chatter (and a graph dump when it fails) is not for users
            program = torch.export.export(module, args, strict=False)
            want, got = loaded(*args), program.module()(*args)
    except Exception as e:
        raise EmberError(f"torch.export cannot trace the scripted module (a branch on tensor values, or an "
                         f"unsupported construct): {_one_line(e)}", path) from None
    if not _same(torch, want, got):
        raise EmberError("the exported program differs from the scripted module on the example inputs", path)
    try:
        torch.export.save(program, dest)
    except Exception as e:
        raise EmberError(f"cannot save the exported program: {_one_line(e)}", dest) from None


def _wrap(torch: Any, scripted: Any, names: list[str]) -> Any:
    """An nn.Module calling `scripted`, which torch.export accepts where it refuses a ScriptModule.

    Its forward takes forward's parameter names (so the `.pt2` and then the `.eir` keep them), and the
    scripted parameters become `nn.Parameter`s again, which torch.export requires of parameters."""
    for name, t in list(scripted.named_parameters()):
        *parents, leaf = name.split(".")
        owner = scripted
        for p in parents:
            owner = getattr(owner, p)
        setattr(owner, leaf, torch.nn.Parameter(t.detach(), requires_grad=False))

    def forward(self: Any, *args: Any) -> Any:
        return self.scripted(*args)

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    forward.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", kind)] + [inspect.Parameter(n, kind) for n in names])
    module = type("Scripted", (torch.nn.Module,), {"forward": forward})()
    module.scripted = scripted
    return module


def _same(torch: Any, want: Any, got: Any) -> bool:
    if isinstance(want, torch.Tensor):
        return isinstance(got, torch.Tensor) and want.shape == got.shape and bool(
            torch.allclose(want, got, rtol=1e-5, atol=1e-6, equal_nan=True))
    if isinstance(want, tuple | list):
        return isinstance(got, tuple | list) and len(want) == len(got) and all(
            _same(torch, w, g) for w, g in zip(want, got))
    return bool(want == got)
