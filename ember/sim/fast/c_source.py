"""Program → C source of one function that simulates it exactly as the reference engine does.

Why generated code: the reference interprets every instruction through dictionaries and objects;
here each instruction becomes a few typed C statements, registers become local variables, labels
become C labels, the access unit's traversal-unit nest becomes nested loops, and each callback is
inlined where the rule that fires its token sits.  The order of every timed step (issue slots,
cache calls, queue pushes, pops) is the reference's, statement for statement, and the arithmetic
rounds as Python's does (double, rounded to float where the reference rounds), which is what makes
the statistics identical.  The cache, DRAM and queue models are runtime.h.  The access unit's part of
the function is access_code.py, the core's memory instructions memory_code.py; what they share is cdefs.py.
The function is `int64_t simulate(Args *x)`: what it reads and writes crosses in the named structures of
boundary.py, whose fields it copies into locals at its entry (the machine's numbers into `xp_` locals, the symbols'
shapes and base addresses into `d`/`b` locals) and whose totals it stores at its end.

What is not handled raises `Unsupported` with the reason; the engine then runs the reference engine.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from ... import isa
from ...backend.dae import Instr, Label, Mem, Program, Reg
from ...backend.registers import vector_shape
from ...machine import ExecuteUnit
from ..execute import operands
from ..trace import callback_ids
from .access_code import AccessCode, Unit
from .boundary import (
    CATEGORIES,
    FLOAT_TOTALS,
    INT_TOTALS,
    NUMBERS,
    c_declarations,
    c_layout_table,
    count_field,
)
from .cdefs import (
    CTYPE,
    ERROR,
    INTERRUPTED,
    MAX_CYCLES,
    Push,
    Unsupported,
    VType,
    c_int,
    elem_bytes,
    from_double,
    is_float,
    to_double,
)
from .memory_code import MemoryCode

BRANCH = isa.of_kind("branch", "jump")

# the totals counted in `fs_` and `is_` locals (the pipeline counts the others), stored into x->totals at the end
LOCAL_FLOAT_TOTALS = ("host_cycles", "host_flops", "host_bytes", "access_busy")
LOCAL_INT_TOTALS = ("elements", "requests", "tokens", "operands", "operand_bytes", "callbacks", "lookups", "prefetches")
SIGNATURE = "int64_t simulate(Args *x)"  # everything crosses in x (boundary.py)
# at the entry, the pointers the body uses all along become locals (the symbols S, the memory system, the queue, the
# instruction counters), as the machine's numbers become `xp_` locals
PROLOGUE = ("Symbol *S = x->sym; Mem *mem = x->mem; Queue *q = x->q; Counts *CNT = &x->counts; "
            "Branches *BR = x->br; Trace *TR = x->tr;")
RELEASE = ("void release(Args *x) {  /* frees the elements the generated code allocated */\n"
           "    for (int64_t k = 0; k < x->nsym; k++)\n"
           "        if (x->sym[k].owned) { free(x->sym[k].data); x->sym[k].data = 0; x->sym[k].owned = 0; }\n}\n")


class Generator(AccessCode, MemoryCode):
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
        self.arrays: dict[str, str] = {}  # heap arrays (Generator.array) -> their size in bytes, a C expression
        self.token_index: dict[str, dict[int, int]] = {}  # access program -> token -> its index (dispatch)
        self.body: list[str] = []
        self.depth = 1
        self.site = 0
        self.vtypes = dict(vtypes)
        self.pushes: list[Push] | None = None  # operands of the rule whose callback is being inlined
        self.unit: Unit | None = None
        self.acc_index = {a.name: i for i, a in enumerate(program.access)}
        self.callback_ids = callback_ids(program)  # what a callback's trace event names
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

    def vbytes(self, n: int) -> str:
        """The byte size of vector register n's heap array (a C expression), declaring the array."""
        vt = self.vtypes[n]
        return self.arrays[self.array(f"V{n}", CTYPE[vt.dtype], vt.lanes)]

    def array(self, name: str, ctype: str, count: int) -> str:
        """A zeroed array of `count` elements on the heap, never on the C stack (a vector may be thousands of
        lanes wide); `restrict`, as nothing else points into it; freed on the way out."""
        if name not in self.arrays:
            self.decls[name] = f"{ctype} *restrict {name} = ({ctype} *)calloc({max(count, 1)}, sizeof({ctype}));"
            self.arrays[name] = f"{count} * sizeof({ctype})"
        return name

    def new_site(self) -> int:
        self.site += 1
        return self.site

    def limit(self, clock: str) -> str:
        """The check at each backward branch, callback and traversal-unit iteration (cycle_limit.py): past the
        cycle limit, or asked to stop (Ctrl-C: engine._State.run sets x->stop from another thread)."""
        return (f"if ({clock} > xp_max_cycles) {self.fail(MAX_CYCLES, clock)} "
                f"if (*(volatile int64_t *)&x->stop) {self.fail(INTERRUPTED)}")

    def fail(self, code: int = ERROR, clock: str = "") -> str:
        """A C statement stopping the run with `code`; a stop at the cycle limit records the `clock` it checked."""
        if clock:
            return f"{{ x->totals.cycles = {clock}; status = {code}; goto FAIL; }}"
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
        """What a vector instruction writes (registers.vector_shape); a pop is typed by the rule that pushes."""
        return vector_shape(ins, self.vtypes, self.p.symbols)

    # --- the function --------------------------------------------------------------------
    def generate(self) -> str:
        for k, s in enumerate(self.p.symbols):
            ct = CTYPE[s.dtype]
            self.var(f"a{k}", f"{ct} *", f"({ct} *)S[{k}].data")
            for d in range(self.rank[k]):
                self.var(f"d{k}_{d}", "int64_t", f"S[{k}].dims[{d}]")
            self.var(f"b{k}", "int64_t", f"S[{k}].base")
            if k in self.scratch:
                self.var(f"sz{k}", "int64_t", f"S[{k}].known ? d{k}_0 * {elem_bytes(s.dtype)} : -1")
                self.var(f"cap{k}", "int64_t", f"S[{k}].known ? d{k}_0 : 0")
        self.var("ac", "double", "0.0")
        for name in LOCAL_FLOAT_TOTALS:
            self.var(f"fs_{name}", "double", "0.0")
        for name in LOCAL_INT_TOTALS:
            self.var(f"is_{name}", "int64_t", "0")
        self.var("status", "int64_t", "0")
        for name in NUMBERS:
            self.var(f"xp_{name}", "double", f"x->xp.{name}")
        self.var("outst", "int64_t", "(int64_t)xp_outstanding")
        self.var("lacc", "int64_t", "x->access_level")
        self.var("lb0", "int64_t", "mem->lv[0].line_bytes")  # the line size mem_access uses at every level
        self.var("win", "double *", "(double *)calloc((size_t)(outst > 0 ? outst : 1), sizeof(double))")
        self.var("wn", "int64_t", "0")
        self.var("lpop", "double", "0.0")
        self.var("cb0", "double", "0.0")  # the dispatch of the callback running now (its trace event's start)
        self.var("pp", "Pipe", "{0}")
        self.var("P", "Pipe *", "&pp")
        self.var("pf", "int64_t", "(int64_t)xp_prefetch_lines")
        groups = ExecuteUnit.GROUPS
        per_cycle = ", ".join(f"(int64_t)xp_per_cycle_{g}" for g in groups)
        hold = ", ".join(f"(int64_t)xp_hold_{g}" for g in groups)
        self(f"{{ int64_t pc[{len(groups)}] = {{{per_cycle}}}, hd[{len(groups)}] = {{{hold}}}; "
             "if (pipe_init(P, xp_issue_slot, (int64_t)xp_rob_entries, (int64_t)xp_store_buffer, "
             f"(int64_t)xp_miss_slots, {len(groups)}, pc, hd)) {self.fail()} }}")
        self("P->tr = TR;")
        for a in self.p.access:  # execute.Core.dispatch's predictor: the last token, what followed each token
            # (tokens by their index in `token_index`: pv the last one's, nx[1 + k] the one that followed token k)
            n, tokens = self.acc_index[a.name], sorted(set(a.tokens()))
            self.token_index[a.name] = {t: j for j, t in enumerate(tokens)}
            self.var(f"pv{n}", "int64_t", "-1")
            self.array(f"nx{n}", "int64_t", len(tokens) + 1)
            self(f"for (int64_t j = 0; j < {len(tokens) + 1}; j++) nx{n}[j] = -1;")
        self.region(0, "halt", "END_MAIN")
        self("END_MAIN:")
        self("pipe_drain(P); pipe_wait(P, mem->dram_end, CAT_STORE);")
        self.totals()
        self("status = 0;")
        for v, vt in sorted(self.vtypes.items()):
            self.array(f"V{v}", CTYPE[vt.dtype], vt.lanes)
        self("FAIL:")
        self("free(win); pipe_free(P);")
        for name in self.decls:
            if name.startswith("BUF") or name in self.arrays:
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
        runtime = resources.files("ember.sim.fast").joinpath("runtime.h").read_text()
        decls = ["    " + d for d in self.decls.values()]
        unset = " || ".join(f"!{name}" for name in self.arrays)
        allocated = [f"    if ({unset}) {self.fail()}"] if self.arrays else []
        return "\n".join([runtime, c_declarations(), RELEASE, SIGNATURE + " {", "    " + PROLOGUE, *decls, *allocated,
                          *self.body, "}", "", c_layout_table()])

    def totals(self) -> None:
        """The run's totals into x->totals, each by its name (from the locals and the pipeline that count them)."""
        kept = {"cycles": "P->fe", "instructions": "P->instructions",
                **{f"stall_{c}": f"P->stalls[{i}]" for i, c in enumerate(CATEGORIES)},
                **{f"pipe_{g}": f"P->ports[{i}].count" for i, g in enumerate(ExecuteUnit.GROUPS)},
                **{name: f"fs_{name}" for name in LOCAL_FLOAT_TOTALS},
                **{name: f"is_{name}" for name in LOCAL_INT_TOTALS}}
        for name in FLOAT_TOTALS + INT_TOTALS:
            self(f"x->totals.{name} = {kept[name]};")

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
                done = self.plain(ins)
                to = self.labels[ins.args[-1].name]
                # a taken backward branch checks the cycle limit (cycle_limit.py), as execute.Core.run_from does
                jump = f"{{ {self.limit('P->fe')} goto {names[to]}; }}" \
                    if to <= pc else f"goto {names[to]};"
                row = isa.OPS[op]
                if row.kind == "jump":
                    self(jump)
                else:  # predicted by gshare (execute.Core.step): a miss restarts the front end after it resolves
                    k = self.new_site()
                    self.var(f"tk{k}", "int")
                    self(f"tk{k} = ({row.c.format(a=self.ival(ins.args[0]), b=self.ival(ins.args[1]))}) != 0;")
                    self(f"if (branch_miss(BR, {pc}, tk{k})) {{ if (TR) tr_add(TR, TK_BRANCH_MISS, TRACK_CORE, "
                         f"{done}, {done}, 0.0, 0); pipe_wait(P, {done} + xp_mispredict_penalty, CAT_MISPREDICT); }}")
                    self(f"if (tk{k}) {jump}")
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
        self(f"CNT->{count_field(ins.base)} += 1; {t} = pipe_dispatch(P, {stores});")
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

    def plain(self, ins: Instr) -> str:
        """The timing of an instruction with a fixed latency, piece by piece and uop after uop
        (execute.Core.step); returns the C variable holding its completion."""
        t0 = self.begin(ins)
        k0 = self.new_site()
        t, done = self.var(f"u{k0}", "double"), self.var(f"ud{k0}", "double")
        self(f"{t} = {t0}; {done} = {t0};")
        for p in range(self.pieces(self.vector_bits(ins))):
            for k, uop in enumerate(isa.uops_of(isa.OPS[ins.base], ins.args)):
                if p or k:
                    src = t if k else t0
                    self(f"{t} = pipe_next(P, {t}, CAT_COMPUTE, {src});")
                self(f"{t} = pipe_issue(P, {ExecuteUnit.GROUPS.index(uop.pipe)}, {t}) + xp_{uop.latency};")
            self(f"if ({t} > {done}) {done} = {t};")
        self.done(ins, done, "compute")
        return done

    def pieces(self, bits: int) -> int:
        """execute.Core.pieces: machine vectors `bits` of vector span (the generated code is per machine)."""
        return max(1, -(-bits // self.simd_bits))

    def vector_bits(self, ins: Instr) -> int:
        """execute.Core.vector_bits, from the registers' static types."""
        a, row = ins.args, isa.OPS[ins.base]
        suffix = elem_bytes(ins.op.split(".", 1)[1]) if "." in ins.op else 0
        if row.span == "a":
            x = self.vtypes[a[1].n]
            return x.lanes * 8 * max(elem_bytes(x.dtype), suffix)
        if row.span == "b":
            x = self.vtypes[a[2].n]
            return x.lanes * 8 * elem_bytes(x.dtype)
        # a splat is one broadcast however wide: its machine vectors are copies of one register (as execute.py)
        return {"splat": lambda: min(a[2] * 8 * (suffix or 4), self.simd_bits), "iota": lambda: a[2] * 64,
                "mask": lambda: a[3] * 8}.get(row.kind, lambda: 0)()

    def ival(self, a: Any) -> str:
        if isinstance(a, Reg) and a.cls in "rf":
            return f"{a.cls.upper()}{a.n}"
        if isinstance(a, bool) or not isinstance(a, (int, float)):
            raise Unsupported(f"operand {a!r}")
        if isinstance(a, float):
            return "(-INFINITY)" if a == float("-inf") else "INFINITY" if a == float("inf") else \
                "NAN" if a != a else repr(a)
        return c_int(a)

    def instr(self, ins: Instr) -> None:
        """One instruction by its row of the instruction table: the timing (plain, or the memory system's), then
        its value."""
        a = ins.args
        row = isa.OPS.get(ins.base)
        if row is None or row.unit != "execute" or row.kind in ("end", "branch", "jump"):
            raise Unsupported(f"instruction '{ins.op}'")
        kind = row.kind
        if row.uops:
            self.plain(ins)
        if kind == "int":
            self.need(a[0], "r")
            for line in row.c_lines(f"R{a[0].n}", self.fail(), a=self.ival(a[1]), b=self.ival(a[2])):
                self(line)
        elif kind == "float":
            val = row.c.format(a=self.fval(a[1]), b=self.fval(a[2]))
            self(f"F{a[0].n} = {self.round(ins.op.split('.')[1], val)};")
        elif kind == "move":
            self.assign(a[0], a[1])
        elif kind == "select":
            if not (a[0].cls == a[2].cls == a[3].cls) or a[0].cls not in "rf":
                raise Unsupported("sel mixing register kinds")
            self(f"{self.ival(a[0])} = {self.ival(a[1])} ? {self.ival(a[2])} : {self.ival(a[3])};")
        elif kind == "convert":
            self(f"F{a[0].n} = {self.round(ins.op.split('.')[1], f'(double)({self.ival(a[1])})')};")
        elif kind == "fma":  # operands rounded to float32 first, as floats.fma32 takes them
            self(f"F{a[0].n} = {row.c.format(a=self.fval(a[1]), b=self.fval(a[2]), c=self.fval(a[3]))};")
        elif kind == "vfma":
            types = [self.vtypes.get(r.n) for r in a[:4]]
            if any(t != VType("f32", types[1].lanes if types[1] else 0) for t in types):
                raise Unsupported("'vfma' on vectors that are not all float32 of one lane count")
            lane = row.c.format(a=f"V{a[1].n}[l]", b=f"V{a[2].n}[l]", c=f"V{a[3].n}[l]")
            self(f"for (int64_t l = 0; l < {types[1].lanes}; l++) V{a[0].n}[l] = {lane};")
        elif kind == "load":
            self.load(ins)
        elif kind == "store":
            self.store(ins)
        elif kind == "dim":
            n, d = a[1].n, a[2]
            if not 0 <= d < self.rank[n]:
                raise Unsupported("dim of a missing dimension")
            self(f"if (!S[{n}].known) {self.fail()}")
            self(f"R{a[0].n} = d{n}_{d};")
        elif kind == "alloc":
            self.alloc(a[0].n, [self.ival(x) for x in a[1]])
        elif kind == "pop":
            self.pop(ins, a[0])
        elif kind == "popb":
            self.popb(ins, a[0].n)
        elif kind == "vfloat":
            self.vec_binary(ins, row)
        elif kind in ("vload", "vstore"):
            self.vector_contiguous(ins, kind == "vstore")
        elif kind in ("gather", "scatter"):
            self.vector_indexed(ins, kind == "scatter")
        elif kind in ("splat", "iota", "mask"):
            vt = self.vtypes[a[0].n]
            if kind == "splat":
                val = from_double(vt.dtype, self.ival(a[1])) if vt.dtype in ("f16", "bf16", "i1", "bool") else \
                    float_to_int(vt.dtype, self.ival(a[1])) if a[1].cls == "f" and not is_float(vt.dtype) else \
                    f"({CTYPE[vt.dtype]})({self.ival(a[1])})"
            else:
                val = row.c.format(a=self.ival(a[1]), b=self.ival(a[2]) if kind == "mask" else "")
            self(f"for (int64_t l = 0; l < {vt.lanes}; l++) V{a[0].n}[l] = {val};")
        elif kind == "vselect":
            vt = self.vtypes[a[0].n]
            if self.vtypes.get(a[2].n) != vt or self.vtypes.get(a[3].n) != vt:
                raise Unsupported("vsel of vectors of different types")
            if isinstance(a[1], Reg) and a[1].cls == "v":
                self(f"for (int64_t l = 0; l < {vt.lanes}; l++) V{a[0].n}[l] = V{a[1].n}[l] ? V{a[2].n}[l] : "
                     f"V{a[3].n}[l];")
            else:
                self(f"memmove(V{a[0].n}, {self.ival(a[1])} ? V{a[2].n} : V{a[3].n}, {self.vbytes(a[0].n)});")
        elif kind == "vconvert":
            src, dst = self.vtypes.get(a[1].n), self.vtypes[a[0].n]
            if src is None or dst.lanes != src.lanes or a[0].n == a[1].n:
                raise Unsupported("vcvt changing the lane count or in place")
            lane = f"V{a[1].n}[l]"
            if dst.dtype in ("i1", "bool"):  # nonzero, as numpy converts to bool
                lane = from_double(dst.dtype, to_double(src.dtype, lane) if is_float(src.dtype) else lane)
            elif is_float(src.dtype) and not is_float(dst.dtype):  # integers.to_integer: no C undefined behaviour
                lane = float_to_int(dst.dtype, to_double(src.dtype, lane))
            elif {src.dtype, dst.dtype} & {"f16", "bf16"}:  # through double, which widens either exactly
                lane = from_double(dst.dtype, to_double(src.dtype, lane))
            else:
                lane = f"({CTYPE[dst.dtype]}){lane}"
            self(f"for (int64_t l = 0; l < {dst.lanes}; l++) V{a[0].n}[l] = {lane};")
        elif kind == "host":
            self.host(ins)
        elif kind == "run":
            self.run(ins)
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
            self(f"memmove(V{dst.n}, V{src.n}, {self.vbytes(dst.n)});")
        else:
            raise Unsupported(f"'{dst}' assigned from {src}")

    def place(self, n: int, nbytes: str) -> None:
        """Tensors.set: a new page-aligned base address for symbol n."""
        self(f"b{n} = x->next_addr; S[{n}].base = b{n}; x->next_addr += ({nbytes} + 4095) / 4096 * 4096 + 4096;")

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
        size, nbytes = self.var(f"z{k}", "int64_t"), self.var(f"zb{k}", "int64_t")
        ov = self.var(f"ov{k}", "int")
        self(f"{size} = 1; {ov} = 0;")
        for d in range(len(dims)):  # an element count or byte size past int64 is an error, not an overflow
            self(f"{ov} |= __builtin_mul_overflow({size}, y{k}_{d}, &{size});")
        self(f"{ov} |= __builtin_mul_overflow({size}, (int64_t){elem_bytes(s.dtype)}, &{nbytes});")
        self(f"if ({ov}) {self.fail()}")
        ct = CTYPE[s.dtype]
        self(f"if (S[{n}].owned) free(S[{n}].data);")
        self(f"a{n} = ({ct} *)calloc((size_t){size} + 1, sizeof({ct})); S[{n}].data = a{n}; S[{n}].owned = 1; "
             f"S[{n}].known = 1;")
        self(f"if (!a{n}) {self.fail()}")
        fill = 1 if s.dtype in ("i1", "bool") else isa.UNDEFINED_BYTE  # isa.undefined's bytes
        self(f"memset(a{n}, {fill}, (size_t){nbytes});")
        for d in range(len(dims)):
            self(f"d{n}_{d} = y{k}_{d}; S[{n}].dims[{d}] = d{n}_{d};")
        self.place(n, nbytes)

    def vec_binary(self, ins: Instr, row: isa.Opcode) -> None:
        a = ins.args
        x, y, d = self.vtypes.get(a[1].n), self.vtypes.get(a[2].n), self.vtypes.get(a[0].n)
        if x is None or x != y or d != x or not is_float(x.dtype):
            raise Unsupported(f"'{ins.op}' on vectors of different or non-float types")
        half = x.dtype in ("f16", "bf16")  # numpy and ml_dtypes compute in float32 and round once: so does double
        xa = to_double(x.dtype, f"V{a[1].n}[l]") if half else f"V{a[1].n}[l]"
        xb = to_double(x.dtype, f"V{a[2].n}[l]") if half else f"V{a[2].n}[l]"
        expr = row.c.format(a=xa, b=xb, d="d" if x.dtype == "f64" or half else "")
        self(f"for (int64_t l = 0; l < {x.lanes}; l++) V{a[0].n}[l] = {from_double(x.dtype, expr) if half else expr};")

    def host(self, ins: Instr) -> None:
        """Host ONNX ops call back into Python (ember.sim.host), as the reference engine runs them."""
        _, _, out_syms, _ = ins.args
        index = self.p.code.index(ins)
        self.begin(ins)
        self(f"if (x->host({index}) < 0.0) {self.fail()}")
        for s in out_syms:
            n = s.n
            self(f"a{n} = ({CTYPE[self.p.symbols[n].dtype]} *)S[{n}].data; b{n} = S[{n}].base;")
            for d in range(self.rank[n]):
                self(f"d{n}_{d} = S[{n}].dims[{d}];")
            if n in self.scratch:
                self(f"sz{n} = d{n}_0 * {elem_bytes(self.p.symbols[n].dtype)}; cap{n} = 0;")
        self(f"pipe_drain(P); if (TR) tr_add(TR, TK_HOST, TRACK_CORE, P->fe, P->fe + x->cost.cycles, {index}, 0); "
             "P->fe += x->cost.cycles; pipe_retire(P, P->fe, CAT_COMPUTE);")
        self("fs_host_cycles += x->cost.cycles; fs_host_flops += x->cost.flops; fs_host_bytes += x->cost.bytes;")

    # --- pops: bound to the pushes of the rule whose callback is being inlined -----------
    def take(self, ins: Instr, push: Push) -> None:
        """execute.Core.pop_entry: read in order once the operand is there, ready a queue latency later."""
        t0 = self.begin(ins)
        vector = ins.base == "pop" and ins.args[0].cls == "v" and push.vtype is not None
        k = self.new_site()
        t = self.var(f"pt{k}", "double")
        self(f"{t} = {t0};")
        n = self.pieces(push.vtype.lanes * 8 * elem_bytes(push.vtype.dtype)) if vector and push.vtype else 1
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
        if self.pushes is None and self.unit is not None and self.unit.fifo:
            self.pop_fifo(ins, dst)
            return
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
                self(f"memcpy(V{dst.n}, {push.value}, {self.vbytes(dst.n)});")
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

    def pop_fifo(self, ins: Instr, dst: Reg) -> None:
        """A pop in FIFO mode (access_code.enqueue): the oldest waiting operand, which must be a scalar of a kind the
        register takes (execute._popped; a mismatch, or none waiting, stops the run for the reference to word)."""
        if dst.cls not in ("r", "f"):
            raise Unsupported(f"a pop into {dst} in an access program that pushes operands without a token")
        k = self.new_site()
        o = self.var(f"fo{k}", "int64_t")
        self(f"if (q->oph == q->opt) {self.fail()}")
        self(f"{o} = q->oph++ & q->mask;")
        if dst.cls == "r":
            self(f"if (q->opk[{o}] != 0) {self.fail()}")
        self.take(ins, Push(f"q->opi[{o}]", f"q->opr[{o}]", "int", "8", seq=f"q->ops[{o}]"))
        self(f"R{dst.n} = q->opi[{o}];" if dst.cls == "r" else f"F{dst.n} = q->opf[{o}];")

    def popb(self, ins: Instr, n: int) -> None:
        """Tensors.set_scratch: the buffer keeps its base address while it is no larger than the last one."""
        s = self.p.symbols[n]
        push = self.next_push()
        if push.kind != "buf" or push.vtype is None or push.vtype.dtype != s.dtype:
            raise Unsupported("popb of an operand that is not a buffer of the symbol's type")
        if self.rank[n] != 1 or s.shape[0] is not None:
            raise Unsupported("popb into a symbol that is not of shape [?]")
        self.take(ins, push)
        ln, ct, isz = f"BL{push.stream}", CTYPE[s.dtype], elem_bytes(s.dtype)
        self(f"if (sz{n} < {ln} * {isz}) {{ b{n} = x->next_addr; S[{n}].base = b{n}; "
             f"x->next_addr += ({ln} * {isz} + 4095) / 4096 * 4096 + 4096; }}")
        self(f"sz{n} = {ln} * {isz};")
        self.block(f"if (cap{n} < {ln} || !S[{n}].owned)")
        self(f"cap{n} = {ln} > 2 * cap{n} ? {ln} : 2 * cap{n};")
        self(f"if (S[{n}].owned) free(S[{n}].data);")
        self(f"a{n} = ({ct} *)malloc((size_t)(cap{n} + 1) * sizeof({ct})); S[{n}].data = a{n}; S[{n}].owned = 1;")
        self.close()
        self(f"memcpy(a{n}, BUF{push.stream}, (size_t){ln} * sizeof({ct}));")
        self(f"d{n}_0 = {ln}; S[{n}].dims[0] = {ln}; S[{n}].known = 1;")
        self(f"if ({ln} > 0 && mem_place(mem, b{n}, {ln} * {isz}, lacc, {push.ready}, lpop) < 0) "
             f"{self.fail()}")

    def next_push(self) -> Push:
        if not self.pushes:
            raise Unsupported("a pop that no operand of the firing rule matches")
        return self.pushes.pop(0)

def float_to_int(dtype: str, expr: str) -> str:
    """integers.to_integer in C: a double truncated into integer type `dtype`, its minimum when out of range."""
    if dtype == "u8":
        return f"(uint8_t)f2i({expr}, 0.0, 256.0, 0)"
    half = 1 << (8 * elem_bytes(dtype) - 1)
    return f"({CTYPE[dtype]})f2i({expr}, -{half}.0, {half}.0, {c_int(-half)})"


class Retype(Exception):
    """A pop gave a vector register its type; generation restarts with it known."""

    def __init__(self, vtypes: dict[int, VType]):
        super().__init__("retype")
        self.vtypes = dict(vtypes)


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
    """C source of `simulate` for `program` (engine.py fills its `Args`)."""
    vtypes: dict[int, VType] = {}
    for _ in range(32):
        try:
            return Generator(program, virtual, vtypes, simd_bits).generate()
        except Retype as r:
            vtypes = r.vtypes
    raise Unsupported("vector register types do not settle")
