"""Program → C source of one function that simulates it exactly as the reference engine does.

Why generated code: the reference interprets every instruction through dictionaries and objects;
here each instruction becomes a few typed C statements, registers become local variables, labels
become C labels, the access unit's traversal-unit nest becomes nested loops, and each callback is
inlined where the rule that fires its token sits.  The order of every timed step (issue slots,
cache calls, queue pushes, pops) is the reference's, statement for statement, and the arithmetic
rounds as Python's does (double, rounded to float where the reference rounds), which is what makes
the statistics identical.  The cache, DRAM and queue models are runtime.h.

What is not handled raises `Unsupported` with the reason; the engine then runs the reference engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np

from ...backend.dae import Access, Instr, Label, Mem, Program, Reg
from ..execute import TIMING, UOPS, operands
from ..machine import ExecuteUnit
from ..tensors import is_table

CTYPE = {"f32": "float", "f64": "double", "i64": "int64_t", "index": "int64_t", "i32": "int32_t", "i16": "int16_t",
         "i8": "int8_t", "i1": "uint8_t", "bool": "uint8_t",  # "bool": masks (v registers, mask streams)
         "f16": "uint16_t", "bf16": "uint16_t"}  # 16-bit floats as their bits (runtime.h converts)
NPTYPE = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "index": np.int64, "i32": np.int32,
          "i16": np.int16, "i8": np.int8, "i1": np.bool_, "bool": np.bool_, "f16": np.float16, "bf16": np.uint16}
FLOAT_OPS = {"fadd": "({a} + {b})", "fsub": "({a} - {b})", "fmul": "({a} * {b})", "fdiv": "({a} / {b})",
             "fmax": "fmax_py({a}, {b})", "fmin": "fmin_py({a}, {b})"}
INT_OPS = {"add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "min": "mini({a}, {b})",
           "max": "maxi({a}, {b})", "slt": "(int64_t)({a} < {b})", "sle": "(int64_t)({a} <= {b})",
           "seq": "(int64_t)({a} == {b})", "sne": "(int64_t)({a} != {b})"}
VEC_OPS = {"vfadd": "{a} + {b}", "vfsub": "{a} - {b}", "vfmul": "{a} * {b}", "vfdiv": "{a} / {b}",
           "vfmax": "vmax_np{d}({a}, {b})", "vfmin": "vmin_np{d}({a}, {b})"}
ALU_STREAM = {"add": "({x} + {y})", "sub": "({x} - {y})", "mul": "({x} * {y})", "div": "floordiv({x}, {y})",
              "min": "mini({x}, {y})", "max": "maxi({x}, {y})"}
BRANCH = ("blt", "bge", "beq", "jmp")

OK, ERROR, MAX_CYCLES = 0, 1, 2  # status codes of the generated function
CATEGORIES = ("compute", "load", "pop", "token", "store", "mispredict")  # pipeline.CATEGORIES, runtime.h's CAT_*
FS_NAMES = ("cycles", "host_cycles", "host_flops", "host_bytes", "access_busy", *(f"stall_{c}" for c in CATEGORIES))
IS_NAMES = ("elements", "requests", "tokens", "operands", "operand_bytes", "callbacks", "lookups", "instructions",
            "prefetches", *(f"pipe_{g}" for g in ExecuteUnit.GROUPS))
OP_NAMES = tuple(sorted(set(TIMING) | {"dispatch", "host", "run"}))
# XP: the machine's numbers the generated code reads (the source holds none, so one build serves every machine)
XP_NAMES = ("issue_slot", "rob_entries", "store_buffer", "miss_slots", "prefetch_lines", "queue_latency",
            "l1_latency", "access_slot", "max_cycles", "outstanding", *ExecuteUnit.LATENCIES,
            *(f"per_cycle_{g}" for g in ExecuteUnit.GROUPS), *(f"hold_{g}" for g in ExecuteUnit.GROUPS))
SIGNATURE = ("int64_t simulate(void **T, int64_t *SH, int64_t shw, int64_t *BA, int64_t *OK, int64_t *OWN, "
             "int64_t *NA, Mem *mem, Queue *q, double *XP, int64_t *CNT, double *FS, int64_t *IS, "
             "int64_t *LEVELS, double (*host)(int64_t), double *HC)")


class Unsupported(Exception):
    """The program uses something the fast engine does not compile; the reason is the message."""


@dataclass(frozen=True)
class VType:
    dtype: str
    lanes: int


@dataclass
class Push:
    """One operand a rule pushes: how generated code reads it, and what it is."""

    value: str  # C expression of its value (an array name for vectors; the head's first index for "iota")
    ready: str  # C variable holding its ready time
    kind: str  # "int", "float", "vec", "iota" (a vector TU's lane indices), "buf"
    nbytes: str  # C expression of its queue bytes
    vtype: VType | None = None
    stream: str = ""  # the buffer's variable suffix, for kind "buf"
    seq: str = ""  # C variable holding its queue sequence number


@dataclass
class _TU:
    n: int
    bounds: list[Any]
    parent: int | None
    vl: int
    depth: int
    children: list[int] = field(default_factory=list)
    streams: list[Instr] = field(default_factory=list)
    rules: dict[str, list[Instr]] = field(default_factory=dict)
    buffers: list[int] = field(default_factory=list)


def _is_float(dtype: str) -> bool:
    return dtype in ("f32", "f64", "f16", "bf16")


def to_double(dtype: str, expr: str) -> str:
    """C expression widening an element of `dtype` to double (exactly)."""
    return {"f16": f"h2d({expr})", "bf16": f"b2d({expr})"}.get(dtype, f"(double)({expr})")


def from_double(dtype: str, expr: str) -> str:
    """C expression storing a double into `dtype`, rounded as numpy (ml_dtypes for bf16) rounds."""
    return {"f16": f"d2h({expr})", "bf16": f"d2b({expr})"}.get(dtype, f"({CTYPE[dtype]})({expr})")


def _isz(dtype: str) -> int:
    return 2 if dtype in ("f16", "bf16") else np.dtype(NPTYPE[dtype]).itemsize


class Generator:
    def __init__(self, program: Program, virtual: frozenset[int], vtypes: dict[int, VType], simd_bits: int):
        self.p = program
        self.simd_bits = simd_bits
        self.virtual = virtual  # timing-only: symbols held as address ranges (loads read 0, stores dropped)
        for s in program.symbols:
            if s.dtype not in CTYPE:
                raise Unsupported(f"tensors of type {s.dtype}")
        self.labels = {ins.name: i for i, ins in enumerate(program.code) if isinstance(ins, Label)}
        self.rank = [len(s.shape) for s in program.symbols]
        self.scratch = {ins.args[0].n for ins in program.code if isinstance(ins, Instr) and ins.base == "popb"}
        self.decls: dict[str, str] = {}  # C local -> its declaration
        self.body: list[str] = []
        self.depth = 1
        self.site = 0
        self.vtypes = dict(vtypes)
        self.pushes: list[Push] | None = None  # operands of the rule whose callback is being inlined
        self.unit: _Unit | None = None
        self.acc_index = {a.name: i for i, a in enumerate(program.access)}
        self.timed: set[Reg] = set()  # registers whose ready time the code keeps (tR3, tF1, tV2)
        self.scan_registers()

    # --- emission helpers ----------------------------------------------------------------
    def __call__(self, line: str) -> None:
        self.body.append("    " * self.depth + line)

    def block(self, head: str) -> None:
        self(head + " {")
        self.depth += 1

    def close(self) -> None:
        self.depth -= 1
        self("}")

    def var(self, name: str, ctype: str, init: str = "0") -> str:
        self.decls.setdefault(name, f"{ctype} {name} = {init};")
        return name

    def new_site(self) -> int:
        self.site += 1
        return self.site

    def fail(self, code: int = ERROR) -> str:
        return f"{{ status = {code}; goto FAIL; }}"

    # --- analysis ------------------------------------------------------------------------
    def scan_registers(self) -> None:
        """Every r and f register is a typed local; v registers get a dtype and lane count (to a fixed point)."""
        for _ in range(8):
            changed = False
            for ins in self.p.code:
                if isinstance(ins, Instr) and ins.args and isinstance(ins.args[0], Reg) and ins.args[0].cls == "v":
                    vt = self.vector_type(ins)
                    if vt is None:
                        continue
                    old = self.vtypes.get(ins.args[0].n)
                    if old is None:
                        self.vtypes[ins.args[0].n] = vt
                        changed = True
                    elif old != vt and ins.base not in ("vst", "vscatter"):
                        raise Unsupported(f"v{ins.args[0].n} holds both {old} and {vt}")
            if not changed:
                break

    def vector_type(self, ins: Instr) -> VType | None:
        a, op = ins.args, ins.base
        suffix = ins.op.split(".", 1)[1] if "." in ins.op else None
        known = self.vtypes.get
        if op in ("vld", "vgather"):
            mt = known(a[2].n)
            return VType(self.p.symbols[a[1].sym].dtype, mt.lanes) if mt else None
        if op == "vsplat":
            return VType(suffix or "f32", a[2])
        if op == "viota":
            return VType("i64", a[2])
        if op == "vmask":
            return VType("bool", a[3])
        if op in VEC_OPS:
            x = known(a[1].n)
            return VType(suffix or x.dtype, x.lanes) if x else None
        if op == "vsel":
            x = known(a[2].n)
            return x
        if op == "vcvt":
            x = known(a[1].n)
            return VType(suffix, x.lanes) if x and suffix else None
        return None  # vst/vscatter read it; a pop is typed by the rule that pushes

    # --- the function --------------------------------------------------------------------
    def generate(self) -> str:
        for k, s in enumerate(self.p.symbols):
            ct = CTYPE[s.dtype]
            self.var(f"a{k}", f"{ct} *", f"({ct} *)T[{k}]")
            for d in range(self.rank[k]):
                self.var(f"d{k}_{d}", "int64_t", f"SH[{k} * shw + {d}]")
            self.var(f"b{k}", "int64_t", f"BA[{k}]")
            if k in self.scratch:
                self.var(f"sz{k}", "int64_t", f"OK[{k}] ? d{k}_0 * {_isz(s.dtype)} : -1")
                self.var(f"cap{k}", "int64_t", f"OK[{k}] ? d{k}_0 : 0")
        self.var("ac", "double", "0.0")
        for name in FS_NAMES[1:5]:
            self.var(f"fs_{name}", "double", "0.0")
        for name in IS_NAMES[:7] + ("prefetches",):
            self.var(f"is_{name}", "int64_t", "0")
        self.var("status", "int64_t", "0")
        for i, name in enumerate(XP_NAMES):
            self.var(f"xp_{name}", "double", f"XP[{i}]")
        self.var("outst", "int64_t", "(int64_t)xp_outstanding")
        self.var("lacc", "int64_t", "LEVELS[0]")
        self.var("lcore", "int64_t", "LEVELS[1]")
        self.var("win", "double *", "(double *)calloc((size_t)(outst > 0 ? outst : 1), sizeof(double))")
        self.var("wn", "int64_t", "0")
        self.var("wh", "int64_t", "0")
        self.var("lpop", "double", "0.0")
        self.var("pp", "Pipe", "{0}")
        self.var("P", "Pipe *", "&pp")
        self.var("pf", "int64_t", "(int64_t)xp_prefetch_lines")
        self("P->slot = xp_issue_slot; P->rob = (int64_t)xp_rob_entries; P->sb_size = (int64_t)xp_store_buffer; "
             "P->nmiss = (int64_t)xp_miss_slots;")
        self("P->rob_t = (double *)calloc((size_t)P->rob, sizeof(double)); "
             "P->rob_c = (int64_t *)calloc((size_t)P->rob, sizeof(int64_t));")
        self("P->sb = (Store *)calloc((size_t)P->sb_size, sizeof(Store)); "
             "P->miss_free = (double *)calloc((size_t)P->nmiss, sizeof(double));")
        for g, group in enumerate(ExecuteUnit.GROUPS):
            self(f"P->ports[{g}].per_cycle = (int64_t)xp_per_cycle_{group}; "
                 f"P->ports[{g}].hold = (int64_t)xp_hold_{group}; P->ports[{g}].size = 4096; "
                 f"P->ports[{g}].used = (uint16_t *)calloc(4096, sizeof(uint16_t));")
        for a in self.p.access:  # execute.Core.dispatch's predictor: the last token, what followed each token
            n, tokens = self.acc_index[a.name], _tokens(a)
            if any(t < 0 for t in tokens):
                raise Unsupported("a negative token")
            self.var(f"pv{n}", "int64_t", "-1")
            self.decls.setdefault(f"nx{n}", f"int64_t nx{n}[{max(tokens, default=0) + 2}];")
            self(f"for (int64_t j = 0; j < {max(tokens, default=0) + 2}; j++) nx{n}[j] = -1;")
        self.region(0, "halt", "END_MAIN")
        self("END_MAIN:")
        self("pipe_drain(P); pipe_wait(P, mem->dst[4], CAT_STORE);")
        self("FS[0] = P->fe;")
        for i, name in enumerate(FS_NAMES[1:5], 1):
            self(f"FS[{i}] = fs_{name};")
        for i in range(len(CATEGORIES)):
            self(f"FS[{5 + i}] = P->stalls[{i}];")
        for i, name in enumerate(IS_NAMES[:7]):
            self(f"IS[{i}] = is_{name};")
        self("IS[7] = P->instructions; IS[8] = is_prefetches;")
        for g in range(len(ExecuteUnit.GROUPS)):
            self(f"IS[{9 + g}] = P->ports[{g}].count;")
        self("status = 0;")
        self("FAIL:")
        self("free(win); free(P->rob_t); free(P->rob_c); free(P->sb); free(P->miss_free);")
        for g in range(len(ExecuteUnit.GROUPS)):
            self(f"free(P->ports[{g}].used);")
        for name in self.decls:
            if name.startswith("BUF"):
                self(f"free({name});")
        self("return status;")
        regs = []
        for ins in self.p.code:
            if isinstance(ins, Instr):
                for a in _flat_args(ins.args):
                    if isinstance(a, Reg) and a.cls in "rf":
                        regs.append(a)
        for r in sorted(set(regs), key=lambda r: (r.cls, r.n)):
            self.var(f"{r.cls.upper()}{r.n}", "int64_t" if r.cls == "r" else "double", "0")
        for r in sorted(self.timed, key=lambda r: (r.cls, r.n)):
            self.var(f"t{r.cls.upper()}{r.n}", "double", "0.0")
        for v, vt in sorted(self.vtypes.items()):
            self.decls.setdefault(f"V{v}", f"{CTYPE[vt.dtype]} V{v}[{vt.lanes}] = {{0}};")
        runtime = resources.files("ember.sim.fast").joinpath("runtime.h").read_text()
        decls = ["    " + d for d in self.decls.values()]
        release = ("void release(void **T, int64_t *OWN, int64_t n) {\n"
                   "    for (int64_t k = 0; k < n; k++) if (OWN[k]) { free(T[k]); T[k] = 0; OWN[k] = 0; }\n}\n")
        return "\n".join([runtime, release, SIGNATURE + " {", *decls, *self.body, "}", ""])

    # --- execute-unit code ---------------------------------------------------------------
    def region(self, entry: int, until: str, exit_label: str) -> None:
        """The code reachable from `entry` up to `until` (halt or ret), as labelled C blocks in code order."""
        code = self.p.code
        seen: set[int] = set()
        targets: set[int] = set()
        work = [entry]
        while work:
            pc = work.pop()
            while pc not in seen:
                seen.add(pc)
                if pc >= len(code):
                    raise Unsupported("execution can run past the end of the code")
                ins = code[pc]
                if isinstance(ins, Instr) and ins.base in BRANCH:
                    target = self.labels.get(ins.args[-1].name)
                    if target is None:
                        raise Unsupported(f"a branch to an unknown label {ins.args[-1].name}")
                    targets.add(target)
                    work.append(target)
                    if ins.base == "jmp":
                        break
                elif isinstance(ins, Instr) and ins.base in ("halt", "ret"):
                    break
                pc += 1
        k = self.new_site()
        names = {pc: f"L{k}_{pc}" for pc in targets}
        prev_falls = False
        for pc in sorted(seen):
            ins = code[pc]
            if pc in names:
                self(f"{names[pc]}:;")
            elif not prev_falls and pc != entry:
                continue  # unreachable by fall-through and not a target: emitted where control reaches it
            if isinstance(ins, Label):
                prev_falls = True
                continue
            op = ins.base
            prev_falls = op not in ("jmp", "halt", "ret")
            if op in ("halt", "ret"):
                self(f"goto {exit_label};" if op == until else self.fail())
            elif op in BRANCH:
                self.plain(ins)
                target = names[self.labels[ins.args[-1].name]]
                if op == "jmp":
                    self(f"goto {target};")
                else:
                    cmp = {"blt": "<", "bge": ">=", "beq": "=="}[op]
                    self(f"if ({self.ival(ins.args[0])} {cmp} {self.ival(ins.args[1])}) goto {target};")
            else:
                self.instr(ins)

    # --- timing: execute.Core, statement for statement -----------------------------------
    def ready_var(self, r: Reg) -> str:
        self.timed.add(r)
        return f"t{r.cls.upper()}{r.n}"

    def begin(self, ins: Instr, stores: str = "0") -> str:
        """execute.Core.begin: count and dispatch `ins`; returns a C variable holding its operands' ready time."""
        k = self.new_site()
        t = self.var(f"t{k}", "double")
        self(f"CNT[{OP_NAMES.index(ins.base)}] += 1; {t} = pipe_dispatch(P, {stores});")
        for r in operands(ins)[1]:
            rv = self.ready_var(r)
            self(f"if ({rv} > {t}) {t} = {rv};")
        return t

    def done(self, ins: Instr, c: str, category: str) -> None:
        """execute.Core.done: the destination is ready at `c` (a C expression) and `ins` retires."""
        dst = operands(ins)[0]
        if dst is not None:
            self(f"{self.ready_var(dst)} = {c};")
        self(f"pipe_retire(P, {c}, CAT_{category.upper()});")

    def issue_at(self, group: str, t: str) -> str:
        """A C variable holding pipe_issue's time for `group` at `t`."""
        k = self.new_site()
        e = self.var(f"e{k}", "double")
        self(f"{e} = pipe_issue(P, {ExecuteUnit.GROUPS.index(group)}, {t});")
        return e

    def plain(self, ins: Instr) -> None:
        """The timing of an instruction with a fixed latency, piece by piece and uop after uop
        (execute.Core.step)."""
        t0 = self.begin(ins)
        k0 = self.new_site()
        t, done = self.var(f"u{k0}", "double"), self.var(f"ud{k0}", "double")
        self(f"{t} = {t0}; {done} = {t0};")
        for p in range(self.pieces(self.vector_bits(ins))):
            for k, (latency, group) in enumerate(UOPS.get(ins.base) or (TIMING[ins.base],)):
                if p or k:
                    src = t if k else t0
                    self(f"{t} = pipe_next(P, {t}, CAT_COMPUTE, {src});")
                self(f"{t} = pipe_issue(P, {ExecuteUnit.GROUPS.index(group)}, {t}) + xp_{latency};")
            self(f"if ({t} > {done}) {done} = {t};")
        self.done(ins, done, "compute")

    def pieces(self, bits: int) -> int:
        """execute.Core.pieces: machine vectors `bits` of vector span (the generated code is per machine)."""
        return max(1, -(-bits // self.simd_bits))

    def vector_bits(self, ins: Instr) -> int:
        """execute.Core.vector_bits, from the registers' static types."""
        a, op = ins.args, ins.base
        suffix = _isz(ins.op.split(".", 1)[1]) if "." in ins.op else 0
        if op in VEC_OPS or op == "vcvt":
            x = self.vtypes[a[1].n]
            return x.lanes * 8 * max(_isz(x.dtype), suffix)
        if op == "vsel":
            x = self.vtypes[a[2].n]
            return x.lanes * 8 * _isz(x.dtype)
        return {"vsplat": lambda: a[2] * 8 * (suffix or 4), "viota": lambda: a[2] * 64,
                "vmask": lambda: a[3] * 8}.get(op, lambda: 0)()

    def ival(self, a: Any) -> str:
        if isinstance(a, Reg) and a.cls in "rf":
            return f"{a.cls.upper()}{a.n}"
        if isinstance(a, bool) or not isinstance(a, (int, float)):
            raise Unsupported(f"operand {a!r}")
        if isinstance(a, float):
            return "(-INFINITY)" if a == float("-inf") else "INFINITY" if a == float("inf") else \
                "NAN" if a != a else repr(a)
        return f"((int64_t){a}LL)"

    def flat(self, m: Mem, idx: list[str]) -> str:
        """Statements checking `idx` against the shape of @sym (Tensors.flat_index); returns the flat index."""
        n = m.sym
        if len(idx) != self.rank[n]:
            raise Unsupported(f"@{n} indexed with {len(idx)} indices but has rank {self.rank[n]}")
        k = self.new_site()
        names = []
        for d, x in enumerate(idx):
            names.append(self.var(f"x{k}_{d}", "int64_t"))
            self(f"x{k}_{d} = {x};")
        conds = "".join(f" || x{k}_{d} < 0 || x{k}_{d} >= d{n}_{d}" for d in range(len(idx)))
        self(f"if (!OK[{n}]{conds}) {self.fail()}")
        expr = names[0] if names else "0"
        for d in range(1, len(names)):
            expr = f"({expr}) * d{n}_{d} + {names[d]}"
        fl = self.var(f"fl{k}", "int64_t")
        self(f"{fl} = {expr};")
        return fl

    def addr(self, n: int, flat: str) -> str:
        return f"(b{n} + ({flat}) * {_isz(self.p.symbols[n].dtype)})"

    def watermark(self) -> str:
        """No later memory request starts before this (runtime.h's book prunes DRAM intervals ending before it)."""
        return "mind(ac, P->d)" if self.unit is not None else "P->d"

    def count_lookup(self, n: int, column: str) -> None:
        """Tensors.is_lookup: a load starting at column 0 of a table (tensors.is_table) reads one row."""
        if is_table(self.p.symbols[n]):
            self(f"if ({column} == 0) is_lookups += 1;")

    def lines(self, addr: str, nbytes: str, e: str, write: bool, forward: bool) -> str:
        """execute.Core.lines (and, for a load, its store-to-load forwarding): a C variable holding the arrival."""
        k = self.new_site()
        d = self.var(f"ld{k}", "double")
        self(f"{d} = core_lines(P, mem, {addr}, {nbytes}, {e}, {int(write)}, pf, &is_prefetches, {self.watermark()});")
        self(f"if ({d} < 0.0) {self.fail()}")
        if forward:
            f = self.var(f"fw{k}", "double")
            self(f"{f} = forwarded(P, {addr}, {addr} + {nbytes}); "
                 f"if ({f} >= 0.0 && {f} + xp_l1_latency > {d}) {d} = {f} + xp_l1_latency;")
        return d

    def elem(self, n: int, index: str) -> str:
        return "0" if n in self.virtual else f"a{n}[{index}]"

    def instr(self, ins: Instr) -> None:
        a, op = ins.args, ins.base
        if op == "host":
            self.host(ins)
            return
        if op == "run":
            self.run(ins)
            return
        if op not in TIMING:
            raise Unsupported(f"instruction '{ins.op}'")
        if op not in ("ld", "st", "vld", "vst", "vgather", "vscatter", "pop", "popb"):
            self.plain(ins)
        if op in INT_OPS:
            self.need(a[0], "r")
            self(f"R{a[0].n} = {INT_OPS[op].format(a=self.ival(a[1]), b=self.ival(a[2]))};")
        elif op in FLOAT_OPS:
            val = FLOAT_OPS[op].format(a=self.fval(a[1]), b=self.fval(a[2]))
            self(f"F{a[0].n} = {self.round(ins.op.split('.')[1], val)};")
        elif op in ("li", "mov"):
            self.assign(a[0], a[1])
        elif op == "sel":
            if not (a[0].cls == a[2].cls == a[3].cls) or a[0].cls not in "rf":
                raise Unsupported("sel mixing register kinds")
            self(f"{self.ival(a[0])} = {self.ival(a[1])} ? {self.ival(a[2])} : {self.ival(a[3])};")
        elif op in ("div", "rem"):
            x, y = self.ival(a[1]), self.ival(a[2])
            self(f"if ({y} == 0) {self.fail()}")
            self(f"R{a[0].n} = {'floordiv' if op == 'div' else 'floormod'}({x}, {y});")
        elif op == "fcvt":
            self(f"F{a[0].n} = {self.round(ins.op.split('.')[1], f'(double)({self.ival(a[1])})')};")
        elif op == "ld":
            self.load(ins)
        elif op == "st":
            self.store(ins)
        elif op == "dim":
            n, d = a[1].n, a[2]
            if not 0 <= d < self.rank[n]:
                raise Unsupported("dim of a missing dimension")
            self(f"if (!OK[{n}]) {self.fail()}")
            self(f"R{a[0].n} = d{n}_{d};")
        elif op == "alloc":
            self.alloc(a[0].n, [self.ival(x) for x in a[1]])
        elif op == "pop":
            self.pop(ins, a[0])
        elif op == "popb":
            self.popb(ins, a[0].n)
        elif op in VEC_OPS:
            self.vec_binary(ins)
        elif op in ("vld", "vst"):
            self.vector_contiguous(ins, op == "vst")
        elif op in ("vgather", "vscatter"):
            self.vector_indexed(ins, op == "vscatter")
        elif op in ("vsplat", "viota", "vmask"):
            vt = self.vtypes[a[0].n]
            val = {"vsplat": from_double(vt.dtype, self.ival(a[1])) if vt.dtype in ("f16", "bf16")
                   else f"({CTYPE[vt.dtype]})({self.ival(a[1])})", "viota": f"{self.ival(a[1])} + l",
                   "vmask": f"(l + {self.ival(a[1])}) < {self.ival(a[2])}"}[op]
            self(f"for (int64_t l = 0; l < {vt.lanes}; l++) V{a[0].n}[l] = {val};")
        elif op == "vsel":
            vt = self.vtypes[a[0].n]
            if self.vtypes.get(a[2].n) != vt or self.vtypes.get(a[3].n) != vt:
                raise Unsupported("vsel of vectors of different types")
            if isinstance(a[1], Reg) and a[1].cls == "v":
                self(f"for (int64_t l = 0; l < {vt.lanes}; l++) V{a[0].n}[l] = V{a[1].n}[l] ? V{a[2].n}[l] : "
                     f"V{a[3].n}[l];")
            else:
                self(f"memcpy(V{a[0].n}, {self.ival(a[1])} ? V{a[2].n} : V{a[3].n}, sizeof(V{a[0].n}));")
        elif op == "vcvt":
            src, dst = self.vtypes.get(a[1].n), self.vtypes[a[0].n]
            if src is None or dst.lanes != src.lanes or a[0].n == a[1].n:
                raise Unsupported("vcvt changing the lane count or in place")
            lane = f"V{a[1].n}[l]"
            if {src.dtype, dst.dtype} & {"f16", "bf16"}:  # through double, which widens either exactly
                lane = from_double(dst.dtype, to_double(src.dtype, lane))
            else:
                lane = f"({CTYPE[dst.dtype]}){lane}"
            self(f"for (int64_t l = 0; l < {dst.lanes}; l++) V{a[0].n}[l] = {lane};")
        else:
            raise Unsupported(f"instruction '{ins.op}'")

    def need(self, r: Any, cls: str) -> None:
        if not isinstance(r, Reg) or r.cls != cls:
            raise Unsupported(f"{r} where a {cls} register is expected")

    def fval(self, a: Any) -> str:
        self.need(a, "f")
        return f"F{a.n}"

    def round(self, ty: str, expr: str) -> str:
        if ty == "f32":
            return f"(double)(float)({expr})"
        if ty == "f64":
            return f"({expr})"
        if ty in ("f16", "bf16"):
            return to_double(ty, from_double(ty, expr))
        raise Unsupported(f"rounding to {ty}")

    def assign(self, dst: Reg, src: Any) -> None:
        if dst.cls == "r":
            if isinstance(src, float) or (isinstance(src, Reg) and src.cls != "r"):
                raise Unsupported("a float value moved into an integer register")
            self(f"R{dst.n} = {self.ival(src)};")
        elif dst.cls == "f":
            self(f"F{dst.n} = (double)({self.ival(src)});")
        elif dst.cls == "v" and isinstance(src, Reg) and src.cls == "v" and self.vtypes.get(src.n) == \
                self.vtypes.get(dst.n):
            self(f"memcpy(V{dst.n}, V{src.n}, sizeof(V{dst.n}));")
        else:
            raise Unsupported(f"'{dst}' assigned from {src}")

    def place(self, n: int, nbytes: str) -> None:
        """Tensors.set: a new page-aligned base address for symbol n."""
        self(f"b{n} = NA[0]; BA[{n}] = b{n}; NA[0] += ({nbytes} + 4095) / 4096 * 4096 + 4096;")

    def alloc(self, n: int, dims: list[str]) -> None:
        s = self.p.symbols[n]
        if len(dims) != self.rank[n]:
            raise Unsupported("alloc with a rank other than the symbol's")
        k = self.new_site()
        for d, x in enumerate(dims):
            self.var(f"y{k}_{d}", "int64_t")
            self(f"y{k}_{d} = {x};")
        checks = [f"y{k}_{d} < 0" for d in range(len(dims))]
        checks += [f"y{k}_{d} != {want}" for d, want in enumerate(s.shape) if want is not None]
        if checks:
            self(f"if ({' || '.join(checks)}) {self.fail()}")
        size = " * ".join(f"y{k}_{d}" for d in range(len(dims))) or "1"
        ct = CTYPE[s.dtype]
        self(f"if (OWN[{n}]) free(T[{n}]);")
        self(f"a{n} = ({ct} *)calloc((size_t)({size}) + 1, sizeof({ct})); T[{n}] = a{n}; OWN[{n}] = 1; OK[{n}] = 1;")
        for d in range(len(dims)):
            self(f"d{n}_{d} = y{k}_{d}; SH[{n} * shw + {d}] = d{n}_{d};")
        self.place(n, f"({size}) * {_isz(s.dtype)}")

    def load(self, ins: Instr) -> None:
        a = ins.args
        m: Mem = a[1]
        idx = [self.ival(i) for i in m.index]
        fl = self.flat(m, idx)
        e = self.issue_at("load", self.begin(ins))
        isz = _isz(self.p.symbols[m.sym].dtype)
        self.done(ins, self.lines(self.addr(m.sym, fl), str(isz), e, False, True), "load")
        if idx:
            self.count_lookup(m.sym, idx[-1])
        if a[0].cls == "f":
            self(f"F{a[0].n} = {to_double(self.p.symbols[m.sym].dtype, self.elem(m.sym, fl))};")
        elif a[0].cls == "r":
            if _is_float(self.p.symbols[m.sym].dtype):
                raise Unsupported("a float loaded into an integer register")
            self(f"R{a[0].n} = (int64_t){self.elem(m.sym, fl)};")
        else:
            raise Unsupported("ld into a vector register")

    def store(self, ins: Instr) -> None:
        a = ins.args
        m: Mem = a[1]
        fl = self.flat(m, [self.ival(i) for i in m.index])
        if a[0].cls == "f" and not _is_float(self.p.symbols[m.sym].dtype):
            raise Unsupported("a float stored into an integer tensor")
        if m.sym not in self.virtual:
            self(f"a{m.sym}[{fl}] = {from_double(self.p.symbols[m.sym].dtype, self.ival(a[0]))};")
        e = self.issue_at("store", self.begin(ins, "1"))
        self.commit([(self.addr(m.sym, fl), str(_isz(self.p.symbols[m.sym].dtype)), e)], e)

    def commit(self, parts: list[tuple[str, str, str]], t: str) -> None:
        """execute.Core.store: each part (address, bytes, issue time) fetches its lines, the store retires at
        the latest issue, then each part is committed."""
        lines = [self.lines(addr, n, e, True, False) for addr, n, e in parts]
        k = self.new_site()
        r = self.var(f"r{k}", "double")
        self(f"{r} = {t};")
        for _, _, e in parts:
            self(f"if ({e} > {r}) {r} = {e};")
        self(f"{r} = pipe_retire(P, {r}, CAT_STORE);")
        for (addr, n, e), line in zip(parts, lines):
            self(f"pipe_commit(P, {addr}, {addr} + {n}, {e}, {r}, {line});")

    def vec_binary(self, ins: Instr) -> None:
        a = ins.args
        x, y, d = self.vtypes.get(a[1].n), self.vtypes.get(a[2].n), self.vtypes.get(a[0].n)
        if x is None or x != y or d != x or not _is_float(x.dtype):
            raise Unsupported(f"'{ins.op}' on vectors of different or non-float types")
        half = x.dtype in ("f16", "bf16")  # numpy and ml_dtypes compute in float32 and round once: so does double
        xa = to_double(x.dtype, f"V{a[1].n}[l]") if half else f"V{a[1].n}[l]"
        xb = to_double(x.dtype, f"V{a[2].n}[l]") if half else f"V{a[2].n}[l]"
        expr = VEC_OPS[ins.base].format(a=xa, b=xb, d="d" if x.dtype == "f64" or half else "")
        self(f"for (int64_t l = 0; l < {x.lanes}; l++) V{a[0].n}[l] = {from_double(x.dtype, expr) if half else expr};")

    def vector_contiguous(self, ins: Instr, store: bool) -> None:
        """execute.Core.vector_contiguous: one access per line the lanes on cover."""
        a = ins.args
        m: Mem = a[1]
        mt, vt = self.vtypes.get(a[2].n), self.vtypes.get(a[0].n)
        if mt is None or vt is None or mt.dtype != "bool" or vt.lanes != mt.lanes:
            raise Unsupported("a vector access without a matching mask register")
        if vt.dtype != self.p.symbols[m.sym].dtype:
            raise Unsupported("a vector access converting types")
        k = self.new_site()
        idx = [self.ival(i) for i in m.index]
        on0, onl = self.var(f"on0_{k}", "int64_t"), self.var(f"onl_{k}", "int64_t")
        self(f"{on0} = -1; {onl} = -1;")
        self(f"for (int64_t l = 0; l < {mt.lanes}; l++) if (V{a[2].n}[l]) {{ if ({on0} < 0) {on0} = l; {onl} = l; }}")
        t0 = self.begin(ins, f"{on0} >= 0 ? 1 : 0" if store else "0")
        t, e = self.var(f"vt{k}", "double"), self.var(f"ve{k}", "double")
        self(f"{e} = {t0};")
        for p in range(self.pieces(mt.lanes * 8 * _isz(vt.dtype))):  # a piece per machine vector spanned
            self(f"{t} = pipe_next(P, {e}, CAT_{'STORE' if store else 'LOAD'}, {t0});" if p else f"{t} = {t0};")
            if not store:
                self.vector_load_uop(t)
            self(f"{e} = pipe_issue(P, {ExecuteUnit.GROUPS.index('store' if store else 'load')}, {t});")
        self.block(f"if ({on0} < 0)")
        if store:
            self(f"pipe_retire(P, {e}, CAT_STORE);")
        else:
            self(f"memset(V{a[0].n}, 0, sizeof(V{a[0].n}));")
            self.done(ins, e, "load")
        self.close()
        self.block("else")
        lo = self.flat(m, idx[:-1] + [f"{idx[-1]} + {on0}"])
        hi = self.flat(m, idx[:-1] + [f"{idx[-1]} + {onl}"])
        isz = _isz(self.p.symbols[m.sym].dtype)
        addr, nbytes = self.var(f"va{k}", "int64_t"), self.var(f"vn{k}", "int64_t")
        self(f"{addr} = {self.addr(m.sym, lo)}; {nbytes} = {self.addr(m.sym, hi)} - {addr} + {isz};")
        base = self.var(f"base{k}", "int64_t")
        self(f"{base} = {lo} - {on0};")
        if store:
            if m.sym not in self.virtual:
                self(f"for (int64_t l = 0; l < {mt.lanes}; l++) if (V{a[2].n}[l]) a{m.sym}[{base} + l] = V{a[0].n}[l];")
            self.commit([(addr, nbytes, e)], e)
        else:
            self(f"for (int64_t l = 0; l < {mt.lanes}; l++) V{a[0].n}[l] = V{a[2].n}[l] ? "
                 f"{self.elem(m.sym, f'{base} + l')} : 0;")
            self.count_lookup(m.sym, f"{idx[-1]} + {on0}")
            self.done(ins, self.lines(addr, nbytes, e, False, True), "load")
        self.close()

    def vector_indexed(self, ins: Instr, store: bool) -> None:
        """execute.Core.vector_indexed: each lane takes a load (store) pipe slot; each lane on is an access."""
        a = ins.args
        m: Mem = a[1]
        mt, vt = self.vtypes.get(a[2].n), self.vtypes.get(a[0].n)
        lanes = m.index[-1]
        if mt is None or vt is None or not isinstance(lanes, Reg) or lanes.cls != "v" or vt.lanes != mt.lanes:
            raise Unsupported("a gather without matching mask and index vectors")
        if vt.dtype != self.p.symbols[m.sym].dtype:
            raise Unsupported("a gather converting types")
        k = self.new_site()
        prefix = [self.ival(i) for i in m.index[:-1]]
        ct, isz = CTYPE[vt.dtype], _isz(vt.dtype)
        n_on = self.var(f"non{k}", "int64_t")
        self(f"{n_on} = 0; for (int64_t l = 0; l < {mt.lanes}; l++) {n_on} += V{a[2].n}[l] != 0;")
        t = self.begin(ins, n_on if store else "0")
        if store:
            self.decls.setdefault(f"pa{k}", f"int64_t pa{k}[{mt.lanes}];")
            self.decls.setdefault(f"pe{k}", f"double pe{k}[{mt.lanes}];")
            self.decls.setdefault(f"pl{k}", f"double pl{k}[{mt.lanes}];")
        else:
            self.decls.setdefault(f"tmp{k}", f"{ct} tmp{k}[{mt.lanes}];")
            self(f"memset(tmp{k}, 0, sizeof(tmp{k}));")
        dn = self.var(f"dn{k}", "double")
        np_ = self.var(f"np{k}", "int64_t")
        self(f"{dn} = {t}; {np_} = 0;")
        lane = self.var(f"ln{k}", "int64_t")
        self.block(f"for ({lane} = 0; {lane} < {mt.lanes}; {lane}++)")
        e = self.issue_at("store" if store else "load", t)
        self.block(f"if (V{a[2].n}[{lane}])")
        f = self.flat(m, prefix + [f"(int64_t)V{lanes.n}[{lane}]"])
        if store:
            if m.sym not in self.virtual:
                self(f"a{m.sym}[{f}] = V{a[0].n}[{lane}];")
            self(f"pa{k}[{np_}] = {self.addr(m.sym, f)}; pe{k}[{np_}] = {e}; {np_} += 1;")
        else:
            if m.sym not in self.virtual:
                self(f"tmp{k}[{lane}] = a{m.sym}[{f}];")
            d = self.lines(self.addr(m.sym, f), str(isz), e, False, True)
            self(f"if ({d} > {dn}) {dn} = {d};")
        self.close()
        self.close()
        if store:  # execute.Core.store over the lanes, in three passes as there
            self(f"for (int64_t j = 0; j < {np_}; j++) {{ pl{k}[j] = core_lines(P, mem, pa{k}[j], {isz}, pe{k}[j], "
                 f"1, pf, &is_prefetches, {self.watermark()}); if (pl{k}[j] < 0.0) {self.fail()} }}")
            self(f"for (int64_t j = 0; j < {np_}; j++) if (pe{k}[j] > {dn}) {dn} = pe{k}[j];")
            self(f"{dn} = pipe_retire(P, {dn}, CAT_STORE);")
            self(f"for (int64_t j = 0; j < {np_}; j++) pipe_commit(P, pa{k}[j], pa{k}[j] + {isz}, pe{k}[j], {dn}, "
                 f"pl{k}[j]);")
        else:
            self(f"memcpy(V{a[0].n}, tmp{k}, sizeof(tmp{k}));")
            self.done(ins, f"{dn} + xp_gather_latency", "load")

    def host(self, ins: Instr) -> None:
        """Host ONNX ops call back into Python (onnx.reference), as the reference engine runs them."""
        _, _, out_syms, _ = ins.args
        index = self.p.code.index(ins)
        self.begin(ins)
        self(f"if (host({index}) < 0.0) {self.fail()}")
        for s in out_syms:
            n = s.n
            self(f"a{n} = ({CTYPE[self.p.symbols[n].dtype]} *)T[{n}]; b{n} = BA[{n}];")
            for d in range(self.rank[n]):
                self(f"d{n}_{d} = SH[{n} * shw + {d}];")
            if n in self.scratch:
                self(f"sz{n} = d{n}_0 * {_isz(self.p.symbols[n].dtype)}; cap{n} = 0;")
        self("pipe_drain(P); P->fe += HC[0]; "
             "pipe_retire(P, P->fe, CAT_COMPUTE);")
        self("fs_host_cycles += HC[0]; fs_host_flops += HC[1]; fs_host_bytes += HC[2];")

    # --- pops: bound to the pushes of the rule whose callback is being inlined -----------
    def vector_load_uop(self, t: str) -> None:
        """execute.Core.vector_load_uop: the ALU-port uop of a 512-bit load, then the load's dispatch (into `t`)."""
        self(f"pipe_issue(P, {ExecuteUnit.GROUPS.index('int_alu')}, {t}); {t} = pipe_next(P, {t}, CAT_COMPUTE, {t});")

    def take(self, ins: Instr, push: Push) -> None:
        """execute.Core.pop_entry: read in order once the operand is there, ready a queue latency later."""
        t0 = self.begin(ins)
        vector = ins.base == "pop" and ins.args[0].cls == "v" and push.vtype is not None
        k = self.new_site()
        t = self.var(f"pt{k}", "double")
        self(f"{t} = {t0};")
        n = self.pieces(push.vtype.lanes * 8 * _isz(push.vtype.dtype)) if vector and push.vtype else 1
        for p in range(n):
            if p:
                self(f"{t} = pipe_next(P, {t}, CAT_POP, {t0});")
            if vector:
                self.vector_load_uop(t)
            self(f"if (lpop > {t}) {t} = lpop; if ({push.ready} > {t}) {t} = {push.ready};")
            self(f"{t} = pipe_issue(P, {ExecuteUnit.GROUPS.index('load')}, {t}); lpop = {t};")
        self(f"q->pop[{push.seq} & q->mask] = {t};")
        self.done(ins, f"{t} + xp_queue_latency", "pop")

    def pop(self, ins: Instr, dst: Reg) -> None:
        push = self.next_push()
        if dst.cls == "v":
            vt = self.vtypes.get(dst.n)
            if push.kind not in ("vec", "iota") or push.vtype is None:
                raise Unsupported("a vector pop of a scalar operand")
            if vt is None:
                self.vtypes[dst.n] = push.vtype
                raise Retype(self.vtypes)
            if vt != push.vtype:
                raise Unsupported(f"v{dst.n} popped as {push.vtype} and used as {vt}")
            self.take(ins, push)
            if push.kind == "iota":
                self(f"for (int64_t l = 0; l < {vt.lanes}; l++) V{dst.n}[l] = {push.value} + l;")
            else:
                self(f"memcpy(V{dst.n}, {push.value}, sizeof(V{dst.n}));")
        elif dst.cls == "r":
            if push.kind != "int":
                raise Unsupported("an integer pop of a non-integer operand")
            self.take(ins, push)
            self(f"R{dst.n} = {push.value};")
        elif dst.cls == "f":
            if push.kind not in ("int", "float"):
                raise Unsupported("a float pop of a vector operand")
            self.take(ins, push)
            self(f"F{dst.n} = (double)({push.value});")
        else:
            raise Unsupported(f"pop into {dst}")

    def popb(self, ins: Instr, n: int) -> None:
        """Tensors.set_scratch: the buffer keeps its base address while it is no larger than the last one."""
        s = self.p.symbols[n]
        push = self.next_push()
        if push.kind != "buf" or push.vtype is None or push.vtype.dtype != s.dtype:
            raise Unsupported("popb of an operand that is not a buffer of the symbol's type")
        if self.rank[n] != 1 or s.shape[0] is not None:
            raise Unsupported("popb into a symbol that is not of shape [?]")
        self.take(ins, push)
        ln, ct, isz = f"BL{push.stream}", CTYPE[s.dtype], _isz(s.dtype)
        self(f"if (sz{n} < {ln} * {isz}) {{ b{n} = NA[0]; BA[{n}] = b{n}; NA[0] += ({ln} * {isz} + 4095) / 4096 * 4096 "
             f"+ 4096; }}")
        self(f"sz{n} = {ln} * {isz};")
        self.block(f"if (cap{n} < {ln} || !OWN[{n}])")
        self(f"cap{n} = {ln} > 2 * cap{n} ? {ln} : 2 * cap{n};")
        self(f"if (OWN[{n}]) free(T[{n}]);")
        self(f"a{n} = ({ct} *)malloc((size_t)(cap{n} + 1) * sizeof({ct})); T[{n}] = a{n}; OWN[{n}] = 1;")
        self.close()
        self(f"memcpy(a{n}, BUF{push.stream}, (size_t){ln} * sizeof({ct}));")
        self(f"d{n}_0 = {ln}; SH[{n} * shw] = {ln}; OK[{n}] = 1;")
        self(f"if ({ln} > 0 && mem_place(mem, b{n}, {ln} * {isz}, lacc, {push.ready}, lpop, {self.watermark()}) < 0) "
             f"{self.fail()}")

    def next_push(self) -> Push:
        if not self.pushes:
            raise Unsupported("a pop that no operand of the firing rule matches")
        return self.pushes.pop(0)

    # --- access unit ---------------------------------------------------------------------
    def run(self, ins: Instr) -> None:
        """A `run`: the access unit's nest as loops, each token's callback inlined at its rule."""
        acc = next((x for x in self.p.access if x.name == ins.args[0]), None)
        if acc is None or len(ins.args) - 1 != acc.params:
            raise Unsupported("a run the reference engine rejects")
        if self.unit is not None:
            raise Unsupported("a run inside a callback")
        unit = _Unit(acc, f"{self.acc_index[acc.name]}_")
        for body in acc.body:
            unit.declare(body, self.p.symbols)
        t = self.begin(ins)
        self(f"pipe_retire(P, {t}, CAT_COMPUTE);")
        self.unit = unit
        for i, a in enumerate(ins.args[1:]):
            self.var(f"P{unit.pre}{i}", "int64_t")
            self(f"P{unit.pre}{i} = {self.ival(a)};")
        k = self.new_site()
        ac0, stall0 = self.var(f"ac0_{k}", "double"), self.var(f"stall0_{k}", "double")
        self(f"ac = {t}; {ac0} = ac; {stall0} = q->stall; wn = 0; wh = 0;")
        self.declare_streams(unit)
        for s in unit.top_streams:
            self.issue(s)
        for r in unit.roots:
            self.walk(unit.tus[r])
        self("pipe_wait(P, ac, CAT_TOKEN);")
        self(f"fs_access_busy += ac - {ac0} - (q->stall - {stall0});")
        self.unit = None

    def declare_streams(self, unit: _Unit) -> None:
        pre = unit.pre
        for s, (kind, dtype, lanes) in unit.stypes.items():
            if kind == "vec":
                self.decls.setdefault(f"S{pre}{s}", f"{CTYPE[dtype]} S{pre}{s}[{lanes}] = {{0}};")
            elif kind == "buf":
                self.var(f"BUF{pre}{s}", f"{CTYPE[dtype]} *", "NULL")
                self.var(f"BL{pre}{s}", "int64_t")
                self.var(f"BC{pre}{s}", "int64_t")
            else:
                self.var(f"S{pre}{s}", "double" if kind == "float" else "int64_t")
            self.var(f"RS{pre}{s}", "double")
        for t in unit.tus.values():
            self.var(f"T{pre}{t.n}", "int64_t")
            self.var(f"RT{pre}{t.n}", "double")
            if t.vl:
                self.var(f"ACT{pre}{t.n}", "int64_t")

    def aval(self, a: Any) -> tuple[str, str]:
        """(value, ready) C expressions of an access-unit operand, read now."""
        pre = self.unit.pre if self.unit else ""
        if isinstance(a, Reg):
            if a.cls == "p":
                return f"P{pre}{a.n}", "ac"
            if a.cls == "s":
                return f"S{pre}{a.n}", f"RS{pre}{a.n}"
            if a.cls == "t":
                return f"T{pre}{a.n}", f"RT{pre}{a.n}"
        if isinstance(a, int) and not isinstance(a, bool):
            return f"((int64_t){a}LL)", "ac"
        raise Unsupported(f"access operand {a!r}")

    def int_stream(self, a: Any) -> None:
        if isinstance(a, Reg) and a.cls == "s" and self.unit is not None and self.unit.stypes[a.n][0] != "int":
            raise Unsupported("an index, bound or ALU operand read from a float or vector stream")

    def issue(self, ins: Instr) -> None:
        a, unit = ins.args, self.unit
        assert unit is not None
        pre, dst = unit.pre, ins.args[0].n
        if ins.op == "mask":
            t = a[1].n
            self(f"for (int64_t l = 0; l < {unit.tus[t].vl}; l++) S{pre}{dst}[l] = l < ACT{pre}{t};")
            self(f"RS{pre}{dst} = RT{pre}{t};")
            return
        k = self.new_site()
        it = self.var(f"it{k}", "double")
        if ins.op == "alu":
            self.int_stream(a[2])
            self.int_stream(a[3])
            self(f"{it} = ac; ac += xp_access_slot; is_elements += 1;")
            (x, tx), (y, ty) = self.aval(a[2]), self.aval(a[3])
            if a[1] == "div":
                self(f"if ({y} == 0) {self.fail()}")
            self(f"S{pre}{dst} = {ALU_STREAM[a[1]].format(x=x, y=y)};")
            self(f"RS{pre}{dst} = maxd(maxd({it}, {tx}), {ty}) + 1.0;")
            return
        m: Mem = a[1]
        last = m.index[-1] if m.index else None
        if isinstance(last, Reg) and last.cls == "t" and unit.tus[last.n].vl:
            self.issue_vector(ins, last.n, k)
            return
        self(f"{it} = ac; ac += xp_access_slot; is_elements += 1;")
        idx = self.indices(m, it)
        fl = self.flat(m, idx)
        dn = self.var(f"dn{k}", "double")
        self.request(self.addr(m.sym, fl), it, dn)
        if idx:
            self.count_lookup(m.sym, idx[-1])
        kind = unit.stypes[dst][0]
        elem = self.elem(m.sym, fl)
        value = to_double(self.p.symbols[m.sym].dtype, elem) if kind == "float" and m.sym not in self.virtual \
            else f"({'double' if kind == 'float' else 'int64_t'}){elem}"
        self(f"S{pre}{dst} = {value};")
        self(f"RS{pre}{dst} = {dn};")

    def indices(self, m: Mem, when: str) -> list[str]:
        """The index values of `m`; `when` (the issue time) rises to the time each is ready."""
        idx = []
        for i in m.index:
            self.int_stream(i)
            v, r = self.aval(i)
            self(f"{when} = maxd({when}, {r});")
            idx.append(v)
        return idx

    def request(self, addr: str, when: str, done: str) -> None:
        """One access-unit request: it leaves at `when`, or once the request `outstanding` before it is done."""
        self(f"if (wn == outst) {when} = maxd({when}, win[wh]);")
        self(f"{done} = mem_access(mem, {addr}, {when}, lacc, mind({when}, P->d), 0);")
        self(f"if ({done} < 0.0) {self.fail()}")
        self(f"if (wn == outst) {{ win[wh] = {done}; wh = wh + 1 == outst ? 0 : wh + 1; }} "
             f"else {{ win[wh + wn < outst ? wh + wn : wh + wn - outst] = {done}; wn += 1; }}")
        self("is_requests += 1;")

    def issue_vector(self, ins: Instr, t: int, k: int) -> None:
        """access.AccessUnit.issue_vector: one slot per lane on, one request per line covered."""
        a, unit = ins.args, self.unit
        assert unit is not None
        pre, dst, m = unit.pre, a[0].n, a[1]
        vl = unit.tus[t].vl
        n, w = self.var(f"n{k}", "int64_t"), f"it{k}"
        self(f"{n} = ACT{pre}{t}; {w} = ac; ac += xp_access_slot * {n}; is_elements += {n};")
        idx = self.indices(m, w)
        first = self.flat(m, idx)
        self.block(f"if ({n} > 0)")
        self.flat(m, idx[:-1] + [f"{idx[-1]} + {n} - 1"])
        self.close()
        self(f"for (int64_t l = 0; l < {vl}; l++) S{pre}{dst}[l] = l < {n} ? {self.elem(m.sym, f'{first} + l')} : 0;")
        dn, d, tw, ln = (self.var(f"{x}{k}", ty) for x, ty in
                         (("dn", "double"), ("d", "double"), ("tw", "double"), ("ln", "int64_t")))
        self(f"{dn} = {w};")
        self.block(f"if ({n} > 0)")
        lo, hi = self.addr(m.sym, first), self.addr(m.sym, f"{first} + {n} - 1")
        self.block(f"for ({ln} = {lo} / mem->lv[3]; {ln} <= {hi} / mem->lv[3]; {ln}++)")
        self(f"{tw} = {w};")
        self.request(f"{ln} * mem->lv[3]", tw, d)
        self(f"if ({d} > {dn}) {dn} = {d};")
        self.close()
        self.count_lookup(m.sym, idx[-1])
        self.close()
        self(f"RS{pre}{dst} = {dn};")
        for b in unit.watchers.get(dst, ()):
            buf, bl, bc = f"BUF{pre}{b}", f"BL{pre}{b}", f"BC{pre}{b}"
            ct = CTYPE[unit.stypes[dst][1]]
            self(f"if ({bl} + {n} > {bc}) {{ {bc} = 2 * {bc} > {bl} + {n} ? 2 * {bc} : {bl} + {n} + 64; "
                 f"{buf} = ({ct} *)realloc({buf}, (size_t){bc} * sizeof({ct})); }}")
            self(f"memcpy({buf} + {bl}, S{pre}{dst}, (size_t){n} * sizeof({ct})); {bl} += {n};")
            self(f"if ({dn} > RS{pre}{b}) RS{pre}{b} = {dn};")

    def walk(self, tu: _TU) -> None:
        """access.AccessUnit.walk: one traversal of `tu`, with its events and child traversals."""
        unit = self.unit
        assert unit is not None
        pre = unit.pre
        k = self.new_site()
        names = []
        for b, nm in zip(tu.bounds, ("lb", "ub", "st")):
            self.int_stream(b)
            v, r = self.aval(b)
            self.var(f"{nm}{k}", "int64_t")
            self.var(f"{nm}r{k}", "double")
            self(f"{nm}{k} = {v}; {nm}r{k} = {r};")
            names.append(f"{nm}{k}")
        self(f"if (st{k} <= 0) {self.fail()}")
        br = self.var(f"br{k}", "double")
        self(f"{br} = maxd(maxd(lbr{k}, ubr{k}), str{k});")
        for b in tu.buffers:
            self(f"BL{pre}{b} = 0; RS{pre}{b} = ac;")
        self.fire(tu, "beg")
        i = self.var(f"i{k}", "int64_t")
        self.block(f"for ({i} = lb{k}; {i} < ub{k}; {i} += st{k})")
        if tu.vl:
            self(f"ACT{pre}{tu.n} = mini({tu.vl}, ub{k} - {i});")
        self(f"T{pre}{tu.n} = {i}; RT{pre}{tu.n} = maxd(ac, {br});")
        for s in tu.streams:
            self.issue(s)
        self.fire(tu, "ite")
        for child in tu.children:
            self.walk(unit.tus[child])
        self.close()
        self.fire(tu, "end")

    def fire(self, tu: _TU, event: str) -> None:
        """access.AccessUnit.fire plus the engine's dispatch: pushes, the token, then the callback inline."""
        unit = self.unit
        assert unit is not None
        for rule in tu.rules.get(event, ()):
            token = rule.args[3] if len(rule.args) > 3 else None
            if token is None:
                if rule.args[2]:
                    raise Unsupported("operands pushed without a token")
                continue
            k = self.new_site()
            fr = self.var(f"fr{k}", "double")
            self(f"{fr} = ac;")
            pushes: list[Push] = []
            for j, a in enumerate(rule.args[2]):
                push = self.describe_push(a)
                pv, sq = self.var(f"pv{k}_{j}", "double"), self.var(f"sq{k}_{j}", "int64_t")
                self(f"{pv} = {push.ready};")
                self(f"ac = q_push(q, {push.nbytes}, ac);")
                self(f"if (ac < 0.0) {self.fail()}")
                self(f"{sq} = q->tail - 1; if ({pv} > {fr}) {fr} = {pv}; is_operands += 1; "
                     f"is_operand_bytes += {push.nbytes};")
                push.ready, push.seq = pv, sq
                pushes.append(push)
            tq, tr = self.var(f"tq{k}", "int64_t"), self.var(f"tr{k}", "double")
            self("ac = q_push(q, 8, ac);")
            self(f"if (ac < 0.0) {self.fail()}")
            self(f"{tq} = q->tail - 1; {tr} = {fr} > ac ? {fr} : ac; is_tokens += 1;")
            self.dispatch(unit.acc.name, token, tr, tq)
            label = f"{unit.acc.name}.{token}"
            if label not in self.labels:
                raise Unsupported(f"no case label {label}")
            saved = self.pushes
            self.pushes = pushes
            self.region(self.labels[label], "ret", f"RET{k}")
            if self.pushes:
                raise Unsupported(f"{label} pops fewer operands than its rule pushes")
            self.pushes = saved
            self(f"RET{k}:;")
            self("is_callbacks += 1;")
            self(f"if (P->fe > xp_max_cycles) {self.fail(MAX_CYCLES)}")

    def dispatch(self, program: str, token: int, ready: str, seq: str) -> None:
        """execute.Core.dispatch: read the token, test for the end, jump (predicted: the last case)."""
        k = self.new_site()
        t, c = self.var(f"dt{k}", "double"), self.var(f"dc{k}", "double")
        self(f"CNT[{OP_NAMES.index('dispatch')}] += 1;")
        self(f"{t} = pipe_dispatch(P, 0); if (lpop > {t}) {t} = lpop; if ({ready} > {t}) {t} = {ready};")
        self(f"{t} = pipe_issue(P, {ExecuteUnit.GROUPS.index('load')}, {t}); lpop = {t}; "
             f"q->pop[{seq} & q->mask] = {t};")
        self(f"{c} = {t} + xp_queue_latency;")
        for group, latency in (("int_alu", "int_alu_latency"), ("branch", "branch_latency")):
            self(f"{c} = pipe_issue(P, {ExecuteUnit.GROUPS.index(group)}, pipe_next(P, {c}, CAT_TOKEN, {c})) "
                 f"+ xp_{latency};")
        self(f"pipe_retire(P, {c}, CAT_TOKEN);")
        n = self.acc_index[program]
        self(f"{{ int64_t seen = pv{n} + 1; pv{n} = {token}LL; if (nx{n}[seen] != {token}LL) {{ "
             f"nx{n}[seen] = {token}LL; pipe_wait(P, {ready}, CAT_TOKEN); "
             f"pipe_wait(P, {c} + xp_mispredict_penalty, CAT_MISPREDICT); }} }}")

    def describe_push(self, a: Any) -> Push:
        unit = self.unit
        assert unit is not None
        v, r = self.aval(a)
        if isinstance(a, Reg) and a.cls == "t" and unit.tus[a.n].vl:
            vl = unit.tus[a.n].vl
            return Push(v, r, "iota", str(8 * vl), VType("i64", vl))
        if isinstance(a, Reg) and a.cls == "s":
            kind, dtype, lanes = unit.stypes[a.n]
            if kind == "vec":
                nbytes = max(8, (lanes + 7) // 8) if dtype == "bool" else lanes * _isz(dtype)
                return Push(v, r, "vec", str(nbytes), VType(dtype, lanes))
            if kind == "buf":
                return Push(v, r, "buf", f"BL{unit.pre}{a.n} * {_isz(dtype)}", VType(dtype, 0),
                            stream=f"{unit.pre}{a.n}")
            return Push(v, r, kind, str(_isz(dtype)) if a.n in unit.loaded else "8")
        return Push(v, r, "int", "8")


class Retype(Exception):
    """A pop gave a vector register its type; generation restarts with it known."""

    def __init__(self, vtypes: dict[int, VType]):
        super().__init__("retype")
        self.vtypes = dict(vtypes)


class _Unit:
    """The static shape of one access program: its TU tree, the streams of each TU, stream types."""

    def __init__(self, acc: Access, pre: str):
        self.acc = acc
        self.pre = pre  # prefix of this program's C variables (stream and TU numbers are per program)
        self.tus: dict[int, _TU] = {}
        self.roots: list[int] = []
        self.top_streams: list[Instr] = []
        self.stream_of: dict[int, int | None] = {}
        self.stypes: dict[int, tuple[str, str, int]] = {}  # stream -> (kind, dtype, lanes)
        self.watchers: dict[int, list[int]] = {}
        self.loaded: set[int] = set()  # scalar memory streams: their operands take the element's bytes

    def declare(self, ins: Instr, symbols: list[Any]) -> None:
        a = ins.args
        if ins.op in ("tu", "vtu"):
            parent = a[4].n if len(a) > 4 else None
            tu = _TU(a[0].n, list(a[1:4]), parent, a[3] if ins.op == "vtu" else 0,
                     0 if parent is None else self.tus[parent].depth + 1)
            self.tus[tu.n] = tu
            (self.tus[parent].children if parent is not None else self.roots).append(tu.n)
        elif ins.op == "mask":
            self.stream_of[a[0].n] = a[1].n
            self.tus[a[1].n].streams.append(ins)
            self.stypes[a[0].n] = ("vec", "bool", self.tus[a[1].n].vl)
        elif ins.op == "buf":
            src = a[1].n
            if self.stypes.get(src, ("",))[0] != "vec" or self.stypes[src][1] == "bool":
                raise Unsupported("a buffer of a stream that is not a vector memory stream")
            home = self.stream_of[src]
            self.stream_of[a[0].n] = self.tus[home].parent if home is not None else None
            self.watchers.setdefault(src, []).append(a[0].n)
            if home is not None:
                self.tus[home].buffers.append(a[0].n)
            self.stypes[a[0].n] = ("buf", self.stypes[src][1], 0)
        elif ins.op in ("mem", "alu"):
            args = list(a[1].index) if ins.op == "mem" else a[2:]
            home = self.deepest(args)
            self.stream_of[a[0].n] = home
            (self.tus[home].streams if home is not None else self.top_streams).append(ins)
            if ins.op == "alu":
                self.stypes[a[0].n] = ("int", "i64", 0)
                return
            dtype = symbols[a[1].sym].dtype
            last = a[1].index[-1] if a[1].index else None
            if isinstance(last, Reg) and last.cls == "t" and self.tus[last.n].vl:
                self.stypes[a[0].n] = ("vec", dtype, self.tus[last.n].vl)
            else:
                self.stypes[a[0].n] = ("float" if _is_float(dtype) else "int", dtype, 0)
                self.loaded.add(a[0].n)
        elif ins.op == "on":
            self.tus[a[0].n].rules.setdefault(a[1], []).append(ins)

    def deepest(self, args: list[Any]) -> int | None:
        best: int | None = None
        for a in args:
            o = None
            if isinstance(a, Reg) and a.cls == "t":
                o = a.n
            elif isinstance(a, Reg) and a.cls == "s":
                o = self.stream_of[a.n]
            if o is not None and (best is None or self.tus[o].depth > self.tus[best].depth):
                best = o
        return best


def _tokens(acc: Access) -> list[int]:
    """The tokens an access program's rules push."""
    return [i.args[3] for i in acc.body if i.op == "on" and len(i.args) > 3]


def _flat_args(args: list[Any]) -> list[Any]:
    out: list[Any] = []
    for a in args:
        if isinstance(a, list):
            out.extend(_flat_args(a))
        elif isinstance(a, Mem):
            out.extend(a.index)
        else:
            out.append(a)
    return out


def generate(program: Program, virtual: frozenset[int] = frozenset(), simd_bits: int = 512) -> str:
    """C source of `simulate` for `program` (engine.py passes its arguments)."""
    vtypes: dict[int, VType] = {}
    for _ in range(32):
        try:
            return Generator(program, virtual, vtypes, simd_bits).generate()
        except Retype as r:
            vtypes = r.vtypes
    raise Unsupported("vector register types do not settle")
