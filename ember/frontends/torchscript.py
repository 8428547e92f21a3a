"""TorchScript frontend: import a traced `.pt` archive (torch.jit.trace + torch.jit.save) without torch.

A TorchScript archive is a zip holding the module tree as a pickle (`data.pkl`), the raw tensor
storages (`data/<key>`, and `constants/<key>` for `constants.pkl`) and the module's code as
Python-syntax source (`code/__torch__/...`).  Unpickling a user's file with `pickle.load` would run
whatever callables it names, so the restricted unpickler (torch_pickle.py) accepts only the handful of
globals such an archive uses, refuses everything else by name, and caps what the pickle may build.  The
code is never executed either: it is parsed with `ast` and the traced `forward` is walked symbolically, inlining
submodule calls, and each `torch.<op>(...)` call (or `ops.<namespace>.<op>(...)` of another namespace, such as
`quantized`) goes to `AtenLowering` (ember/frontends/aten/), shared with the `.pt2` frontend (which sees the
same aten operators with named arguments): `embedding` becomes emb.gather, `embedding_bag` becomes emb.bag
with PyTorch's semantics, the quantized bags emb.qbag, and the dense operators become `host.onnx` ops at
opset 17.

A scripted module (control flow in its code, or no recorded input shapes) raises `NeedsTorch`:
ember-import then reads it with torch when installed (ember/frontends/scripted.py).

Weights stay in the archive: a module tensor becomes a `param` named by its attribute path (as in
`state_dict`), and the few constants the translation needs (ONNX axes inputs, stacked index tables)
are params named `/constant_<n>`; `load_weights_torchscript` returns both.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dialects import builtin, emb  # noqa: F401  (registers the ops this frontend produces)
from ..ir.core import Block, Op
from ..ir.diagnostics import EmberError
from ..ir.types import tensor
from .aten import (
    ELEM,
    MAX_DEPTH,
    AtenLowering,
    TorchDType,
    Unsupported,
    Weight,
    build_module,
    has_member,
    open_zip,
    read_member,
)
from .aten.values import numpy_of
from .needs_torch import NeedsTorch
from .torch_pickle import StorageType, TensorMeta, TorchObject, unpickle

__all__ = ["import_torchscript", "load_weights_torchscript"]


# ---------------------------------------------------------------------------------------------
# The archive and its code

_HINT = ("Ember reads traced TorchScript modules; save the model with torch.export.save (.pt2) "
         "or torch.onnx.export (.onnx) instead")


class _Archive:
    """A TorchScript zip: the module tree with named weights, and the parsed `code/` sources."""

    def __init__(self, path: str):
        self.path = path
        self.zf = open_zip(path)
        pkls = [n for n in self.zf.namelist() if n == "data.pkl" or n.endswith("/data.pkl")]
        if not pkls:
            raise EmberError("not a TorchScript archive (no data.pkl)", path)
        self.prefix = min(pkls, key=lambda n: n.count("/"))[: -len("data.pkl")]
        order = self.member("byteorder").decode("ascii", "replace").strip() if self.has("byteorder") else "little"
        if order not in ("little", "big"):
            raise EmberError(f"unknown byte order '{order}'", path)
        self.order = "<" if order == "little" else ">"
        self.storages: dict[str, np.ndarray] = {}
        self.sources: dict[str, ast.Module] = {}
        self.root = unpickle(self.member("data.pkl"), self.loader("data"), self.zf, "data.pkl")
        if not isinstance(self.root, TorchObject):
            raise EmberError("data.pkl does not hold a TorchScript module (saved with torch.save? use "
                             "torch.jit.trace and torch.jit.save)", path)
        self.constants: tuple[Any, ...] = ()
        if self.has("constants.pkl"):
            c = unpickle(self.member("constants.pkl"), self.loader("constants"), self.zf, "constants.pkl")
            self.constants = tuple(c) if isinstance(c, tuple | list) else ()
        self.tensors: dict[str, np.ndarray] = {}
        self.name_tensors()

    def has(self, name: str) -> bool:
        return has_member(self.zf, self.prefix + name)

    def member(self, name: str) -> bytes:
        return read_member(self.zf, self.prefix + name, self.path)

    def loader(self, folder: str) -> Callable[[str, StorageType, int], np.ndarray]:
        """Reads the storages of one pickle: data.pkl's live in data/, constants.pkl's in constants/."""
        return lambda key, kind, numel: self.storage(f"{folder}/{key}", kind, numel)

    def storage(self, name: str, kind: StorageType, numel: int) -> np.ndarray:
        if name not in self.storages:
            assert kind.dtype is not None
            raw = self.member(name)
            dt = np.dtype(kind.dtype).newbyteorder(self.order)
            if len(raw) < numel * dt.itemsize or numel < 0:
                raise EmberError(f"storage {name} holds {len(raw)} bytes, fewer than {numel} "
                                 f"{kind.dtype} elements", self.path)
            self.storages[name] = np.frombuffer(raw, dtype=dt, count=numel).astype(dt.newbyteorder("="))
        return self.storages[name]

    def name_tensors(self) -> None:
        """Replace module tensors by `Weight`s named by attribute path (tied tensors keep the first name)."""
        seen: dict[int, Weight] = {}
        done: set[int] = set()

        def walk(obj: Any, path: str) -> Any:
            if isinstance(obj, np.ndarray):
                if id(obj) not in seen:
                    seen[id(obj)] = Weight(path, obj)
                    self.tensors[path] = obj
                return seen[id(obj)]
            if isinstance(obj, TorchObject):
                if id(obj) not in done:
                    done.add(id(obj))
                    for k, v in list(obj.attrs.items()):
                        obj.attrs[k] = walk(v, f"{path}.{k}" if path else str(k))
                return obj
            if isinstance(obj, list | tuple):
                items = [walk(v, f"{path}.{i}") for i, v in enumerate(obj)]
                return items if isinstance(obj, list) else tuple(items)
            return obj

        walk(self.root, "")
        self.constants = tuple(Weight(f"CONSTANTS.c{i}", c) if isinstance(c, np.ndarray) else c
                               for i, c in enumerate(self.constants))
        for c in self.constants:
            if isinstance(c, Weight):
                self.tensors[c.name] = c.array

    def source(self, module: str) -> tuple[ast.Module, str]:
        """The parsed `code/` file of a `__torch__...` module and its archive-relative name."""
        rel = "code/" + module.replace(".", "/") + ".py"
        if rel not in self.sources:
            text = self.member(rel).decode("utf-8", "replace")
            try:
                self.sources[rel] = ast.parse(text, filename=rel)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
                raise EmberError(f"{rel} is not valid TorchScript source ({type(e).__name__})", self.path) from None
        return self.sources[rel], rel

    def method(self, qualname: str, name: str) -> tuple[ast.FunctionDef, str]:
        """The `ast` of `<class>.<name>` and the archive-relative file it is in."""
        module, _, cls = qualname.rpartition(".")
        tree, rel = self.source(module)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == name:
                        return item, rel
        raise EmberError(f"{rel} has no method {cls}.{name}", self.path)

    def function(self, qualname: str) -> tuple[ast.FunctionDef, str]:
        """A scripted free function a traced module calls (`__torch__.<module>.<name>`)."""
        module, _, name = qualname.rpartition(".")
        tree, rel = self.source(module)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node, rel
        raise EmberError(f"{rel} has no function {name}", self.path)

    def example_inputs(self) -> list[TensorMeta | list[TensorMeta]]:
        """Shapes and types of the inputs the module was traced with (traced_inputs.pkl): a tensor, or a
        list of tensors for a `List[Tensor]` parameter (DLRM's per-table offsets and indices)."""
        if not self.has("traced_inputs.pkl"):
            raise NeedsTorch("a scripted module (torch.jit.script, or a trace older than torch 2.0): the archive "
                             "does not record the shapes of its inputs", self.path)
        got = unpickle(self.member("traced_inputs.pkl"), None, self.zf, "traced_inputs.pkl")
        forward = got.get("forward") if isinstance(got, dict) else None
        if not isinstance(forward, list | tuple) or not all(
                isinstance(t, TensorMeta) or (isinstance(t, list) and all(isinstance(e, TensorMeta) for e in t))
                for t in forward):
            raise EmberError("traced_inputs.pkl does not list the tensors forward was traced with", self.path)
        return list(forward)


# ---------------------------------------------------------------------------------------------
# Symbolic execution of the traced forward


def _dotted(node: ast.expr) -> str | None:
    """`torch.embedding` -> "torch.embedding"; None for anything but a chain of names."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


_FLOAT_NAMES = {"inf": float("inf"), "nan": float("nan")}
"""How TorchScript source writes the float constants Python has no literal for (`-inf` is USub of inf)."""


def _aten_name(name: str | None) -> str | None:
    """`torch.embedding` or `ops.aten.embedding` -> "embedding", an operator of another namespace
    (`ops.quantized.embedding_bag_byte_rowwise_offsets`) -> "quantized.<name>", as the operator table and the
    `.pt2` reader name it; None for any other call (`ops.prim.*` is the interpreter's own)."""
    if name is None:
        return None
    for prefix in ("torch.", "ops.aten."):
        if name.startswith(prefix) and "." not in name[len(prefix):]:
            return name[len(prefix):]
    parts = name.split(".")
    if len(parts) == 3 and parts[0] == "ops" and parts[1] not in ("aten", "prim"):
        return f"{parts[1]}.{parts[2]}"
    return None


@dataclass(frozen=True)
class _Function:
    """A scripted free function named in the source (`__torch__.<module>.<name>`), to be called."""

    qualname: str


@dataclass(frozen=True)
class _Device:
    """`torch.device("cpu")` in traced source."""

    name: str


_SIZE_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "floor_divide": operator.floordiv,
    "remainder": operator.mod, "div": operator.truediv, "pow": operator.pow,
}


def _fold_sizes(op: str, args: list[Any], kwargs: dict[str, Any]) -> int | float | None:
    """Size arithmetic of a trace, e.g. `torch.floor_divide(n, CONSTANTS.c0)` with n from
    `ops.prim.NumToTensor(torch.size(q, 0))`: computed here when one operand is such a number and the
    other a number or a 0-d constant; None for anything else (a real tensor operation)."""
    if op not in _SIZE_OPS or kwargs or len(args) != 2:
        return None
    vals: list[int | float] = []
    for x in args:
        if isinstance(x, Weight) and x.array.shape == () and x.array.dtype.kind in "iuf":
            x = x.array.item()
        if not isinstance(x, int | float) or isinstance(x, bool):
            return None
        vals.append(x)
    if not any(isinstance(x, int | float) and not isinstance(x, bool) for x in args):
        return None  # two constants: leave them to the lowering as tensors
    a, b = vals
    if op in ("floor_divide", "remainder", "div") and b == 0:
        return None
    return _SIZE_OPS[op](a, b)


class _Interpreter:
    """Walks TorchScript source with symbolic values; no part of the archive is executed."""

    def __init__(self, archive: _Archive, lowering: AtenLowering,
                 traced: dict[str, tuple[tuple[int, ...], str]] | None = None):
        self.ar = archive
        self.low = lowering
        self.traced = traced

    def fail(self, why: str, file: str, node: ast.AST, call: str | None = None) -> EmberError:
        at = f"{file}:{getattr(node, 'lineno', 0)}"
        what = f"'{call}' at {at}" if call else at
        return EmberError(f"{what}: {why}; {_HINT}", self.ar.path)

    def call_method(self, obj: TorchObject, name: str, args: list[Any], kwargs: dict[str, Any], depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise EmberError(f"module calls nest more than {MAX_DEPTH} deep", self.ar.path)
        fn, file = self.ar.method(obj.qualname, name)
        return self.run(fn, file, self.bind(fn, file, [obj, *args], kwargs), depth)

    def call_function(self, qualname: str, args: list[Any], kwargs: dict[str, Any], depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise EmberError(f"function calls nest more than {MAX_DEPTH} deep", self.ar.path)
        fn, file = self.ar.function(qualname)
        return self.run(fn, file, self.bind(fn, file, args, kwargs), depth)

    def run(self, fn: ast.FunctionDef, file: str, env: dict[str, Any], depth: int) -> Any:
        """A method or function body: straight-line code only; control flow needs torch."""
        for stmt in fn.body:
            if isinstance(stmt, ast.Return):
                return None if stmt.value is None else self.eval(stmt.value, env, file, depth)
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                self.assign(stmt.targets[0], self.eval(stmt.value, env, file, depth), env, file)
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                self.assign(stmt.target, self.eval(stmt.value, env, file, depth), env, file)
            elif isinstance(stmt, ast.Expr):
                if not isinstance(stmt.value, ast.Constant):  # docstrings are harmless, calls are not
                    self.eval(stmt.value, env, file, depth)
            elif not isinstance(stmt, ast.Pass):
                kind = type(stmt).__name__.lower()
                raise NeedsTorch(f"{file}:{stmt.lineno}: '{kind}' statements (control flow of scripted code) "
                                 "cannot be read without torch", self.ar.path, self.traced)
        return None

    def bind(self, fn: ast.FunctionDef, file: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
        spec = fn.args
        if spec.vararg or spec.kwarg or spec.kwonlyargs:
            raise self.fail("methods with *args, **kwargs or keyword-only parameters are not supported", file, fn)
        names = [a.arg for a in [*spec.posonlyargs, *spec.args]]
        if len(args) > len(names):
            raise self.fail(f"{fn.name} takes {len(names)} arguments, got {len(args)}", file, fn)
        env = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names or k in env:
                raise self.fail(f"{fn.name} got an unexpected argument '{k}'", file, fn)
            env[k] = v
        defaults = dict(zip(names[len(names) - len(spec.defaults):], spec.defaults))
        for n in names:
            if n not in env:
                if n not in defaults or not isinstance(defaults[n], ast.Constant):
                    raise self.fail(f"{fn.name} is missing argument '{n}'", file, fn)
                env[n] = defaults[n].value  # type: ignore[attr-defined]
        return env

    def assign(self, target: ast.expr, value: Any, env: dict[str, Any], file: str) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
            return
        if isinstance(target, ast.Tuple | ast.List):
            if not isinstance(value, tuple | list) or len(value) != len(target.elts):
                raise self.fail(f"cannot unpack {type(value).__name__} into {len(target.elts)} names", file, target)
            for t, v in zip(target.elts, value):
                self.assign(t, v, env, file)
            return
        raise self.fail("only assignments to names are supported", file, target)

    def eval(self, node: ast.expr, env: dict[str, Any], file: str, depth: int) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in _FLOAT_NAMES and node.id not in env:
                return _FLOAT_NAMES[node.id]
            if node.id not in env:
                raise self.fail(f"'{node.id}' is not defined", file, node)
            return env[node.id]
        if isinstance(node, ast.Tuple):
            return tuple(self.eval(e, env, file, depth) for e in node.elts)
        if isinstance(node, ast.List):
            return [self.eval(e, env, file, depth) for e in node.elts]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.eval(node.operand, env, file, depth)
            if isinstance(v, int | float) and not isinstance(v, bool):
                return -v
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "CONSTANTS" and "CONSTANTS" not in env:
                k = node.attr[1:] if node.attr.startswith("c") else ""
                if k.isdigit() and int(k) < len(self.ar.constants):
                    return self.ar.constants[int(k)]
                raise self.fail(f"unknown constant CONSTANTS.{node.attr}", file, node)
            name = _dotted(node)
            if name is not None and name.startswith("__torch__.") and "__torch__" not in env:
                return _Function(name)  # `_0 = __torch__.<module>.<function>`, called later as `_0(...)`
            base = self.eval(node.value, env, file, depth)
            return self.attribute(base, node.attr, file, node)
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value, env, file, depth)
            key = self.eval(node.slice, env, file, depth)
            if isinstance(base, list | tuple) and isinstance(key, int) and -len(base) <= key < len(base):
                return base[key]
            raise self.fail("only constant indexing of lists and tuples is supported", file, node)
        if isinstance(node, ast.Call):
            return self.call(node, env, file, depth)
        raise self.fail(f"'{ast.unparse(node)[:60]}' is not supported", file, node)

    def attribute(self, base: Any, name: str, file: str, node: ast.AST) -> Any:
        if isinstance(base, TorchObject):
            if name not in base.attrs:
                raise self.fail(f"{base.qualname} has no attribute '{name}'", file, node)
            return base.attrs[name]
        raise self.fail(f"attribute '{name}' of a {type(base).__name__} is not supported", file, node)

    def call(self, node: ast.Call, env: dict[str, Any], file: str, depth: int) -> Any:
        name = _dotted(node.func)
        text = ast.unparse(node.func)[:80]
        if name == "annotate" and len(node.args) == 2:  # annotate(<type>, value): the type is not evaluated
            return self.eval(node.args[1], env, file, depth)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.fail("calls with * or ** arguments are not supported", file, node, text)
        args = [self.eval(a, env, file, depth) for a in node.args]
        kwargs = {str(k.arg): self.eval(k.value, env, file, depth) for k in node.keywords}
        if name == "getattr" and len(args) == 2 and isinstance(args[1], str) and not kwargs:
            return self.attribute(args[0], args[1], file, node)
        if name in ("int", "float", "bool") and len(args) == 1 and isinstance(args[0], int | float | bool):
            return {"int": int, "float": float, "bool": bool}[name](args[0])
        if name == "ops.prim.NumToTensor" and len(args) == 1 and isinstance(args[0], int | float):
            return args[0]  # a traced size; it only feeds int() or other size arithmetic
        if name == "torch.device" and len(args) == 1 and isinstance(args[0], str) and not kwargs:
            return _Device(args[0])  # only passed on to factories, which ignore it
        op = _aten_name(name)
        if op is not None:
            folded = _fold_sizes(op, args, kwargs)
            if folded is not None:
                return folded
            try:
                return self.low.lower(op, args, kwargs)
            except Unsupported as e:
                raise self.fail(str(e), file, node, f"{text}(...)") from None
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:  # arguments of odd types
                raise self.fail(f"invalid arguments ({type(e).__name__}: {e})", file, node, f"{text}(...)") from None
        if name is not None and name.startswith("__torch__.") and "__torch__" not in env:
            return self.call_function(name, args, kwargs, depth + 1)
        if isinstance(node.func, ast.Name) and isinstance(env.get(node.func.id), _Function):
            return self.call_function(env[node.func.id].qualname, args, kwargs, depth + 1)
        if name == "ops.prim.dtype" and len(args) == 1 and not kwargs:
            try:
                return TorchDType(numpy_of(self.low.elem(self.low.value(args[0], "the operand of dtype()"))).name)
            except Unsupported as e:
                raise self.fail(str(e), file, node, "ops.prim.dtype(...)") from None
        if isinstance(node.func, ast.Attribute):
            obj = self.eval(node.func.value, env, file, depth)
            if isinstance(obj, TorchObject):
                return self.call_method(obj, node.func.attr, args, kwargs, depth + 1)
        raise self.fail("this call is not supported", file, node, f"{text}(...)")


def _translate(path: str, weights_ref: str) -> tuple[Op, dict[str, np.ndarray]]:
    archive = _Archive(path)
    fn, file = archive.method(archive.root.qualname, "forward")
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]][1:]
    examples = archive.example_inputs()
    if len(examples) != len(params):
        raise EmberError(f"forward takes {len(params)} inputs but the archive records {len(examples)} traced "
                         "inputs", path)
    lowering = AtenLowering(Block())
    args: list[Any] = []
    names: list[str] = []

    def tensor_input(name: str, meta: TensorMeta) -> Any:
        elem = ELEM.get(meta.dtype or "")
        if elem is None:
            raise EmberError(f"input '{name}' has element type {meta.dtype}, which Ember does not support", path)
        names.append(name)
        return lowering.input(name, tensor(tuple(meta.shape), elem))

    for name, meta in zip(params, examples):  # a list of tensors gives one input per entry: name_0, name_1, ...
        args.append([tensor_input(f"{name}_{i}", m) for i, m in enumerate(meta)] if isinstance(meta, list)
                    else tensor_input(name, meta))
    traced = {name: (tuple(meta.shape), str(meta.dtype)) for name, meta in zip(params, examples)
              if isinstance(meta, TensorMeta)}
    try:
        result = _Interpreter(archive, lowering, traced).call_method(archive.root, "forward", args, {}, 0)
    except RecursionError:
        raise EmberError(f"{file}: expressions nest too deeply", path) from None
    values = list(result) if isinstance(result, tuple | list) else [result]
    try:
        outs = [lowering.value(v, f"output {i}") for i, v in enumerate(values)]
    except Unsupported as e:
        raise EmberError(f"{file}: forward returns something Ember cannot represent: {e}", path) from None
    module = build_module(lowering, names, outs, weights_ref, path)
    weights = dict(archive.tensors)
    weights.update(lowering.weights)
    return module, weights


def import_torchscript(path: str, weights_ref: str) -> Op:
    """Import a traced TorchScript archive as a verified `module` whose weights are read back from `weights_ref`."""
    return _translate(path, weights_ref)[0]


def load_weights_torchscript(path: str) -> dict[str, np.ndarray]:
    """Every module tensor by attribute path, plus the constants an import names: what its params refer to."""
    return _translate(path, path)[1]
