"""torch.export frontend: import a `.pt2` archive (torch.export.save) with `json` and numpy only.

The archive is a zip holding the exported graph as JSON (`models/model.json`): a flat list of nodes
whose `target` names an aten operator overload (`torch.ops.aten.embedding_bag.padding_idx`) and
whose arguments are named and typed (`as_tensor`, `as_int`, ...).  Weights are raw little-endian
bytes under `data/weights/` and `data/constants/`, described by a JSON table (dtype enum, sizes,
strides, storage offset; the enum is torch/_export/serde/schema.py's).  No pickle is ever read.

Each node goes through the same `AtenLowering` as the TorchScript frontend, so both archives of a
model import to the same IR.  An export with dynamic shapes names its symbolic sizes (`as_sym_int`
arguments and results, from `sym_size` / `sym_numel` nodes, or from `item` when a size is read from
data); they are bound like tensors, to the run-time sizes the lowering computes, and so are the
conditions (`as_sym_bool`) torch.export compares them in.  Parameters and buffers become `param`s
named by their `state_dict` name, and `load_weights_pt2` reads them (plus the translation's constants)
back.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..ir.core import Block, Op, Value
from ..ir.diagnostics import EmberError
from ..ir.types import tensor
from .aten import (
    ELEM,
    AtenLowering,
    TorchDType,
    Unsupported,
    Weight,
    build_module,
    has_member,
    open_zip,
    read_member,
    strided_tensor,
)
from .aten.archive import read_json

__all__ = ["import_pt2", "load_weights_pt2"]

# torch/_export/serde/schema.py ScalarType; the names are numpy's.
_DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16", 7: "float32", 8: "float64",
           12: "bool", 13: "bfloat16"}
_STRIDED = 7  # Layout.Strided
_HINT = "export the model with torch.onnx.export (.onnx) instead"


def _dtype(code: Any, what: str, path: str, ir: bool = True) -> np.dtype:
    """The little-endian numpy dtype of a dtype code; with `ir`, only types the IR can hold."""
    name = _DTYPES.get(code) if isinstance(code, int) else None
    if name is None or name == "bfloat16" or (ir and name not in ELEM):
        raise EmberError(f"{what} has element type {name or code}, which Ember does not support", path)
    return np.dtype(name).newbyteorder("<")


def _static(dims: Any, what: str, path: str, dynamic_ok: bool = False) -> list[int | None]:
    """Sizes or strides from the JSON: `as_int` entries; symbolic ones (`as_expr`) are None where allowed."""
    if not isinstance(dims, list):
        raise EmberError(f"{what}: malformed sizes", path)
    out: list[int | None] = []
    for d in dims:
        if isinstance(d, dict) and isinstance(d.get("as_int"), int):
            out.append(d["as_int"])
        elif dynamic_ok and isinstance(d, dict):
            out.append(None)
        else:
            raise EmberError(f"{what} has a symbolic size; Ember needs static weight shapes", path)
    return out


def _float(v: Any, where: str, path: str) -> float:
    """A float argument; the JSON writes the ones it has no number for as "Infinity", "-Infinity", "NaN"."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if v in ("Infinity", "-Infinity", "NaN"):
        return float(v.replace("Infinity", "inf"))
    raise EmberError(f"{where}: malformed float {str(v)[:40]}", path)


class _Archive:
    """The parts of a `.pt2` zip the importer uses: the model JSON and the stored tensors."""

    def __init__(self, path: str):
        self.path = path
        self.zf = open_zip(path)
        models = [n for n in self.zf.namelist() if n.endswith("models/model.json")
                  and (n == "models/model.json" or n.endswith("/models/model.json"))]
        if not models:
            old = any(n.endswith("serialized_exported_program.json") for n in self.zf.namelist())
            why = " (written by torch < 2.6; re-save it with a newer torch)" if old else ""
            raise EmberError(f"not a torch.export archive: no models/model.json{why}", path)
        self.prefix = min(models, key=lambda n: n.count("/"))[: -len("models/model.json")]
        self.model = self.json("models/model.json")
        self.configs: dict[str, dict[str, Any]] = {}
        for kind in ("weights", "constants"):
            name = f"data/{kind}/model_{kind}_config.json"
            if self.has(name):
                cfg = self.json(name).get("config", {})
                self.configs[kind] = cfg if isinstance(cfg, dict) else {}
        self.raw: dict[str, np.ndarray] = {}

    def has(self, name: str) -> bool:
        return has_member(self.zf, self.prefix + name)

    def json(self, name: str) -> dict[str, Any]:
        got = read_json(self.zf, self.prefix + name, self.path)
        if not isinstance(got, dict):
            raise EmberError(f"{name} does not hold a JSON object", self.path)
        return got

    def tensor(self, fqn: str) -> np.ndarray:
        """A stored parameter, buffer or constant by its `state_dict` name."""
        for kind, cfg in self.configs.items():
            entry = cfg.get(fqn)
            if isinstance(entry, dict):
                return self.load(kind, fqn, entry)
        raise EmberError(f"the archive has no data for '{fqn}'", self.path)

    def load(self, kind: str, fqn: str, entry: dict[str, Any]) -> np.ndarray:
        if entry.get("use_pickle"):
            raise EmberError(f"'{fqn}' is stored as a pickle, which Ember refuses to load", self.path)
        meta = entry.get("tensor_meta")
        file = entry.get("path_name")
        if not isinstance(meta, dict) or not isinstance(file, str) or "/" in file or file.startswith("."):
            raise EmberError(f"malformed entry for '{fqn}' in the {kind} table", self.path)
        if meta.get("layout", _STRIDED) != _STRIDED:
            raise EmberError(f"'{fqn}' is a sparse or otherwise non-strided tensor", self.path)
        dt = _dtype(meta.get("dtype"), f"'{fqn}'", self.path, ir=False)  # checked when the tensor is used
        key = f"data/{kind}/{file}"
        if key not in self.raw:
            self.raw[key] = np.frombuffer(read_member(self.zf, self.prefix + key, self.path), dtype=np.uint8)
        raw = self.raw[key]
        n = raw.size // dt.itemsize
        flat = raw[: n * dt.itemsize].view(dt).astype(dt.newbyteorder("="))
        sizes = _static(meta.get("sizes"), f"'{fqn}'", self.path)
        strides = _static(meta.get("strides"), f"'{fqn}'", self.path)
        off = meta.get("storage_offset", {"as_int": 0})
        offset = off.get("as_int") if isinstance(off, dict) else None
        return strided_tensor(flat, offset, sizes, strides, f"'{fqn}'", self.path,  # type: ignore[arg-type]
                              self.zf)


class _Importer:
    def __init__(self, archive: _Archive):
        self.ar = archive
        self.path = archive.path
        try:
            gm = archive.model["graph_module"]
            self.graph: dict[str, Any] = gm["graph"]
            self.signature: dict[str, Any] = gm["signature"]
            self.call_graph: list[Any] = gm.get("module_call_graph") or []
        except (KeyError, TypeError):
            raise EmberError(f"models/model.json has no graph ({self.version()})", self.path) from None
        self.low = AtenLowering(Block())
        self.env: dict[str, Any] = {}
        self.weights: dict[str, np.ndarray] = {}

    def version(self) -> str:
        v = self.ar.model.get("schema_version")
        return f"schema {v.get('major')}.{v.get('minor')}" if isinstance(v, dict) else "unknown schema"

    def bad(self, why: str) -> EmberError:
        return EmberError(f"{why} ({self.version()}; Ember reads schema 8)", self.path)

    # -- arguments ------------------------------------------------------------------------------

    def tensor_name(self, arg: Any) -> str:
        if not isinstance(arg, dict) or not isinstance(arg.get("name"), str):
            raise self.bad(f"malformed tensor reference {str(arg)[:60]}")
        return arg["name"]

    def lookup(self, name: str) -> Any:
        if name not in self.env:
            raise self.bad(f"value '{name}' is used before it is defined")
        return self.env[name]

    def decode(self, arg: Any, where: str) -> Any:
        """One serialized argument as the lowering wants it (tensors looked up, scalars as Python values)."""
        if not isinstance(arg, dict) or len(arg) != 1:
            raise self.bad(f"{where}: malformed argument {str(arg)[:60]}")
        kind, v = next(iter(arg.items()))
        if kind == "as_none":
            return None
        if kind == "as_tensor":
            return self.lookup(self.tensor_name(v))
        if kind == "as_tensors":
            return [self.lookup(self.tensor_name(t)) for t in v]
        if kind == "as_optional_tensors":
            return [None if "as_none" in t else self.lookup(self.tensor_name(t.get("as_tensor"))) for t in v]
        if kind == "as_optional_tensor":
            return None if "as_none" in v else self.lookup(self.tensor_name(v.get("as_tensor")))
        if kind == "as_float":
            return _float(v, where, self.path)
        if kind == "as_floats" and isinstance(v, list):
            return [_float(x, where, self.path) for x in v]
        if kind in ("as_int", "as_bool", "as_string", "as_ints", "as_bools", "as_strings"):
            return v
        if kind == "as_sym_int":
            return self.sym_int(v, where)
        if kind == "as_sym_bool" and isinstance(v, dict):
            if isinstance(v.get("as_bool"), bool):
                return v["as_bool"]
            if isinstance(v.get("as_name"), str):
                return self.lookup(v["as_name"])
            raise self.bad(f"{where}: malformed condition {str(v)[:60]}")
        if kind == "as_sym_ints" and isinstance(v, list):
            return [self.sym_int(x, where) for x in v]
        if kind == "as_scalar_type":
            return TorchDType(_DTYPES.get(v, f"number {v}") if isinstance(v, int) else str(v))
        if kind in ("as_memory_format", "as_layout", "as_device"):
            return (kind, v)  # only ever checked for presence by the lowering
        raise EmberError(f"{where}: arguments of kind '{kind}' (graphs, custom objects, symbolic floats) "
                         f"are not supported; {_HINT}", self.path)

    def sym_int(self, v: Any, where: str) -> Any:
        """A size: a number, or the name of a symbolic size an earlier node computed (sym_size)."""
        if isinstance(v, dict) and isinstance(v.get("as_int"), int):
            return v["as_int"]
        if isinstance(v, dict) and isinstance(v.get("as_name"), str):
            return self.lookup(v["as_name"])
        raise self.bad(f"{where}: malformed size {str(v)[:60]}")

    # -- signature ------------------------------------------------------------------------------

    def inputs(self) -> list[str]:
        """Bind parameters, buffers and constants to `Weight`s and user inputs to block arguments."""
        users: list[tuple[str, dict[str, Any]]] = []
        for spec in self.signature.get("input_specs", []):
            if not isinstance(spec, dict) or len(spec) != 1:
                raise self.bad("malformed input spec")
            kind, body = next(iter(spec.items()))
            if kind in ("parameter", "buffer", "tensor_constant"):
                fqn = body.get({"parameter": "parameter_name", "buffer": "buffer_name",
                                "tensor_constant": "tensor_constant_name"}[kind])
                arr = self.ar.tensor(fqn)
                self.weights[fqn] = arr
                self.env[self.tensor_name(body.get("arg"))] = Weight(fqn, arr)
            elif kind == "user_input":
                arg = body.get("arg", {})
                if "as_tensor" not in arg:
                    raise EmberError(f"a non-tensor model input ({next(iter(arg), '?')}) is not supported", self.path)
                users.append((self.tensor_name(arg["as_tensor"]), arg))
            elif kind == "constant_input":
                self.env[str(body.get("name"))] = self.decode(body.get("value"), "a constant input")
            else:
                raise EmberError(f"model inputs of kind '{kind}' are not supported; {_HINT}", self.path)
        names = [n for n, _ in users]
        public = self.public_names(len(names)) or names
        values = self.graph.get("tensor_values", {})
        for graph_name, name in zip(names, public):
            meta = values.get(graph_name)
            if not isinstance(meta, dict):
                raise self.bad(f"input '{graph_name}' has no tensor metadata")
            dt = _dtype(meta.get("dtype"), f"input '{name}'", self.path)
            shape = _static(meta.get("sizes"), f"input '{name}'", self.path, dynamic_ok=True)
            self.env[graph_name] = self.low.input(name, tensor(tuple(shape), ELEM[dt.name]))
        return list(public)

    def public_names(self, count: int) -> list[str] | None:
        """The user inputs named after forward's parameters, a list parameter's entries `<name>_<i>`
        (as the TorchScript frontend names them); None when the signature does not say."""
        first = self.call_graph[0] if self.call_graph and isinstance(self.call_graph[0], dict) else {}
        sig = first.get("signature") or {}
        forward = sig.get("forward_arg_names") if isinstance(sig, dict) else None
        if not isinstance(forward, list) or not all(isinstance(f, str) for f in forward):
            return None
        if len(forward) == count:
            return list(forward)
        try:  # in_spec: "[version, tree]"; the tree is ((positional args...), {keyword args})
            spec = json.loads(sig.get("in_spec"))[1]
            positional = spec["children_spec"][0]["children_spec"]
        except (TypeError, ValueError, KeyError, IndexError, json.JSONDecodeError):
            return None
        out: list[str] = []
        for name, arg in zip(forward, positional):
            kids = arg.get("children_spec") if isinstance(arg, dict) else None
            if not kids:
                out.append(name)
            elif arg.get("type") in ("builtins.list", "builtins.tuple") and all(
                    isinstance(k, dict) and not k.get("children_spec") for k in kids):
                out += [f"{name}_{i}" for i in range(len(kids))]
            else:
                return None  # nested containers, dicts: keep export's own names
        return out if len(out) == count else None

    def outputs(self) -> list[Value]:
        results: list[Value] = []
        for spec in self.signature.get("output_specs", []):
            if not isinstance(spec, dict) or len(spec) != 1:
                raise self.bad("malformed output spec")
            kind, body = next(iter(spec.items()))
            if kind != "user_output":
                raise EmberError(f"the model has a '{kind}' output (it mutates state); {_HINT}", self.path)
            arg = body.get("arg", {})
            if "as_tensor" not in arg:
                raise EmberError("a non-tensor model output is not supported", self.path)
            name = self.tensor_name(arg["as_tensor"])
            try:
                results.append(self.low.value(self.lookup(name), f"output '{name}'"))
            except Unsupported as e:
                raise EmberError(f"{e}; {_HINT}", self.path) from None
        if not results:
            raise EmberError("the model has no outputs", self.path)
        return results

    # -- nodes ----------------------------------------------------------------------------------

    def node(self, node: dict[str, Any]) -> None:
        target = node.get("target")
        outs = node.get("outputs", [])
        if not isinstance(target, str) or not isinstance(outs, list):
            raise self.bad("malformed node")
        first = next((self.out_names(o)[0] for o in outs if self.out_names(o)), "?")
        where = f"node '{first}' ({target})"
        kwargs: dict[str, Any] = {}
        args: list[Any] = []
        for inp in node.get("inputs", []):
            if not isinstance(inp, dict) or "arg" not in inp:
                raise self.bad(f"{where}: malformed input")
            value = self.decode(inp["arg"], where)
            if isinstance(inp.get("name"), str) and inp["name"]:
                kwargs[inp["name"]] = value
            else:
                args.append(value)
        if target in ("_operator.getitem", "operator.getitem"):
            seq, k = (args + list(kwargs.values()))[:2]
            if not isinstance(seq, list | tuple) or not isinstance(k, int) or not -len(seq) <= k < len(seq):
                raise EmberError(f"{where}: cannot index {type(seq).__name__}", self.path)
            result: Any = seq[k]
        elif target.startswith(("torch.ops.", "_operator.", "operator.")):
            # aten operators by name, other namespaces (fbgemm) as `<namespace>.<name>`, and Python's
            # arithmetic on sizes as `_operator.<name>`: the keys of the operator table.
            parts = target.split(".")
            if parts[0] != "torch":
                op = f"_operator.{parts[-1]}"
            elif len(parts) == 5:
                op = parts[3] if parts[2] == "aten" else f"{parts[2]}.{parts[3]}"
            else:
                raise self.bad(f"{where}: malformed operator name")
            try:
                result = self.low.lower(op, args, kwargs)
            except Unsupported as e:
                raise EmberError(f"{where}: {e}; {_HINT}", self.path) from None
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:  # arguments of odd types
                raise EmberError(f"{where}: invalid arguments ({type(e).__name__}: {e})", self.path) from None
        else:
            raise EmberError(f"{where}: only operators of torch.ops and arithmetic on sizes are supported; {_HINT}",
                             self.path)
        self.bind(outs, result, where)

    @staticmethod
    def out_names(out: Any) -> list[str]:
        if not isinstance(out, dict):
            return []
        if "as_tensor" in out and isinstance(out["as_tensor"], dict):
            return [str(out["as_tensor"].get("name"))]
        if "as_tensors" in out and isinstance(out["as_tensors"], list):
            return [str(t.get("name")) for t in out["as_tensors"] if isinstance(t, dict)]
        for kind in ("as_sym_int", "as_sym_bool"):
            if kind in out and isinstance(out[kind], dict):
                return [str(out[kind].get("as_name"))]
        return []

    def bind(self, outs: list[Any], result: Any, where: str) -> None:
        if not outs and result is None:  # a check such as _assert_tensor_metadata
            return
        if len(outs) == 1 and not isinstance(result, tuple):
            result = (result,)
        if len(outs) == 1 and isinstance(outs[0], dict) and "as_tensors" in outs[0]:
            result = (list(result[0]) if len(result) == 1 and isinstance(result[0], list | tuple) else list(result),)
        if not isinstance(result, tuple) or len(result) != len(outs):
            raise EmberError(f"{where}: the operator gives {len(result) if isinstance(result, tuple) else 1} "
                             f"results but the node names {len(outs)}", self.path)
        for out, value in zip(outs, result):
            if not isinstance(out, dict) or "as_none" in out:
                continue
            if "as_tensor" in out:
                self.env[self.tensor_name(out["as_tensor"])] = value
            elif (sym := out.get("as_sym_int") or out.get("as_sym_bool")) and isinstance(sym, dict) \
                    and "as_name" in sym:
                self.env[str(sym["as_name"])] = value
            elif "as_tensors" in out and isinstance(value, list):
                for t, v in zip(out["as_tensors"], value):
                    self.env[self.tensor_name(t)] = v

    def run(self, weights_ref: str) -> Op:
        inputs = self.inputs()
        nodes = self.graph.get("nodes", [])
        if not isinstance(nodes, list):
            raise self.bad("malformed node list")
        for node in nodes:
            if not isinstance(node, dict):
                raise self.bad("malformed node")
            self.node(node)
        return build_module(self.low, inputs, self.outputs(), weights_ref, self.path)


def _translate(path: str, weights_ref: str) -> tuple[Op, dict[str, np.ndarray]]:
    try:
        imp = _Importer(_Archive(path))
        module = imp.run(weights_ref)
    except (KeyError, TypeError, AttributeError, IndexError, ValueError) as e:  # JSON of an unexpected shape
        raise EmberError(f"malformed torch.export archive ({type(e).__name__}: {e})", path) from None
    weights = dict(imp.weights)
    weights.update(imp.low.weights)
    return module, weights


def import_pt2(path: str, weights_ref: str) -> Op:
    """Import a torch.export archive as a verified `module` whose weights are read back from `weights_ref`."""
    return _translate(path, weights_ref)[0]


def load_weights_pt2(path: str) -> dict[str, np.ndarray]:
    """Every parameter, buffer and constant by `state_dict` name, plus the constants an import names."""
    return _translate(path, path)[1]
