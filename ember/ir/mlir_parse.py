"""Read MLIR's generic operation syntax (grammars/mlir.lark, Lark LALR) back into an Ember module.

What `ember-opt --emit=mlir` writes reads back exactly (mlir_print has the mapping); the same module re-printed by
MLIR's own tools (`mlir-opt --allow-unregistered-dialect --mlir-print-op-generic`: values renumbered, attributes
sorted, large dense values as hexadecimal) reads back as the same module up to those names and that order.  What
Ember cannot hold (a second block in a region, successors, a unit or dictionary attribute, a type-valued attribute
other than a func's results, a type Ember lacks) is refused in one line at its position.  Custom (pretty) syntax
is not read here: its first word is named as such.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any

import numpy as np
from lark import Token, Tree
from lark.exceptions import UnexpectedInput, UnexpectedToken

from .core import Block, Op, Value
from .diagnostics import EmberError, Loc
from .mlir_print import mlir_type
from .mlir_syntax import DIALECT, MODULE, SCALAR_FROM_MLIR, SCALAR_TO_MLIR, ember_op_name, ember_value_name
from .parser import SourceReader, check_text, grammar, syntax_error
from .printer import DenseAttr
from .types import SCALARS, ScalarType, ShapedType, StreamType, Type

_FLOAT_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}
_INT_TYPE = re.compile(r"[su]?i[0-9]+|index")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # an attribute name .eir can write (grammars/eir.lark)


def _hex_float(bits: int, elem: str) -> float:
    """A float written as its bit pattern, MLIR's form for non-finite values."""
    if elem == "f64":
        return struct.unpack("<d", bits.to_bytes(8, "little"))[0]
    if elem == "f32":
        return struct.unpack("<f", bits.to_bytes(4, "little"))[0]
    if elem == "f16":
        return float(np.frombuffer(bits.to_bytes(2, "little"), np.float16)[0])
    return struct.unpack("<f", (bits << 16).to_bytes(4, "little"))[0]  # bf16: the top half of an f32


def unescape(tok: Token) -> str:
    """MLIR's string literal: \\\\, \\", \\n, \\t, and \\XX for any byte of the UTF-8 (ValueError else)."""
    body, out, i = str(tok)[1:-1], bytearray(), 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("utf-8", "surrogatepass")
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in '"\\':
            out.append(ord(nxt))
            i += 2
        elif nxt in "nt":
            out.append(10 if nxt == "n" else 9)
            i += 2
        elif re.fullmatch(r"[0-9A-Fa-f]{2}", body[i + 1:i + 3]):
            out.append(int(body[i + 1:i + 3], 16))
            i += 3
        else:
            raise ValueError(f"bad escape '\\{nxt}' in a string literal")
    try:
        return out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise ValueError("a string literal whose bytes are not UTF-8") from None


class _Reader(SourceReader):
    def string(self, tok: Token) -> str:
        try:
            return unescape(tok)
        except ValueError as e:
            raise self.err(str(e), tok) from None

    # ---- values

    def define(self, tok: Token, name: str | None, type: Type) -> Value:
        for scope in self.scopes:
            if name is not None and name in scope:
                raise self.err(f"value %{name} is defined twice", tok)
        v = Value(type, name)
        self.scopes[-1][str(tok)[1:] if name is None else name] = v
        return v

    def lookup(self, tok: Token) -> Value:
        key = str(tok)[1:]
        key = key if "#" in key else ember_value_name(key)
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        raise self.err(f"use of undefined value {tok}", tok)

    # ---- types

    def type(self, t: Tree) -> Type:
        kind, ch = t.data, t.children
        if kind == "scalar_type":
            return self.scalar(ch[0])
        if kind == "stream_type":
            return StreamType(self.type(ch[0]))
        shaped = "vector" if kind.startswith("ember_") else str(ch[0])
        if kind in ("unranked_type", "ember_unranked_vector_type"):
            return ShapedType(shaped, None, self.scalar(ch[-1]))
        dims_tok = ch[-2]
        dims = () if dims_tok is None else tuple(None if d == "?" else int(d) for d in str(dims_tok).split("x")[:-1])
        return ShapedType(shaped, dims, self.scalar(ch[-1]))

    def scalar(self, tok: Token) -> ScalarType:
        name = SCALAR_FROM_MLIR.get(str(tok), str(tok))
        if name not in SCALARS:
            raise self.err(f"type '{tok}' has no Ember equivalent (Ember's scalars are "
                           f"{', '.join(SCALAR_TO_MLIR.get(s, s) for s in SCALARS)})", tok)
        return ScalarType(name)

    # ---- attributes

    def attr(self, t: Tree | Token) -> Any:
        if isinstance(t, Token):
            raise AssertionError(t)
        k, ch = t.data, t.children
        if k in ("true", "false"):
            return k == "true"
        if k == "string_attr":
            return self.string(ch[0])
        if k == "array_attr":
            return [self.attr(c) for c in ch if c is not None]
        if k == "dict_attr":
            return self.attrs(ch[0])
        if k == "type_attr":
            return self.type(ch[0])
        if k == "eir_float":
            return float(str(ch[0]))
        if k == "dense_attr":
            return self.dense(ch[0], ch[1])
        if k == "ember_dense_attr":
            ty = self.type(ch[1])
            if not isinstance(ty, ShapedType):
                raise self.err("#ember.dense needs a shaped type", _first_token(ch[1]))
            values = self.attr(ch[0])
            return DenseAttr(values if isinstance(values, list) else [values], ty)
        tok: Token = ch[0]
        elem = _type_name(ch[1]) if len(ch) > 1 and ch[1] is not None else None
        if k == "int_attr":
            if elem is not None and not _INT_TYPE.fullmatch(elem):
                raise self.err(f"integer literal {tok} given type {elem}: write a float as one (1.0), or its bits "
                               "in hexadecimal", tok)
            return bool(int(tok)) if elem == "i1" else int(tok)
        if k == "float_attr":
            if elem is not None and elem not in _FLOAT_BITS:
                raise self.err(f"float literal {tok} given type {elem}, which Ember's floats are not", tok)
            return float(str(tok))
        assert k == "hex_attr", k
        if elem is not None and elem in _FLOAT_BITS:
            return self.hex_float(tok, elem)
        return int(str(tok), 16)

    def hex_float(self, tok: Token, elem: str) -> float:
        bits = int(str(tok), 16)
        if bits >> _FLOAT_BITS[elem]:
            raise self.err(f"{tok} has more bits than {elem}", tok)
        return _hex_float(bits, elem)

    def dense(self, value: Tree | None, type_tree: Tree) -> DenseAttr:
        ty = self.type(type_tree)
        where = _first_token(type_tree)
        if not isinstance(ty, ShapedType) or ty.kind not in ("tensor", "vector") or ty.shape is None \
                or None in ty.shape:
            raise self.err(f"dense<...> needs a static tensor or vector type, got {mlir_type(ty)}", where)
        count = math.prod(ty.shape)  # type: ignore[arg-type]
        if value is not None and value.data == "string_attr":  # MLIR's hexadecimal form of a large value
            return DenseAttr(self.dense_hex(value.children[0], ty, count), ty)
        flat: list[Any] = []

        def gather(t: Tree) -> None:
            if t.data != "array_attr":
                flat.append(self.dense_element(t, ty.elem, where))
                return
            for c in t.children:
                if c is not None:
                    gather(c)

        if value is not None:
            gather(value)
        if (value is None or value.data == "array_attr") and len(flat) != count:  # else a splat of one value
            raise self.err(f"dense<...> has {len(flat)} values for {mlir_type(ty)} ({count} elements)", where)
        return DenseAttr(flat, ty)

    def dense_element(self, t: Tree, elem: ScalarType, where: Token) -> Any:
        tok: Token = t.children[0] if t.children else where
        if t.data in ("true", "false"):
            if elem.name != "i1":
                raise self.err(f"{t.data} in a dense value of {mlir_type(elem)}", tok)
            return t.data == "true"
        if t.data == "hex_attr":
            return self.hex_float(tok, elem.name) if elem.is_float else int(str(tok), 16)
        if t.data == "int_attr" and not elem.is_float:
            return bool(int(tok)) if elem.name == "i1" else int(tok)
        if t.data == "float_attr" and elem.is_float:
            return float(str(tok))
        raise self.err(f"{tok} is not a literal of {mlir_type(elem)}", tok)

    def dense_hex(self, tok: Token, ty: ShapedType, count: int) -> list[Any]:
        """`dense<"0x...">`: the elements' little-endian bytes, one element if it is a splat."""
        text = self.string(tok)
        dtype = np.dtype(np.bool_) if ty.elem.name == "i1" else ty.elem.numpy()
        if not re.fullmatch(r"0x([0-9A-Fa-f]{2})*", text):
            raise self.err("dense<\"...\"> needs hexadecimal bytes, 0x...", tok)
        raw = bytes.fromhex(text[2:])
        if len(raw) not in (count * dtype.itemsize, dtype.itemsize):
            raise self.err(f"dense<\"0x...\"> has {len(raw)} bytes for {count} elements of {ty.elem}", tok)
        values = np.frombuffer(raw, dtype.newbyteorder("<")).tolist()
        return [float(x) for x in values] if ty.elem.is_float else values

    def attrs(self, t: Tree | None, owner: str | None = None, out: dict[str, Any] | None = None) -> dict[str, Any]:
        """An attribute dictionary; of an op named `owner`, checked to be one .eir can write (None: a value)."""
        out = {} if out is None else out
        if t is None:
            return out
        for entry in t.children:
            if entry is None:
                continue
            key_tok, value = entry.children
            key = self.string(key_tok) if key_tok.type == "STRING" else str(key_tok)
            if key in out:
                raise self.err(f"attribute '{key}' given twice", key_tok)
            if value is None:
                raise self.err(f"attribute '{key}' has no value (a unit attribute); Ember's attributes all have one",
                               key_tok)
            out[key] = self.attr(value)
            if owner is not None:
                self.check_attr(owner, key, out[key], key_tok)
        return out

    def check_attr(self, owner: str, key: str, value: Any, tok: Token) -> None:
        """Ember's attribute names are identifiers (`ember.` ones on the module), and its values hold no dictionary
        and no type but a func's result types."""
        name = key.removeprefix(DIALECT + ".") if owner == MODULE else key
        if not _NAME.fullmatch(name) or (owner == MODULE and name == key):
            want = f"{DIALECT}.NAME" if owner == MODULE else "NAME"
            raise self.err(f"'{owner}' has attribute '{key}': Ember's{' module' if owner == MODULE else ''} "
                           f"attributes are named {want}, NAME a letter or _ then letters, digits or _", tok)
        types_ok = owner == f"{DIALECT}.func" and key == "results"
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, list):
                stack.extend(v)
            elif isinstance(v, dict):
                raise self.err(f"attribute '{key}' holds a dictionary, which no Ember attribute does", tok)
            elif isinstance(v, Type) and not types_ok:
                raise self.err(f"attribute '{key}' holds a type ({mlir_type(v)}), which of Ember's attributes only "
                               "a func's results do", tok)

    # ---- operations

    def op(self, t: Tree) -> Op:
        results_t, name_tok, uses_t, succ_t, props_t, regions_t, attrs_t, ftype, _loc = t.children
        name = self.string(name_tok)
        if succ_t is not None:
            raise self.err(f"'{name}' has successors; Ember's regions are single blocks", name_tok)
        operands = [self.lookup(v) for v in uses_t.children] if uses_t is not None else []
        in_types, out_types = self.function_type(ftype)
        if len(in_types) != len(operands):
            raise self.err(f"'{name}' has {len(operands)} operands but its type lists {len(in_types)}", name_tok)
        for v, ty, tok in zip(operands, in_types, uses_t.children if uses_t is not None else []):
            if v.type != ty:
                raise self.err(f"{tok} is {mlir_type(v.type)}, but '{name}' takes it as {mlir_type(ty)}", tok)
        attrs = self.attrs(props_t.children[0] if props_t is not None else None, name)
        self.attrs(attrs_t, name, attrs)
        regions = [self.region(r, name) for r in regions_t.children] if regions_t is not None else []
        op = Op(ember_op_name(name), operands, [], attrs, regions, self.loc(name_tok))
        op.results = self.results(results_t, out_types, name, name_tok)
        for r in op.results:
            r.owner = op
        return op

    def results(self, t: Tree | None, types: list[Type], name: str, name_tok: Token) -> list[Value]:
        names: list[tuple[Token, str | None]] = []  # (token, Ember name or None for a packed `%x:N` result)
        for r in t.children if t is not None else []:
            tok, count = r.children
            if count is None:
                names.append((tok, ember_value_name(str(tok)[1:])))
            elif "#" in str(tok):
                raise self.err(f"{tok} cannot name results", tok)
            else:
                names.extend((Token("VALUE", f"{tok}#{k}", line=tok.line, column=tok.column), None)
                             for k in range(int(count)))
        if len(names) != len(types):
            raise self.err(f"'{name}' names {len(names)} results but its type lists {len(types)}", name_tok)
        return [self.define(tok, n, ty) for (tok, n), ty in zip(names, types)]

    def function_type(self, t: Tree) -> tuple[list[Type], list[Type]]:
        ins, outs = t.children
        outs_list = outs.children if outs.data == "type_list" else [outs]
        return [self.type(c) for c in ins.children if c is not None], [self.type(c) for c in outs_list if c is not None]

    def region(self, t: Tree, owner: str) -> Block:
        entry_ops = [c for c in t.children if isinstance(c, Tree) and c.data == "op"]
        blocks = [c for c in t.children if isinstance(c, Tree) and c.data == "block"]
        if len(blocks) + (1 if entry_ops else 0) > 1:
            label = blocks[1 if not entry_ops else 0].children[0]
            raise self.err(f"'{owner}' has a region of more than one block; Ember's regions have one", label)
        self.scopes.append({})
        if blocks:
            label, *rest = blocks[0].children
            arg_trees = [c for c in rest if isinstance(c, Tree) and c.data == "block_arg"]
            args = [self.define(a.children[0], ember_value_name(str(a.children[0])[1:]), self.type(a.children[1]))
                    for a in arg_trees]
            entry_ops = [c for c in rest if isinstance(c, Tree) and c.data == "op"]
        else:
            args = []
        block = Block(args)
        for o in entry_ops:
            block.add(self.op(o))
        self.scopes.pop()
        return block

    def module(self, ops: list[Tree]) -> Op:
        self.scopes.append({})
        top = [self.op(o) for o in ops]
        if len(top) == 1 and top[0].name == MODULE:
            m = top[0]
            if m.operands or m.results or len(m.regions) != 1:
                raise m.error("must have one region, and no operands or results")
            attrs = {key.removeprefix(DIALECT + "."): value for key, value in m.attrs.items()}  # checked: ember.*
            return Op("module", attrs=attrs, regions=m.regions, loc=m.loc)
        block = Block()
        for op in top:  # MLIR's implicit module around top-level ops
            block.add(op)
        return Op("module", regions=[block], loc=Loc(self.filename, 1, 1))


def _type_name(t: Tree) -> str:
    return str(_first_token(t))


def _first_token(t: Tree) -> Token:
    return next(t.scan_values(lambda x: isinstance(x, Token)))




_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


def _custom_syntax(e: UnexpectedInput, text: str, filename: str) -> EmberError | None:
    """The error for a word where an op begins (`module {`, `%0 = arith.constant 0`): MLIR's custom syntax."""
    expected = e.expected if isinstance(e, UnexpectedToken) else getattr(e, "allowed", set())
    pos = e.token.start_pos if isinstance(e, UnexpectedToken) else getattr(e, "pos_in_stream", None)
    word = _WORD.match(text, pos) if isinstance(pos, int) else None
    if word is None or "STRING" not in expected or "INT" in expected:  # a string may start an attribute value too
        return None
    err = syntax_error(e, text, filename)
    err.message = (f"'{word.group()}' is MLIR's custom syntax: Ember reads MLIR's generic operation syntax "
                   '("dialect.op"(%a) {k = v} : (T) -> T), as ember-opt --emit=mlir and mlir-opt '
                   "--mlir-print-op-generic write it")
    return err


def parse_mlir(text: str, filename: str = "<input>") -> Op:
    """Parse MLIR generic syntax into an Ember module; errors raise EmberError with the position."""
    check_text(text, filename)
    try:
        tree = grammar("mlir.lark").parse(text)
    except UnexpectedInput as e:
        raise _custom_syntax(e, text, filename) or syntax_error(e, text, filename) from None
    return _Reader(text, filename).module([c for c in tree.children if isinstance(c, Tree) and c.data == "op"])
