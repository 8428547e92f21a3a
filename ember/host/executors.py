"""The two executors of host models, the option that chooses between them, and a cache of prepared ones.

onnxruntime runs a model as a deployment would and is used whenever it is installed (it is an optional
dependency).  `onnx.reference.ReferenceEvaluator` is always there; given a whole model with typed
inputs it expands operators that ONNX defines as functions (Gelu-20, and every context-dependent
function) into their bodies by itself.  Its GatherElements is replaced here: numpy's `choose`, which
it is built on, takes at most 64 choices, so it fails on a gather along any axis longer than that
(BERT's token-type gather along 512 positions).

Preparing a model (building an InferenceSession, loading the evaluator's kernels) is what an executor
refuses an operator at, so it is also the import-time check.  Prepared models are kept per process,
keyed by the serialized model, so a benchmark that runs a program many times builds each once.
"""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import ModelProto
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from ..ir.diagnostics import EmberError
from ..signals import sigint_deferred

RUNTIMES = ("auto", "onnxruntime", "reference")
ENV = "EMBER_HOST_RUNTIME"
NAMES = {"onnxruntime": "onnxruntime", "reference": "onnx.reference"}  # executor -> how messages name it
HELP = ("which library runs host ONNX operators (ember-import checks each against it): onnxruntime, "
        "onnx.reference ('reference'), or 'auto': onnxruntime when installed, onnx.reference for what it "
        f"cannot run [default: ${ENV}, else auto]")

Run = Callable[[dict[str, np.ndarray]], list[np.ndarray]]
_chosen: str | None = None


class Refused(Exception):
    """An executor cannot run a model; the message is its reason, one line."""


def set_runtime(choice: str | None) -> None:
    """Choose the host runtime for this process (None: the environment variable, else auto).  Either
    is checked here, so a tool stops on a misspelt name before it does any work."""
    global _chosen
    if choice is not None:
        check_runtime(choice, "--host-runtime")
    _chosen = choice
    runtime()


def check_runtime(choice: str, source: str) -> None:
    if choice not in RUNTIMES:
        raise EmberError(f"{source}: unknown host runtime '{choice}' (valid: {', '.join(RUNTIMES)})")


def runtime() -> str:
    if _chosen is not None:
        return _chosen
    choice = os.environ.get(ENV, "") or "auto"
    check_runtime(choice, ENV)
    return choice


def onnxruntime_installed() -> bool:
    try:
        with sigint_deferred():
            import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def executors_of(choice: str | None = None) -> tuple[str, ...]:
    """The executors a runtime choice tries, in order."""
    choice = choice or runtime()
    if choice == "reference":
        return ("reference",)
    if choice == "onnxruntime":
        if not onnxruntime_installed():
            raise EmberError("host runtime 'onnxruntime' chosen, but onnxruntime is not installed "
                             "(pip install onnxruntime, or choose --host-runtime reference)")
        return ("onnxruntime",)
    return ("onnxruntime", "reference") if onnxruntime_installed() else ("reference",)


def missing(choice: str | None = None) -> dict[str, str]:
    """Executors the choice would use but that are not installed, with why (for refusals)."""
    choice = choice or runtime()
    if choice == "auto" and not onnxruntime_installed():
        return {"onnxruntime": "not installed"}
    return {}


def unsupported(e: BaseException) -> bool:
    """Whether a run-time failure is the executor lacking the case (onnxruntime's ReduceMax of an empty
    bool tensor), which another executor may cover, rather than the operator's inputs being wrong."""
    return bool(re.search(r"NOT_IMPLEMENTED|[Nn]ot implemented|is not defined for|is not supported", str(e)))


def short(e: BaseException) -> str:
    """An executor's error as one line: onnxruntime's status prefix, source paths, C++ signatures,
    internal node names and schema dumps dropped, the reason kept."""
    text = str(e).strip() or type(e).__name__
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"^\[\w+Error\] \(op_type:[^)]*\): ", "", text)  # onnx's checker and inference
    if ", Error " in text:  # "This is an invalid model. In Node, (...) : (...) -> (...) , Error <reason>"
        text = text.rsplit(", Error ", 1)[1]
    text = re.sub(r"^Non-zero status code returned while running \w+ node\. Name:'[^']*' Status Message: ", "", text)
    # onnxruntime's code location: "/path/file.cc:91 ns::Class::method(args) [with T = ...] " or
    # "file.cc:703 Compute ", then the reason (after "condition was false. " for a failed check)
    text = re.sub(r"\S+\.(?:cc|h|cpp|hpp):\d+ (?:\S+\((?:[^()]|\([^()]*\))*\)(?: const)?|\S+) (?:\[[^\]]*\] )?",
                  "", text)
    text = re.sub(r"^[^.]* was false\. ", "", text)
    text = text.split("\n", 1)[0].split(" Available implementations:", 1)[0]
    text = text.split(", schema.has_function is", 1)[0].split(" You may either add one", 1)[0]
    text = re.sub(r" node with name '[^']*'", " node", text)
    text = re.sub(r" in node \([^)]*\)", "", text)
    text = re.sub(r"\bNode\([^)]*\) ", "Node ", text)
    return text if len(text) <= 400 else text[:397] + "..."


class GatherElements(OpRun):
    """ONNX GatherElements with numpy's take_along_axis (the reference's own fails on long axes)."""

    def _run(self, data: np.ndarray, indices: np.ndarray, axis: int = 0) -> tuple[np.ndarray]:
        if data.ndim != indices.ndim:
            raise ValueError(f"indices have rank {indices.ndim}, data rank {data.ndim}")
        ax = axis % data.ndim if data.ndim else 0
        n = data.shape[ax]
        if indices.size and (indices.min() < -n or indices.max() >= n):
            bad = indices.min() if indices.min() < -n else indices.max()
            raise ValueError(f"index {bad} is out of range [-{n}, {n}) along axis {axis}")
        for d, (s, m) in enumerate(zip(indices.shape, data.shape)):
            if d != ax and s > m:  # onnxruntime refuses it too; slicing below would broadcast instead
                raise ValueError(f"indices have {s} elements along dimension {d}, data only {m}")
        idx = np.where(indices < 0, indices + n, indices)
        # dimensions other than the axis may be shorter in the indices (as in torch.gather)
        view = data[tuple(slice(None) if d == ax else slice(0, s) for d, s in enumerate(idx.shape))]
        return (np.take_along_axis(view, idx, axis=ax),)


def _prepare_reference(model: ModelProto) -> Run:
    try:
        ev = ReferenceEvaluator(model, new_ops=[GatherElements])
    except Exception as e:  # its kernels are loaded here: an operator it has no implementation for
        raise Refused(short(e)) from None
    return lambda feeds: [np.asarray(o) for o in ev.run(None, feeds)]


def _prepare_onnxruntime(model: ModelProto) -> Run:
    with sigint_deferred():
        import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # its own failures come back as exceptions; no log lines on stderr
    # one thread: benchmark points already run one process per core
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise Refused(short(e)) from None
    return lambda feeds: session.run(None, feeds)


_PREPARE: dict[str, Callable[[ModelProto], Run]] = {"onnxruntime": _prepare_onnxruntime,
                                                     "reference": _prepare_reference}
_CACHE: OrderedDict[tuple[str, bytes], Run | Refused] = OrderedDict()
CACHE_SIZE = 512


def prepare(executor: str, model: ModelProto) -> Run:
    """`model` made ready to run by `executor` (cached by its bytes); raises Refused with the reason."""
    k = (executor, model.SerializeToString())
    got = _CACHE.get(k)
    if got is None:
        try:
            got = _PREPARE[executor](model)
        except Refused as e:
            got = e
        _CACHE[k] = got
        if len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(k)
    if isinstance(got, Refused):
        raise got
    return got


def describe(reasons: dict[str, Any]) -> str:
    """`onnxruntime: why; onnx.reference: why`, executors in a fixed order."""
    return "; ".join(f"{NAMES[x]}: {reasons[x]}" for x in ("onnxruntime", "reference") if x in reasons)
