"""Parse `.eir` text (grammars/eir.lark, Lark LALR) into IR, keeping line/column on every op."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..limits import TEXT_ITEMS, TEXT_LINE_CHARS, TEXT_LIST_ITEMS
from .core import Block, Op, Value
from .diagnostics import EmberError, Loc
from .printer import DenseAttr
from .types import ScalarType, ShapedType, StreamType, Type


@cache
def grammar(name: str) -> Lark:
    text = resources.files("ember").joinpath("grammars", name).read_text()
    return Lark(text, parser="lalr", maybe_placeholders=True, propagate_positions=False, cache=True)


END = {"$END", "<END-OF-FILE>"}  # lark's names for the end of the input (the second since lark 1.3)


def syntax_error(e: UnexpectedInput, text: str, filename: str) -> EmberError:
    line, col = max(e.line, 1), max(e.column, 1)
    src = text.splitlines()[line - 1] if 0 < line <= len(text.splitlines()) else None
    if isinstance(e, UnexpectedToken):
        got = "end of input" if e.token.type in END else repr(str(e.token))
        msg = f"unexpected {got}"
        names = sorted("end of input" if x in END else x for x in e.expected if not x.startswith("_"))
        if names and len(names) <= 6:
            msg += f" (expected {', '.join(names)})"
    elif isinstance(e, UnexpectedCharacters) and e.pos_in_stream < len(text):
        msg = f"unexpected character {text[e.pos_in_stream]!r}"
    else:  # not seen: the LALR parser reports the end of the input as an UnexpectedToken
        msg = "syntax error"
    return EmberError(msg, Loc(filename, line, col), src)


def parse_type_tree(t: Tree) -> Type:
    kind = t.data
    ch = t.children
    if kind == "scalar_type":
        return ScalarType(str(ch[0]))
    if kind == "stream_type":
        return StreamType(parse_type_tree(ch[0]))
    if kind == "unranked_type":
        return ShapedType(str(ch[0]), None, ScalarType(str(ch[1])))
    dims: tuple[int | None, ...] = ()
    if ch[1] is not None:
        dims = tuple(None if d == "?" else int(d) for d in str(ch[1]).split("x")[:-1])
    return ShapedType(str(ch[0]), dims, ScalarType(str(ch[2])))


class SourceReader:
    """What a reader of a level's text keeps (the .eir parser's, the MLIR one's): the lines, for an error's source
    line, and the scopes of value names."""

    def __init__(self, text: str, filename: str):
        self.lines = text.splitlines()
        self.filename = filename
        self.scopes: list[dict[str, Value]] = []

    def loc(self, tok: Token) -> Loc:
        return Loc(self.filename, tok.line or 1, tok.column or 1)

    def err(self, msg: str, tok: Token) -> EmberError:
        line = (tok.line or 1) - 1
        return EmberError(msg, self.loc(tok), self.lines[line] if 0 <= line < len(self.lines) else None)


class _Builder(SourceReader):
    def define(self, tok: Token, type: Type) -> Value:
        name = str(tok)[1:]
        for scope in self.scopes:
            if name in scope:
                raise self.err(f"value %{name} is defined twice", tok)
        v = Value(type, name)
        self.scopes[-1][name] = v
        return v

    def lookup(self, tok: Token) -> Value:
        name = str(tok)[1:]
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.err(f"use of undefined value %{name}", tok)

    def value(self, t: Any) -> Any:
        if isinstance(t, Token):
            raise AssertionError(t)
        k = t.data
        if k == "int":
            return int(t.children[0])
        if k == "float":
            return float(str(t.children[0]))
        if k == "string":
            try:
                return json.loads(str(t.children[0]))
            except json.JSONDecodeError as e:  # the grammar lets a raw control character or a bad escape through
                raise self.err(f"bad string literal: {e.msg.removesuffix(' at').lower()}", t.children[0]) from None
        if k == "true":
            return True
        if k == "false":
            return False
        if k == "list":
            return [self.value(c) for c in t.children if c is not None]
        if k == "dense":
            ty = parse_type_tree(t.children[1])
            if not isinstance(ty, ShapedType):
                raise EmberError("dense attribute needs a shaped type")
            vals = self.value(t.children[0])
            return DenseAttr(vals if isinstance(vals, list) else [vals], ty)
        raise AssertionError(k)

    def attrs(self, t: Tree | None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if t is None:
            return out
        for a in t.children:
            if a is None:
                continue
            key = str(a.children[0])
            if key in out:
                raise self.err(f"attribute '{key}' given twice", a.children[0])
            out[key] = self.value(a.children[1])
        return out

    def module(self, t: Tree) -> Op:
        ch = t.children
        attr_tree = ch[0] if ch and isinstance(ch[0], Tree) and ch[0].data == "attr_dict" else None
        mod = Op("module", attrs=self.attrs(attr_tree), regions=[Block()], loc=Loc(self.filename, 1, 1))
        self.opset(attr_tree, mod.attrs)
        for f in ch:
            if isinstance(f, Tree) and f.data == "func":
                mod.body.add(self.func(f))
        return mod

    def opset(self, t: Tree | None, attrs: dict[str, Any]) -> None:
        """The module's ONNX opset is an int64 version number everywhere downstream (host ops, `.dae`): any
        other value is refused here, where it is written."""
        v = attrs.get("opset")
        if t is None or v is None or (isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63):
            return
        a = next(a for a in t.children if a is not None and str(a.children[0]) == "opset")
        tok = next(a.children[1].scan_values(lambda x: isinstance(x, Token)), a.children[0])
        got = ("a list" if isinstance(v, list) else "a dense attribute" if isinstance(v, DenseAttr) else
               str(v).lower() if isinstance(v, bool) else str(tok))
        raise self.err(f"module attribute 'opset' must be an ONNX opset version (an integer from 0 to 2^63 - 1), "
                       f"got {got}", tok)

    def args(self, trees: list[Any]) -> list[Value]:
        return [self.define(a.children[0], parse_type_tree(a.children[1])) for a in trees if a is not None]

    def func(self, t: Tree) -> Op:
        sym: Token = t.children[0]
        arg_trees = [c for c in t.children if isinstance(c, Tree) and c.data == "arg"]
        type_trees = [c for c in t.children if isinstance(c, Tree) and c.data.endswith("_type")]
        ops = [c for c in t.children if isinstance(c, Tree) and c.data == "op"]
        self.scopes.append({})
        block = Block(self.args(arg_trees))
        f = Op("func", attrs={"sym_name": str(sym)[1:], "results": [parse_type_tree(x) for x in type_trees]},
               regions=[block], loc=self.loc(sym))
        for o in ops:
            block.add(self.op(o))
        self.scopes.pop()
        return f

    def op(self, t: Tree) -> Op:
        res_t, name_tok, operands_t, attr_t, *rest = t.children
        types = [parse_type_tree(x) for x in rest if isinstance(x, Tree) and x.data.endswith("_type")]
        regions_t = [x for x in rest if isinstance(x, Tree) and x.data == "region"]
        operands = [self.lookup(v) for v in operands_t.children] if operands_t is not None else []
        res_toks = list(res_t.children) if res_t is not None else []
        if len(res_toks) != len(types):
            raise self.err(f"'{name_tok}' names {len(res_toks)} results but gives {len(types)} types", name_tok)
        regions = []
        for r in regions_t:
            self.scopes.append({})
            block = Block(self.args([c for c in r.children if isinstance(c, Tree) and c.data == "arg"]))
            for o in r.children:
                if isinstance(o, Tree) and o.data == "op":
                    block.add(self.op(o))
            self.scopes.pop()
            regions.append(block)
        results = [self.define(tok, ty) for tok, ty in zip(res_toks, types)]
        return Op(str(name_tok), operands, results, self.attrs(attr_t), regions, self.loc(name_tok))


MAX_NESTING = 100  # brackets, braces and `x<`: real levels nest about ten deep; the parser recurses per level
# A string ends at its closing quote or, unclosed, at the end of its line: the scan stays linear either way.  A
# word followed by `<` (tensor<, dense<, stream<) opens a level that `>` closes; the lookbehind keeps the scan from
# retrying inside a long word.
_SCAN = {comment: re.compile(rf'"(?:[^"\\\n]|\\.)*"?|{comment}[^\n]*|(?<![\w.])[A-Za-z_][\w.]*<|[(\[{{,>]|[)\]}}]|\n')
         for comment in ("//", ";")}
_CLOSES = {")": "(", "]": "[", "}": "{", ">": "<"}


def check_text(text: str, filename: str, comment: str = "//") -> None:
    """Refuse, at its position, text that would make a parser recurse out of Python's stack or spend minutes and
    gigabytes: nesting deeper than MAX_NESTING, a list, dict or parenthesis of more than TEXT_LIST_ITEMS items
    (a region's or a dict's on one line: their items are one a line), more than TEXT_ITEMS items in all, a line
    longer than TEXT_LINE_CHARS (which bounds a string too).  Strings and comments (from `comment`) are skipped."""
    line_cap, items_cap, total_cap = TEXT_LINE_CHARS.get(), TEXT_LIST_ITEMS.get(), TEXT_ITEMS.get()
    opened: list[str] = []  # the open brackets, innermost last
    items: list[int] = []  # the items begun in each
    total, line, start = 0, 1, 0

    def refuse(message: str, at: int) -> EmberError:
        end = text.find("\n", start)
        return EmberError(message, Loc(filename, line, at - start + 1), text[start:end if end >= 0 else len(text)])

    def too_long() -> EmberError:
        return refuse(f"line longer than {line_cap:,} characters ({TEXT_LINE_CHARS.env} raises the limit)",
                      start + line_cap)

    for m in _SCAN[comment].finditer(text):
        tok = m.group()
        if m.start() - start > line_cap:  # a token that starts past the limit, or the line's end
            raise too_long()
        if tok[0] == '"' or tok.startswith(comment):
            continue
        if tok == "\n":
            line, start = line + 1, m.end()
            if opened and opened[-1] == "{":
                items[-1] = 1
        elif tok[-1] in "([{<":
            opened.append(tok[-1])
            items.append(1)
            if len(opened) > MAX_NESTING:
                raise refuse(f"nested more than {MAX_NESTING} deep", m.end() - 1)
        elif tok == ",":
            if items:
                items[-1] += 1
                total += 1
                if items[-1] > items_cap:
                    raise refuse(f"a list of more than {items_cap:,} items ({TEXT_LIST_ITEMS.env} raises the limit)",
                                 m.start())
                if total > total_cap:
                    raise refuse(f"more than {total_cap:,} list items in all ({TEXT_ITEMS.env} raises the limit)",
                                 m.start())
        elif tok in _CLOSES and opened and opened[-1] == _CLOSES[tok]:
            opened.pop()
            items.pop()
    if len(text) - start > line_cap:
        raise too_long()


def parse_module(text: str, filename: str = "<input>") -> Op:
    """Parse `.eir` text; syntax and name errors raise EmberError with the position."""
    check_text(text, filename)
    try:
        tree = grammar("eir.lark").parse(text)
    except UnexpectedInput as e:
        raise syntax_error(e, text, filename) from None
    return _Builder(text, filename).module(tree.children[0])
