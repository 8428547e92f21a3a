"""The access unit's part of the generated function: the traversal-unit nest as C loops, its streams, the
marshaling rules' pushes, and at each token the dispatch and the callback inlined (c_source.py emits the
callback's instructions).  A mixin of c_source.Generator, whose emission helpers it uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...backend.dae import Access, Instr, Mem, Reg
from ...isa import OPS
from ...machine import ExecuteUnit
from ..access import inert_tus
from .boundary import count_field
from .cdefs import (
    CTYPE,
    Push,
    Unsupported,
    VType,
    c_int,
    elem_bytes,
    is_float,
    to_double,
    typed_read,
)


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


class AccessCode:
    """Generator methods for `run` and everything under it (the instance is a c_source.Generator)."""

    def run(self, ins: Instr) -> None:
        """A `run`: the access unit's nest as loops, each token's callback inlined at its rule."""
        acc = next((x for x in self.p.access if x.name == ins.args[0]), None)
        if acc is None or len(ins.args) - 1 != acc.params:
            raise Unsupported("a run the reference engine rejects")
        if self.unit is not None:
            raise Unsupported("a run inside a callback")
        unit = Unit(acc, f"{self.acc_index[acc.name]}_")
        unit.inert = inert_tus(acc)
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
        self(f"ac = {t}; {ac0} = ac; {stall0} = q->stall; wn = 0;")
        traced = self.var(f"tr{k}", "int64_t")
        self(f"{traced} = TR ? tr_add(TR, TK_RUN, TRACK_ACCESS, ac, INFINITY, {self.p.access.index(acc)}, 0) : -1;")
        self.declare_streams(unit)
        if unit.fifo:
            self("q->oph = 0; q->opt = 0;")
        for s in unit.top_streams:
            self.issue(s)
        for r in unit.roots:
            self.walk(unit.tus[r])
        if unit.fifo:  # engine._Run.run_access: operands left unpopped are an error
            self(f"if (q->oph != q->opt) {self.fail()}")
        self("pipe_wait(P, ac, CAT_TOKEN);")
        self(f"if ({traced} >= 0) TR->t1[{traced}] = ac;")
        self(f"fs_access_busy += ac - {ac0} - (q->stall - {stall0});")
        self.unit = None

    def declare_streams(self, unit: Unit) -> None:
        """Each stream's and TU's variables, zeroed at every run: a value read before this run gives it one is 0
        (access.AccessUnit.blank), as in the reference's new unit per run."""
        pre = unit.pre
        for s, (kind, dtype, lanes) in unit.stypes.items():
            if kind == "vec":
                self.array(f"S{pre}{s}", CTYPE[dtype], lanes)
                self(f"memset(S{pre}{s}, 0, {self.arrays[f'S{pre}{s}']});")
            elif kind == "buf":
                self.var(f"BUF{pre}{s}", f"{CTYPE[dtype]} *", "NULL")
                self.var(f"BL{pre}{s}", "int64_t")
                self.var(f"BC{pre}{s}", "int64_t")
                self(f"BL{pre}{s} = 0;")
            else:
                self.var(f"S{pre}{s}", "double" if kind == "float" else "int64_t")
                self(f"S{pre}{s} = 0;")
            self.var(f"RS{pre}{s}", "double")
            self(f"RS{pre}{s} = 0.0;")
        for t in unit.tus.values():
            self.var(f"T{pre}{t.n}", "int64_t")
            self.var(f"RT{pre}{t.n}", "double")
            self(f"T{pre}{t.n} = 0; RT{pre}{t.n} = 0.0;")
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
            return c_int(a), "ac"
        raise Unsupported(f"access operand {a!r}")

    def int_stream(self, a: Any) -> None:
        if isinstance(a, Reg) and a.cls == "s" and self.unit is not None and self.unit.stypes[a.n][0] != "int":
            raise Unsupported("an index, bound or ALU operand read from a float or vector stream")

    def issue(self, ins: Instr) -> None:
        a, unit = ins.args, self.unit
        assert unit is not None
        pre, dst = unit.pre, ins.args[0].n
        if ins.base == "mask":
            t = a[1].n
            self(f"for (int64_t l = 0; l < {unit.tus[t].vl}; l++) S{pre}{dst}[l] = l < ACT{pre}{t};")
            self(f"RS{pre}{dst} = RT{pre}{t};")
            return
        k = self.new_site()
        it = self.var(f"it{k}", "double")
        if ins.base == "alu":
            self.int_stream(a[2])
            self.int_stream(a[3])
            self(f"{it} = ac; ac += xp_access_slot; is_elements += 1;")
            (x, tx), (y, ty) = self.aval(a[2]), self.aval(a[3])
            for line in OPS[a[1]].c_lines(f"S{pre}{dst}", self.fail(), a=x, b=y):  # the execute unit's op
                self(line)
            self(f"RS{pre}{dst} = maxd(maxd({it}, {tx}), {ty}) + 1.0;")
            return
        m: Mem = a[1]
        last = m.index[-1] if m.index else None
        if isinstance(last, Reg) and last.cls == "t" and unit.tus[last.n].vl:
            self.issue_vector(ins, last.n, k)
            return
        self(f"{it} = ac; ac += xp_access_slot; is_elements += 1;")
        idx = self.indices(m, it)
        typed = ins.op.split(".")[1] if "." in ins.op else None  # a typed read of a byte tensor
        span = elem_bytes(typed) if typed else 1
        fl = self.flat(m, idx, span)
        dn = self.var(f"dn{k}", "double")
        self.request(self.addr(m.sym, fl), it, dn, span)
        if idx:
            self.count_lookup(m.sym, idx[-1])
        kind = unit.stypes[dst][0]
        elem = self.elem(m.sym, fl)
        if typed:
            value = "0" if m.sym in self.virtual else typed_read(typed, f"&a{m.sym}[{fl}]")
        elif kind == "float" and m.sym not in self.virtual:
            value = to_double(self.p.symbols[m.sym].dtype, elem)
        else:
            value = f"({'double' if kind == 'float' else 'int64_t'}){elem}"
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

    def request(self, addr: str, when: str, done: str, span: int = 1) -> None:
        """access.AccessUnit.slot_free/take_slot: it leaves at `when`, or once the slot free earliest is.  A typed
        read of `span` bytes that crosses a line boundary also fetches the next line, in the same slot."""
        self(f"if (wn == outst) {when} = maxd({when}, win[0]);")
        self(f"{done} = mem_access(mem, {addr}, {when}, lacc, 0);")
        self(f"if ({done} < 0.0) {self.fail()}")
        if span > 1:
            last = f"({addr}) + {span - 1}"
            self(f"if (({last}) / lb0 != ({addr}) / lb0) {{ double d2 = mem_access(mem, {last}, {when}, "
                 f"lacc, 0); if (d2 < 0.0) {self.fail()} {done} = maxd({done}, d2); }}")
        self(f"if (wn == outst) heap_replace(win, wn, {done}); else heap_push(win, wn++, {done});")
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
        self.block(f"for ({ln} = {lo} / lb0; {ln} <= {hi} / lb0; {ln}++)")
        self(f"{tw} = {w};")
        self.request(f"{ln} * lb0", tw, d)
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
        self(f"if (st{k} <= 0 || tu_overflows(ub{k}, st{k})) {self.fail()}")  # so i += st cannot overflow
        if tu.n in unit.inert:  # access.inert_tus: the last iteration leaves the state all of them leave
            self(f"if (ub{k} > lb{k}) lb{k} = tu_last(lb{k}, ub{k}, st{k});")
        br = self.var(f"br{k}", "double")
        self(f"{br} = maxd(maxd(lbr{k}, ubr{k}), str{k});")
        for b in tu.buffers:
            self(f"BL{pre}{b} = 0; RS{pre}{b} = ac;")
        self.fire(tu, "beg")
        i = self.var(f"i{k}", "int64_t")
        self.block(f"for ({i} = lb{k}; {i} < ub{k}; {i} += st{k})")
        self(self.limit("ac"))
        if tu.vl:
            self(f"ACT{pre}{tu.n} = lanes_left({tu.vl}, ub{k}, {i});")
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
            if token is None and not rule.args[2]:
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
                if unit.fifo:
                    self.enqueue(push)
                pushes.append(push)
            if token is None:  # its operands wait in the FIFO for the callbacks of later tokens
                continue
            tq, tr = self.var(f"tq{k}", "int64_t"), self.var(f"tr{k}", "double")
            self("ac = q_push(q, 8, ac);")
            self(f"if (ac < 0.0) {self.fail()}")
            self(f"{tq} = q->tail - 1; {tr} = {fr} > ac ? {fr} : ac; is_tokens += 1;")
            self.dispatch(unit.acc.name, token, tr, tq)
            label = f"{unit.acc.name}.{token}"
            if label not in self.labels:
                raise Unsupported(f"no case label {label}")
            saved = self.pushes
            self.pushes = None if unit.fifo else pushes  # None: pops take from the FIFO (c_source.pop_fifo)
            self.region(self.labels[label], "ret", f"RET{k}")
            if self.pushes:
                raise Unsupported(f"{label} pops fewer operands than its rule pushes")
            self.pushes = saved
            self(f"RET{k}:;")
            callback = self.callback_ids[(unit.acc.name, token)]
            self(f"if (TR) tr_add(TR, TK_CALLBACK, TRACK_CORE, cb0, P->fe, {callback}, 0);")
            self("is_callbacks += 1;")
            self(self.limit("P->fe"))

    def enqueue(self, push: Push) -> None:
        """FIFO mode: the operand joins the runtime FIFO that pops read (an access program with a rule that pushes
        without a token: how many operands wait for a callback is then known only at run time)."""
        if push.kind not in ("int", "float"):
            what = "a buffer" if push.kind == "buf" else "a vector"
            raise Unsupported(f"{what} operand of an access program that pushes operands without a token")
        value = f"(int64_t)({push.value})" if push.kind == "int" else "0"
        self(f"{{ int64_t o = q->opt++ & q->mask; q->ops[o] = {push.seq}; q->opr[o] = {push.ready}; "
             f"q->opk[o] = {int(push.kind == 'float')}; q->opi[o] = {value}; q->opf[o] = (double)({push.value}); }}")

    def dispatch(self, program: str, token: int, ready: str, seq: str) -> None:
        """execute.Core.dispatch: read the token, test for the end, jump (predicted: the last case)."""
        k = self.new_site()
        t, c = self.var(f"dt{k}", "double"), self.var(f"dc{k}", "double")
        self(f"CNT->{count_field('dispatch')} += 1;")
        self(f"{t} = pipe_dispatch(P, 0); cb0 = P->d; if (lpop > {t}) {t} = lpop; if ({ready} > {t}) {t} = {ready};")
        self(f"{t} = pipe_issue(P, {ExecuteUnit.GROUPS.index('load')}, {t}); lpop = {t}; "
             f"q->pop[{seq} & q->mask] = {t};")
        self(f"{c} = {t} + xp_queue_latency;")
        for group, latency in (("int_alu", "int_alu_latency"), ("branch", "branch_latency")):
            self(f"{c} = pipe_issue(P, {ExecuteUnit.GROUPS.index(group)}, pipe_next(P, {c}, CAT_TOKEN, {c})) "
                 f"+ xp_{latency};")
        self(f"pipe_retire(P, {c}, CAT_TOKEN);")
        n, j = self.acc_index[program], self.token_index[program][token]
        self(f"if (dispatch_miss(nx{n}, &pv{n}, {j})) {{ if (TR) tr_add(TR, TK_DISPATCH_MISS, TRACK_CORE, {c}, "
             f"{c}, 0.0, 0); pipe_wait(P, {ready}, CAT_TOKEN); pipe_wait(P, {c} + xp_mispredict_penalty, "
             "CAT_MISPREDICT); }")

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
                nbytes = max(8, (lanes + 7) // 8) if dtype == "bool" else lanes * elem_bytes(dtype)
                return Push(v, r, "vec", str(nbytes), VType(dtype, lanes))
            if kind == "buf":
                return Push(v, r, "buf", f"BL{unit.pre}{a.n} * {elem_bytes(dtype)}", VType(dtype, 0),
                            stream=f"{unit.pre}{a.n}")
            return Push(v, r, kind, str(elem_bytes(dtype)) if a.n in unit.loaded else "8")
        return Push(v, r, "int", "8")


class Unit:
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
        self.inert: set[int] = set()  # TUs whose last iteration alone is run (access.inert_tus)
        # FIFO mode: some rule pushes operands without a token, so every operand goes through a runtime FIFO
        self.fifo = any(i.base == "on" and len(i.args) == 3 and i.args[2] for i in acc.body)

    def declare(self, ins: Instr, symbols: list[Any]) -> None:
        a = ins.args
        if ins.base in ("tu", "vtu"):
            parent = a[4].n if len(a) > 4 else None
            tu = _TU(a[0].n, list(a[1:4]), parent, a[3] if ins.base == "vtu" else 0,
                     0 if parent is None else self.tus[parent].depth + 1)
            self.tus[tu.n] = tu
            (self.tus[parent].children if parent is not None else self.roots).append(tu.n)
        elif ins.base == "mask":
            self.stream_of[a[0].n] = a[1].n
            self.tus[a[1].n].streams.append(ins)
            self.stypes[a[0].n] = ("vec", "bool", self.tus[a[1].n].vl)
        elif ins.base == "buf":
            src = a[1].n
            if self.stypes.get(src, ("",))[0] != "vec" or self.stypes[src][1] == "bool":
                raise Unsupported("a buffer of a stream that is not a vector memory stream")
            home = self.stream_of[src]
            self.stream_of[a[0].n] = self.tus[home].parent if home is not None else None
            self.watchers.setdefault(src, []).append(a[0].n)
            if home is not None:
                self.tus[home].buffers.append(a[0].n)
            self.stypes[a[0].n] = ("buf", self.stypes[src][1], 0)
        elif ins.base in ("mem", "alu"):
            args = list(a[1].index) if ins.base == "mem" else a[2:]
            home = self.deepest(args)
            self.stream_of[a[0].n] = home
            (self.tus[home].streams if home is not None else self.top_streams).append(ins)
            if ins.base == "alu":
                self.stypes[a[0].n] = ("int", "i64", 0)
                return
            dtype = symbols[a[1].sym].dtype
            last = a[1].index[-1] if a[1].index else None
            if isinstance(last, Reg) and last.cls == "t" and self.tus[last.n].vl:
                self.stypes[a[0].n] = ("vec", dtype, self.tus[last.n].vl)
            else:  # a typed read (mem.T of a byte tensor) gives a value of its suffix type
                dtype = ins.op.split(".")[1] if "." in ins.op else dtype
                self.stypes[a[0].n] = ("float" if is_float(dtype) else "int", dtype, 0)
                self.loaded.add(a[0].n)
        elif ins.base == "on":
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
