"""codegen: a module at the loop/dlc level -> a DAE `Program` (what `.dae` text prints).

Every scalar SSA value gets its own register (r for integers, f for floats); every memref gets a
symbol.  Core loop nests become compare-and-branch loops; each `dlc.offload` becomes an access
program started by `run`, whose cases are emitted after `halt` under labels `A<k>.<id>`.
Function-level integers the access unit needs are passed as `run` parameters (constants are
written as immediates).  Each `work` op (what an emb op computed) becomes a `.work` record naming the
symbols that hold its tensors at the end of the run.
"""

from __future__ import annotations

from typing import Any

from ..ir.core import Op, Value
from ..ir.diagnostics import EmberError
from ..ir.types import ScalarType, ShapedType, StreamType
from ..isa import power_of_two
from .dae import Access, Instr, Label, Mem, Program, Reg, Symbol, SymRef, Work

INT_OPS = {"addi": "add", "subi": "sub", "muli": "mul", "divi": "div", "remi": "rem", "mini": "min", "maxi": "max"}
FLOAT_OPS = {"addf": "fadd", "subf": "fsub", "mulf": "fmul", "divf": "fdiv", "maxf": "fmax", "minf": "fmin"}
CMP = {"eq": "seq", "ne": "sne", "lt": "slt", "le": "sle"}


def typed_suffix(memref: object, result: object) -> str:
    """'.T' for a typed read (a load of T from a byte memref, docs/isa.md), else ''."""
    elem = memref.elem if isinstance(memref, ShapedType) else None
    return f".{result}" if isinstance(result, ScalarType) and elem is not None and result != elem else ""


def codegen(module: Op) -> Program:
    funcs = [f for f in module.body.ops if f.attrs.get("sym_name") == "main"] or module.body.ops
    if not funcs:
        raise EmberError("codegen: the module has no function", module.loc)
    return _Gen(module).func(funcs[0])


def _set_while_live(at: Op, value: Value) -> bool:
    """Whether a `setvar` of the variable `at` reads or sets can run between `at` and a later use of `value`:
    one placed after the setvar, or sharing a loop with it that runs after `at`."""
    block = at.parent
    assert block is not None
    order = [o for a in block.ops[block.ops.index(at) + 1:] for o in a.walk()]
    pos = {id(o): i for i, o in enumerate(order)}
    sets = [o for o in order if o.name == "loop.setvar" and o.attrs["var"] == at.attrs["var"]]
    uses = [o for o in order if value in o.operands]

    def loops(o: Op) -> set[int]:
        out = set()
        while (o := o.parent_op()) is not None:  # type: ignore[assignment]
            if o.name == "loop.for" and id(o) in pos:
                out.add(id(o))
        return out

    return any(pos[id(u)] > pos[id(s)] or loops(u) & loops(s) for s in sets for u in uses)


class _Gen:
    def __init__(self, module: Op):
        self.p = Program(weights=module.attrs.get("weights", ""), opset=int(module.attrs.get("opset", 0)))
        self.in_names: list[str] = list(module.attrs.get("inputs", []))
        self.out_names: list[str] = list(module.attrs.get("outputs", []))
        self.syms: dict[Value, int] = {}
        self.regs: dict[Value, Reg] = {}
        self.counts = {"r": 0, "f": 0, "v": 0}
        self.vars: dict[int, Reg] = {}  # core variables (loop.getvar/setvar) live in fixed registers
        self.labels = 0
        self.code: list[Instr | Label] = []
        self.cases: list[Instr | Label] = []
        self.consts: dict[Value, int | float] = {}
        self.const_regs: dict[tuple[str, str], Reg] = {}
        self.prologue: list[Instr | Label] = []
        self.work: list[Op] = []  # `work` ops, made records once every symbol is final
        self.uses: dict[Value, int] = {}  # how many ops read each value
        for o in module.walk():
            for v in o.operands:
                self.uses[v] = self.uses.get(v, 0) + 1

    # --- symbols and registers -------------------------------------------------------------
    def symbol(self, v: Value, kind: str, name: str) -> int:
        t = v.type
        if not isinstance(t, ShapedType) or t.shape is None:
            raise EmberError(f"codegen: %{v.name} has type {t}; only ranked tensors/memrefs can be stored")
        self.p.symbols.append(Symbol(kind, name, t.elem.name, tuple(t.shape)))
        self.syms[v] = len(self.p.symbols) - 1
        return self.syms[v]

    def reg(self, v: Value) -> Reg:
        if v not in self.regs:
            t = v.type
            cls = "v" if isinstance(t, ShapedType) else "f" if isinstance(t, ScalarType) and t.is_float else "r"
            self.regs[v] = Reg(cls, self.counts[cls])
            self.counts[cls] += 1
        return self.regs[v]

    def label(self) -> Label:
        self.labels += 1
        return Label(f"L{self.labels - 1}")

    # --- function --------------------------------------------------------------------------
    def func(self, f: Op) -> Program:
        for i, a in enumerate(f.body.args):
            self.symbol(a, "input", self.in_names[i] if i < len(self.in_names) else a.name or f"in{i}")
        ret = f.body.ops[-1]
        names = [self.out_names[i] if i < len(self.out_names) else f"output{i}" for i in range(len(ret.operands))]
        self.outputs: dict[Value, str] = {}
        for v, name in zip(ret.operands, names):  # a value returned twice is computed into its first output
            self.outputs.setdefault(v, name)
        for op in f.body.ops[:-1]:
            self.op(op, self.code)
        for v, name in zip(ret.operands, names):  # outputs that are not computed here: copy them
            sym = self.syms[v]
            if self.p.symbols[sym].kind != "output" or self.p.symbols[sym].name != name:
                out = self.symbol(v, "output", name)
                self.code.append(Instr("host", ["Identity", [SymRef(sym)], [SymRef(out)], {}]))
        self.code.append(Instr("halt"))
        self.p.code = self.prologue + self.code + self.cases
        self.p.work = [self.work_record(op) for op in self.work]
        return self.p

    def work_record(self, op: Op) -> Work:
        """The `.work` record of a `work` op: after the outputs are copied, so a result that is returned
        names the output symbol that holds it at the end."""
        syms = []
        for v in op.operands:
            if v not in self.syms:
                raise op.error(f"names %{v.name}, which has no symbol")
            syms.append(self.syms[v])
        a = op.attrs
        if a["op"] == "emb.gather":
            table, indices, output = syms
            return Work("gather", table=table, indices=indices, output=output, negative=a.get("negative", ""))
        if a["op"] == "emb.bag":
            table, indices, offsets, *weights, output = syms
            return Work("bag", a["mode"], table=table, indices=indices, offsets=offsets,
                        weights=weights[0] if weights else None, output=output,
                        padding_idx=a.get("padding_idx"), empty=a["empty"])
        if a["op"] == "emb.qbag":
            table, indices, offsets, *weights, output = syms
            return Work("qbag", a["mode"], table=table, indices=indices, offsets=offsets,
                        weights=weights[0] if weights else None, output=output, bits=a["bits"])
        if a["op"] == "emb.ttbag":
            n = a["cores"]
            cores, (indices, offsets, *weights, output) = syms[:n] + [None] * (4 - n), syms[n:]
            return Work("ttbag", a["mode"], table=cores[0], part1=cores[1], part2=cores[2], part3=cores[3],
                        indices=indices, offsets=offsets, weights=weights[0] if weights else None, output=output,
                        rows=a["rows"])
        if a["op"] == "emb.dhe":
            n = 3 + 2 * a["layers"]
            layers, (indices, offsets, *weights, output) = syms[3:n:2] + [None] * (3 - a["layers"]), syms[n:]
            return Work("dhe", a["mode"], table=layers[0], part1=layers[1], part2=layers[2], indices=indices,
                        offsets=offsets, weights=weights[0] if weights else None, output=output)
        if a["op"] == "emb.robe":
            array, indices, offsets, *weights, output = syms
            return Work("robe", a["mode"], table=array, indices=indices, offsets=offsets,
                        weights=weights[0] if weights else None, output=output, block=a["block"])
        data, targets, updates, output = syms
        return Work("scatter_rows", a["reduction"], table=updates, targets=targets, data=data, output=output)

    def result_symbol(self, v: Value) -> int:
        if v in self.outputs and v not in self.syms:
            return self.symbol(v, "output", self.outputs[v])
        return self.symbol(v, "temp", f"t{len(self.p.symbols)}")

    def op(self, op: Op, out: list[Instr | Label]) -> None:
        n = op.name
        if n == "param":
            self.symbol(op.result, "param", op.attrs["name"])
        elif n == "work":
            self.work.append(op)
        elif n == "host.onnx":
            ins = [SymRef(self.syms[v]) for v in op.operands]
            outs = [SymRef(self.result_symbol(r)) for r in op.results]
            attrs = {k: v for k, v in op.attrs.items() if k != "op"}
            out.append(Instr("host", [op.attrs["op"], ins, outs, attrs]))
        elif n == "loop.alloc":
            sym = self.result_symbol(op.result)
            t = op.result.type
            assert isinstance(t, ShapedType) and t.shape is not None
            dyn = iter(op.operands)
            dims: list[Any] = [d if d is not None else self.reg(next(dyn)) for d in t.shape]
            out.append(Instr("alloc", [SymRef(sym), dims]))
        elif n == "loop.const":  # one register per constant, loaded once at the start of the program
            value = op.attrs["value"]
            self.consts[op.result] = value
            key = (str(op.result.type), repr(value))
            if key not in self.const_regs:
                self.const_regs[key] = self.reg(op.result)
                self.prologue.append(Instr("li", [self.const_regs[key], value]))
            self.regs[op.result] = self.const_regs[key]
        elif n == "loop.dim":
            out.append(Instr("dim", [self.reg(op.result), SymRef(self.syms[op.operands[0]]), op.attrs["axis"]]))
        elif n == "loop.for":
            self.core_loop(op, out)
        elif n == "loop.if":
            self.core_if(op, out)
        elif n == "dlc.offload":
            self.offload(op, out)
        elif n == "loop.getvar":  # the variable's register itself, or a copy when it changes while read
            var = self.var(op.attrs["var"], op.result)
            if _set_while_live(op, op.result):
                if var.cls == "v":
                    raise op.error("reads a vector variable that changes while the value is live (no vector mov)")
                out.append(Instr("mov", [self.reg(op.result), var]))
            else:
                self.regs[op.result] = var
        elif n == "loop.setvar":
            var, src = self.var(op.attrs["var"], op.operands[0]), self.reg(op.operands[0])
            last = out[-1] if out else None
            mine = self.uses.get(op.operands[0], 0) == 1  # the setvar is the value's only reader
            # In place the value lives in the variable's register, so no later setvar may change it while read.
            if isinstance(last, Instr) and last.args and last.args[0] == src and (
                    mine or (var in last.args[1:] and not _set_while_live(op, op.operands[0]))):
                last.args[0] = var  # `add rV, rV, step` (or a vector made for the variable) in place
                self.regs[op.operands[0]] = var
            elif var.cls == "v":
                raise op.error("sets a vector variable from a value it cannot compute in place (no vector mov)")
            else:
                out.append(Instr("mov", [var, src]))
        elif n.startswith("loop."):
            out.append(self.vector(op) if self.is_vector_op(op) else self.scalar(op))
        else:
            raise op.error("has no code generation (run the lowering passes first)")

    def var(self, k: int, v: Value) -> Reg:
        """Core variable k's fixed register, of the class of its value `v` (r for counters, v for vectors)."""
        if k not in self.vars:
            cls = "v" if isinstance(v.type, ShapedType) else "r"
            self.vars[k] = Reg(cls, self.counts[cls])
            self.counts[cls] += 1
        return self.vars[k]

    @staticmethod
    def is_vector_op(op: Op) -> bool:
        vector_result = bool(op.results) and isinstance(op.results[0].type, ShapedType)
        return vector_result or op.name in ("loop.vstore", "loop.scatter")

    def mem(self, m: Value, index: list[Value]) -> Mem:
        return Mem(self.syms[m], tuple(self.reg(v) for v in index))

    def vector(self, op: Op) -> Instr:
        k = op.name[5:]
        t = (op.results[0] if op.results else op.operands[0]).type
        assert isinstance(t, ShapedType) and t.shape is not None
        lanes = t.shape[0]
        a = op.operands
        if k == "splat":
            return Instr(f"vsplat.{t.elem}", [self.reg(op.result), self.reg(a[0]), lanes])
        if k == "iota":
            return Instr("viota", [self.reg(op.result), self.reg(a[0]), lanes])
        if k == "tailmask":
            return Instr("vmask", [self.reg(op.result), self.reg(a[0]), self.reg(a[1]), lanes])
        if k in ("vload", "gather"):
            return Instr("vld" if k == "vload" else "vgather",
                         [self.reg(op.result), self.mem(a[0], a[1:-1]), self.reg(a[-1])])
        if k in ("vstore", "scatter"):
            return Instr("vst" if k == "vstore" else "vscatter",
                         [self.reg(a[0]), self.mem(a[1], a[2:-1]), self.reg(a[-1])])
        if k in FLOAT_OPS:
            return Instr(f"v{FLOAT_OPS[k]}.{t.elem}", [self.reg(op.result), *(self.reg(v) for v in a)])
        if k == "select":
            return Instr("vsel", [self.reg(op.result), *(self.reg(v) for v in a)])
        if k == "cast":
            return Instr(f"vcvt.{t.elem}", [self.reg(op.result), self.reg(a[0])])
        if k == "fmaf":
            return Instr("vfma.f32", [self.reg(op.result), *(self.reg(v) for v in a)])
        raise op.error("has no vector code generation")

    def scalar(self, op: Op) -> Instr:
        k = op.name[5:]
        r = [self.reg(v) for v in op.operands]
        if k in INT_OPS:
            if k in ("muli", "divi", "remi"):  # by a power of two: an immediate, which the core does as a shift or mask
                r = [self.shift_amount(v, r[j]) if j == 1 or k == "muli" else r[j] for j, v in enumerate(op.operands)]
            return Instr(INT_OPS[k], [self.reg(op.result), *r])
        if k in FLOAT_OPS:
            return Instr(f"{FLOAT_OPS[k]}.{op.result.type}", [self.reg(op.result), *r])
        if k == "cmpi":
            return Instr(CMP[op.attrs["pred"]], [self.reg(op.result), *r])
        if k == "select":
            return Instr("sel", [self.reg(op.result), *r])
        if k == "cast":
            src, dst = op.operands[0].type, op.result.type
            assert isinstance(src, ScalarType) and isinstance(dst, ScalarType)
            if dst.is_float:  # from an integer or another float type
                return Instr(f"fcvt.{dst}", [self.reg(op.result), r[0]])
            if src.is_int and dst.is_int:
                return Instr("mov", [self.reg(op.result), r[0]])
            raise op.error(f"cast from {src} to {dst} has no code generation yet")
        if k == "fmaf":
            return Instr("ffma.f32", [self.reg(op.result), *r])
        if k == "load":
            return Instr(f"ld{typed_suffix(op.operands[0].type, op.result.type)}",
                         [self.reg(op.result), Mem(self.syms[op.operands[0]], tuple(r[1:]))])
        if k == "store":
            return Instr("st", [r[0], Mem(self.syms[op.operands[1]], tuple(r[2:]))])
        raise op.error("has no code generation")

    def shift_amount(self, v: Value, reg: Reg) -> Reg | int:
        """A multiplier or divisor that is a positive power-of-two constant, as an immediate (isa.uops_of
        times it as the shift a compiler emits), else its register."""
        c = self.consts.get(v)
        return int(c) if isinstance(c, int) and power_of_two(c) else reg

    def core_loop(self, op: Op, out: list[Instr | Label]) -> None:
        lb, ub, step = (self.reg(v) for v in op.operands)
        iv = self.reg(op.body.args[0])
        head, exit_ = self.label(), self.label()
        out += [Instr("mov", [iv, lb]), head, Instr("bge", [iv, ub, exit_])]
        for inner in op.body.ops:
            self.op(inner, out)
        out += [Instr("add", [iv, iv, step]), Instr("jmp", [head]), exit_]

    def core_if(self, op: Op, out: list[Instr | Label]) -> None:
        """One branch around the body on the negated predicate (the ISA has blt, bge and beq)."""
        a, b = (self.reg(v) for v in op.operands)
        skip = self.label()
        pred = op.attrs["pred"]
        if pred == "eq":
            body = self.label()
            out += [Instr("beq", [a, b, body]), Instr("jmp", [skip]), body]
        else:
            out.append({"lt": Instr("bge", [a, b, skip]), "le": Instr("blt", [b, a, skip]),
                        "ne": Instr("beq", [a, b, skip])}[pred])
        for inner in op.body.ops:
            self.op(inner, out)
        out.append(skip)

    # --- offload -----------------------------------------------------------------------------
    def offload(self, op: Op, out: list[Instr | Label]) -> None:
        name = f"A{len(self.p.access)}"
        acc = Access(name, 0)
        self.p.access.append(acc)
        names: dict[Value, Reg] = {}
        params: list[Value] = []
        counts = {"t": 0, "s": 0}

        def arg(v: Value) -> Reg | int:
            if v in names:
                return names[v]
            if v in self.consts and isinstance(self.consts[v], int):
                return int(self.consts[v])
            if v not in params:
                params.append(v)
            return Reg("p", params.index(v))

        for a in op.regions[0].ops:
            if a.name == "dlc.tu":
                reg = names[a.result] = Reg("t", counts["t"])
                counts["t"] += 1
                bounds = [arg(v) for v in a.operands]
                if "vl" in a.attrs:  # vector TUs always step by one element; `vl` lanes a head
                    bounds[2] = a.attrs["vl"]
                    acc.body.append(Instr("vtu", [reg, *bounds]))
                else:
                    acc.body.append(Instr("tu", [reg, *bounds]))
            elif a.name in ("dlc.mask", "dlc.buffer"):
                reg = names[a.result] = Reg("s", counts["s"])
                counts["s"] += 1
                acc.body.append(Instr("mask" if a.name == "dlc.mask" else "buf", [reg, names[a.operands[0]]]))
            elif a.name in ("dlc.mem", "dlc.alu"):
                reg = names[a.result] = Reg("s", counts["s"])
                counts["s"] += 1
                if a.name == "dlc.mem":
                    st = a.result.type
                    suffix = typed_suffix(a.operands[0].type, st.elem if isinstance(st, StreamType) else st)
                    acc.body.append(Instr(f"mem{suffix}", [reg, Mem(self.syms[a.operands[0]],
                                                                    tuple(arg(v) for v in a.operands[1:]))]))
                else:
                    acc.body.append(Instr("alu", [reg, a.attrs["op"], *(arg(v) for v in a.operands)]))
            else:  # dlc.on
                ev = [names[a.operands[0]], a.attrs["event"], [names[v] for v in a.operands[1:]]]
                acc.body.append(Instr("on", ev + ([a.attrs["token"]] if "token" in a.attrs else [])))
        acc.params = len(params)
        out.append(Instr("run", [name, *(self.reg(v) for v in params)]))
        for case in op.regions[1].ops:
            self.cases.append(Label(f"{name}.{case.attrs['id']}"))
            for inner in case.body.ops:
                if inner.name == "dlc.pop" and isinstance(inner.result.type, ShapedType) and (
                        inner.result.type.kind == "memref"):
                    self.cases.append(Instr("popb", [SymRef(self.symbol(inner.result, "temp",
                                                                         f"buf{len(self.p.symbols)}"))]))
                elif inner.name == "dlc.pop":
                    self.cases.append(Instr("pop", [self.reg(inner.result)]))
                else:
                    self.op(inner, self.cases)
            self.cases.append(Instr("ret"))
