"""The restricted, bounded unpickler of TorchScript archives (`data.pkl`, `constants.pkl`,
`traced_inputs.pkl`).

Two things make a pickle dangerous.  It calls whatever callables it names, so only the handful of
globals a TorchScript archive uses resolve, and every other one is refused by name before anything is
called.  And a few bytes of it can stand for a huge structure: a "billion laughs" pickle builds a list
holding ten references to the previous list, thirty times over.  Unpickling that is cheap (the memo
only hands out references), but a reader that walks or copies the result, hashes it as a dict key or
prints it in an error message does work proportional to its expansion.  So:

- the pure-Python unpickler runs with a count on every instruction, and every copy its callables make
  (arguments unpacked, lists and dicts rebuilt) is charged to the same count (ARCHIVE_OBJECTS);
- only strings, bytes and numbers may be dict keys or set members, so no hash walks a structure;
- a tensor copied out of its storage is charged to its archive's budget (`Archive`);
- once loaded, the result's expanded size and nesting depth are measured over the shared graph, in
  time linear in what was built, and refused past ARCHIVE_OBJECTS and ARCHIVE_DEPTH before any reader
  walks it.  A structure that contains itself is refused too.

Every refusal names the archive member.
"""

from __future__ import annotations

import collections
import io
import pickle
import reprlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.diagnostics import EmberError
from ..limits import ARCHIVE_OBJECTS
from .aten.archive import Archive, check_structure, plain_children, strided_tensor

__all__ = ["StorageType", "TensorMeta", "TorchObject", "unpickle"]


class TorchObject:
    """Stand-in for any `__torch__.*` class: records the class name and the pickled attribute state."""

    qualname = "?"
    attrs: dict[str, Any]

    def __new__(cls, *args: Any) -> TorchObject:  # pickle's NEWOBJ passes the pickled arguments here
        self = object.__new__(cls)
        self.attrs = {}
        return self

    def __init__(self, *args: Any) -> None:  # REDUCE on the class calls it like a constructor
        pass

    def __setstate__(self, state: Any) -> None:  # not copied: a copy per BUILD would be work to charge
        self.attrs = state if isinstance(state, dict) else {"__state__": state}


@dataclass(frozen=True)
class StorageType:
    """What `torch.FloatStorage` and friends mean in a pickle: the element type of a storage."""

    name: str
    dtype: str | None  # None: a type Ember cannot hold (the error names it when a storage uses it)


_STORAGES = {
    "FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16", "LongStorage": "int64",
    "IntStorage": "int32", "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8",
    "BoolStorage": "bool", "BFloat16Storage": None, "ComplexFloatStorage": None, "ComplexDoubleStorage": None,
}


@dataclass(frozen=True)
class TensorMeta:
    """A tensor whose data is not needed (the example inputs): only its shape and type."""

    shape: tuple[int, ...]
    dtype: str | None


def _restore_type_tag(value: Any, type_str: Any = None) -> Any:
    """TorchScript tags containers with their static type; the value is all Ember needs."""
    return value


_KEYS = (str, bytes, int, float, type(None))
"""What may be hashed: hashing a tuple walks all of it, shared references included."""
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxstring, _SHOWN.maxother = 3, 60, 60


def _shown(x: Any) -> str:
    """A bounded, one-line rendering of something from the file, for an error message."""
    return _SHOWN.repr(x) if not isinstance(x, str) else x[:100].encode("unicode_escape").decode("ascii")


Load = Callable[["_Unpickler"], None]


def _counted(load: Load) -> Load:
    def step(u: _Unpickler) -> None:
        u.charge(1)
        load(u)
    return step


def _keys_checked(load: Load, keys: Callable[[list[Any]], Iterable[Any]]) -> Load:
    """`load` (an instruction that hashes stack items), after checking the items it hashes are plain."""
    def step(u: _Unpickler) -> None:
        u.charge(1)
        u.plain_keys(keys(u.stack))
        load(u)
    return step


def _args_charged(load: Load, at: int) -> Load:
    """`load` (an instruction that unpacks the arguments at stack[at] into a call), charging their number."""
    def step(u: _Unpickler) -> None:
        u.charge(1 + u.size_of(u.stack[at] if len(u.stack) >= -at else ()))
        load(u)
    return step


def _build_checked(load: Load) -> Load:
    """BUILD sets attributes; only the module objects TorchObject stands for may get them."""
    def step(u: _Unpickler) -> None:
        u.charge(1)
        target = u.stack[-2] if len(u.stack) >= 2 else None
        if not isinstance(target, TorchObject):
            raise u.refuse(f"sets the state of a {type(target).__name__}, which only module objects have")
        load(u)
    return step


_BASE: dict[int, Load] = pickle._Unpickler.dispatch  # type: ignore[attr-defined]
_DISPATCH = {code: _counted(load) for code, load in _BASE.items()}
for _op, _keys in ((pickle.SETITEM, lambda s: s[-2:-1]), (pickle.SETITEMS, lambda s: s[::2]),
                   (pickle.DICT, lambda s: s[::2]), (pickle.ADDITEMS, lambda s: s), (pickle.FROZENSET, lambda s: s)):
    _DISPATCH[_op[0]] = _keys_checked(_BASE[_op[0]], _keys)
for _op, _at in ((pickle.REDUCE, -1), (pickle.NEWOBJ, -1), (pickle.NEWOBJ_EX, -2)):
    _DISPATCH[_op[0]] = _args_charged(_BASE[_op[0]], _at)
_DISPATCH[pickle.BUILD[0]] = _build_checked(_BASE[pickle.BUILD[0]])


class _Unpickler(pickle._Unpickler):  # type: ignore[name-defined,misc]
    """Unpickles a TorchScript pickle, resolving only the globals such an archive needs, within the caps.

    With `load_storage` None, storages are not read (the example-input storages of traced archives are
    saved empty) and tensors come back as `TensorMeta`.
    """

    dispatch = _DISPATCH

    def __init__(self, data: bytes, load_storage: Callable[[str, StorageType, int], np.ndarray] | None,
                 archive: Archive, member: str):
        super().__init__(io.BytesIO(data))
        self.load_storage = load_storage
        self.archive = archive
        self.member = member
        self.classes: dict[str, type] = {}
        self.objects = 0
        self.max_objects = ARCHIVE_OBJECTS.get()

    def refuse(self, why: str) -> EmberError:
        return EmberError(f"{self.member} {why}", self.archive.path)

    def charge(self, n: int) -> None:
        self.objects += n
        if self.objects > self.max_objects:
            raise self.refuse(f"builds more than {self.max_objects:,} objects ({ARCHIVE_OBJECTS.env})")

    def size_of(self, x: Any) -> int:
        try:
            return len(x)
        except TypeError:
            raise self.refuse(f"passes a {type(x).__name__} as a call's arguments") from None

    def plain_keys(self, keys: Iterable[Any]) -> None:
        for k in keys:
            if not isinstance(k, _KEYS):
                raise self.refuse(f"uses a {type(k).__name__} as a dictionary key or set member (only strings "
                                  "and numbers may be)")

    def copied(self, make: Callable[[Any], Any], what: str) -> Callable[..., Any]:
        """`make` (list, OrderedDict) called with at most one pickled argument, its copy charged."""
        def call(*args: Any) -> Any:
            if len(args) > 1:
                raise self.refuse(f"calls {what} with {len(args)} arguments")
            if not args:
                return make(())
            items = args[0]
            if not isinstance(items, list | tuple | dict):
                raise self.refuse(f"calls {what} on a {type(items).__name__}")
            self.charge(len(items))
            if not isinstance(items, dict) and make is collections.OrderedDict:
                if not all(isinstance(p, list | tuple) and len(p) == 2 for p in items):
                    raise self.refuse(f"calls {what} on something other than key-value pairs")
                self.plain_keys(p[0] for p in items)
            return make(items)
        return call

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name == "_rebuild_tensor_v2":
            return self._rebuild_tensor
        if module == "collections" and name == "OrderedDict":
            return self.copied(collections.OrderedDict, "OrderedDict")
        if module == "torch.jit._pickle" and name == "restore_type_tag":
            return _restore_type_tag
        if module == "torch.jit._pickle" and name == "build_tensorlist":  # a List[Tensor] input or attribute
            return self.copied(list, "build_tensorlist")
        if module == "torch" and name in _STORAGES:
            return StorageType(name, _STORAGES[name])
        if (module == "__torch__" or module.startswith("__torch__.")) and name.isidentifier():
            qual = f"{module}.{name}"
            if qual not in self.classes:
                self.classes[qual] = type(name, (TorchObject,), {"qualname": qual})
            return self.classes[qual]
        raise self.refuse(f"refers to the global '{_shown(module)}.{_shown(name)}', which Ember refuses to load "
                          "(only TorchScript module state is allowed)")

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], StorageType) and isinstance(pid[2], str) and isinstance(pid[4], int)):
            raise self.refuse(f"has an unknown persistent reference {_shown(pid)}")
        _, kind, key, _, numel = pid
        if self.load_storage is None:
            return TensorMeta((numel,), kind.dtype)
        if kind.dtype is None:
            raise EmberError(f"storage '{_shown(key)}' is a {kind.name}, which Ember does not support",
                             self.archive.path)
        return self.load_storage(key, kind, numel)

    def _rebuild_tensor(self, storage: Any, offset: Any, size: Any, stride: Any, *rest: Any) -> Any:
        if not isinstance(size, list | tuple) or not isinstance(stride, list | tuple):
            raise self.refuse("rebuilds a tensor whose size or stride is not a list")
        self.charge(len(size) + len(stride))
        if isinstance(storage, TensorMeta):
            return TensorMeta(tuple(size), storage.dtype)
        if not isinstance(storage, np.ndarray):
            raise self.refuse("rebuilds a tensor without a storage")
        return strided_tensor(storage, offset, list(size), list(stride), self.member, self.archive.path,
                              self.archive)


def _children(x: Any) -> Iterable[Any] | None:
    """What a reader walking `x` visits next; None for a leaf."""
    if isinstance(x, TorchObject):
        return x.attrs.values()
    return plain_children(x)


def unpickle(data: bytes, load_storage: Callable[[str, StorageType, int], np.ndarray] | None, archive: Archive,
             member: str) -> Any:
    """The object `member` (a pickle read from `archive`) holds, within the caps, or a one-line EmberError."""
    try:
        root = _Unpickler(data, load_storage, archive, member).load()
    except EmberError:
        raise
    except RecursionError:
        raise EmberError(f"{member} is nested too deeply", archive.path) from None
    except Exception as e:  # a damaged pickle fails in many ways; none of them is the user's bug to debug
        why = " ".join(str(e).split())[:200]
        raise EmberError(f"{member} is not a valid TorchScript pickle ({type(e).__name__}: {why})",
                         archive.path) from None
    check_structure(root, member, archive.path, _children)
    return root
