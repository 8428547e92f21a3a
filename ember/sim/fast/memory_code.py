"""The core's memory instructions in the generated function: bounds-checked element indices, loads through the
cache model with store-to-load forwarding, stores committed at retirement, and the vector loads, stores,
gathers and scatters, each timed as execute.Core times it.  A mixin of c_source.Generator, whose emission
helpers (variables, sites, issue and completion) it uses."""

from __future__ import annotations

from ... import isa
from ...backend.dae import Instr, Mem, Reg
from ...machine import ExecuteUnit
from ..tensors import is_table
from .cdefs import CTYPE, Unsupported, elem_bytes, from_double, is_float, to_double, typed_read


class MemoryCode:
    """Emission of `ld`, `st`, `vld`/`vst`, `vgather`/`vscatter` and the address and line helpers they share."""

    def flat(self, m: Mem, idx: list[str], span: int = 1) -> str:
        """Statements checking `idx` against the shape of @sym (Tensors.flat_index; with a `span` of more than one
        byte, Tensors.typed_index: the read's last byte too); returns the flat index."""
        n = m.sym
        if len(idx) != self.rank[n]:
            raise Unsupported(f"@{n} indexed with {len(idx)} indices but has rank {self.rank[n]}")
        k = self.new_site()
        names = []
        for d, x in enumerate(idx):
            names.append(self.var(f"x{k}_{d}", "int64_t"))
            self(f"x{k}_{d} = {x};")
        conds = "".join(f" || x{k}_{d} < 0 || x{k}_{d} >= d{n}_{d}" for d in range(len(idx)))
        if span > 1:
            conds += f" || x{k}_{len(idx) - 1} > d{n}_{len(idx) - 1} - {span}"
        self(f"if (!S[{n}].known{conds}) {self.fail()}")
        expr = names[0] if names else "0"
        for d in range(1, len(names)):
            expr = f"({expr}) * d{n}_{d} + {names[d]}"
        fl = self.var(f"fl{k}", "int64_t")
        self(f"{fl} = {expr};")
        return fl

    def addr(self, n: int, flat: str) -> str:
        return f"(b{n} + ({flat}) * {elem_bytes(self.p.symbols[n].dtype)})"

    def count_lookup(self, n: int, column: str) -> None:
        """Tensors.is_lookup: a load starting at column 0 of a table (tensors.is_table) reads one row."""
        if is_table(self.p.symbols[n]):
            self(f"if ({column} == 0) is_lookups += 1;")

    def lines(self, addr: str, nbytes: str, e: str, write: bool, forward: bool) -> str:
        """execute.Core.lines (and, for a load, its store-to-load forwarding): a C variable holding the arrival."""
        k = self.new_site()
        d = self.var(f"ld{k}", "double")
        self(f"{d} = core_lines(P, mem, {addr}, {nbytes}, {e}, {int(write)}, pf, &is_prefetches);")
        self(f"if ({d} < 0.0) {self.fail()}")
        if forward:
            f = self.var(f"fw{k}", "double")
            self(f"{f} = forwarded(P, {addr}, {addr} + {nbytes}); "
                 f"if ({f} >= 0.0 && {f} + xp_l1_latency > {d}) {d} = {f} + xp_l1_latency;")
        return d

    def elem(self, n: int, index: str) -> str:
        return "0" if n in self.virtual else f"a{n}[{index}]"

    def load(self, ins: Instr) -> None:
        a = ins.args
        m: Mem = a[1]
        idx = [self.ival(i) for i in m.index]
        typed = ins.op.split(".")[1] if "." in ins.op else None  # a typed read of a byte tensor
        isz = elem_bytes(typed or self.p.symbols[m.sym].dtype)
        fl = self.flat(m, idx, isz if typed else 1)
        e = self.issue_at("load", self.begin(ins))
        self.done(ins, self.lines(self.addr(m.sym, fl), str(isz), e, False, True), "load")
        if idx:
            self.count_lookup(m.sym, idx[-1])
        if typed:
            if a[0].cls not in "rf" or is_float(typed) != (a[0].cls == "f"):
                raise Unsupported(f"'{ins.op}' into {a[0]}")
            value = "0" if m.sym in self.virtual else typed_read(typed, f"&a{m.sym}[{fl}]")
            self(f"{'F' if a[0].cls == 'f' else 'R'}{a[0].n} = {value};")
        elif a[0].cls == "f":
            self(f"F{a[0].n} = {to_double(self.p.symbols[m.sym].dtype, self.elem(m.sym, fl))};")
        elif a[0].cls == "r":
            if is_float(self.p.symbols[m.sym].dtype):
                raise Unsupported("a float loaded into an integer register")
            self(f"R{a[0].n} = (int64_t){self.elem(m.sym, fl)};")
        else:
            raise Unsupported("ld into a vector register")

    def store(self, ins: Instr) -> None:
        a = ins.args
        m: Mem = a[1]
        fl = self.flat(m, [self.ival(i) for i in m.index])
        if a[0].cls == "f" and not is_float(self.p.symbols[m.sym].dtype):
            raise Unsupported("a float stored into an integer tensor")
        if m.sym not in self.virtual:
            self(f"a{m.sym}[{fl}] = {from_double(self.p.symbols[m.sym].dtype, self.ival(a[0]))};")
        e = self.issue_at("store", self.begin(ins, "1"))
        self.commit([(self.addr(m.sym, fl), str(elem_bytes(self.p.symbols[m.sym].dtype)), e)], e)

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

    def stream(self, addr: str, nbytes: str, e: str) -> None:
        """execute.Core.stream_lines: a non-temporal store retires, its lines go around the caches through
        write-combining buffers (runtime.h core_stream), and it commits once they all have one."""
        k = self.new_site()
        r, h = self.var(f"r{k}", "double"), self.var(f"h{k}", "double")
        self(f"{r} = pipe_retire(P, {e}, CAT_STORE); {h} = core_stream(P, mem, {addr}, {nbytes}, {r});")
        self(f"if ({h} < 0.0) {self.fail()}")
        self(f"pipe_commit(P, {addr}, {addr} + {nbytes}, {e}, {r}, {h});")

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
        for p in range(self.pieces(mt.lanes * 8 * elem_bytes(vt.dtype))):  # a piece per machine vector spanned
            self(f"{t} = pipe_next(P, {e}, CAT_{'STORE' if store else 'LOAD'}, {t0});" if p else f"{t} = {t0};")
            if not store:
                self.vector_load_uop(t)
            self(f"{e} = pipe_issue(P, {ExecuteUnit.GROUPS.index('store' if store else 'load')}, {t});")
        self.block(f"if ({on0} < 0)")
        if store:
            self(f"pipe_retire(P, {e}, CAT_STORE);")
        else:
            self(f"memset(V{a[0].n}, 0, {self.vbytes(a[0].n)});")
            self.done(ins, e, "load")
        self.close()
        self.block("else")
        lo = self.flat(m, idx[:-1] + [f"wadd({idx[-1]}, {on0})"])
        hi = self.flat(m, idx[:-1] + [f"wadd({idx[-1]}, {onl})"])
        isz = elem_bytes(self.p.symbols[m.sym].dtype)
        addr, nbytes = self.var(f"va{k}", "int64_t"), self.var(f"vn{k}", "int64_t")
        self(f"{addr} = {self.addr(m.sym, lo)}; {nbytes} = {self.addr(m.sym, hi)} - {addr} + {isz};")
        base = self.var(f"base{k}", "int64_t")
        self(f"{base} = {lo} - {on0};")
        if store:
            if m.sym not in self.virtual:
                self(f"for (int64_t l = 0; l < {mt.lanes}; l++) if (V{a[2].n}[l]) a{m.sym}[{base} + l] = V{a[0].n}[l];")
            if isa.OPS[ins.base].nontemporal:
                self.stream(addr, nbytes, e)
            else:
                self.commit([(addr, nbytes, e)], e)
        else:
            self(f"for (int64_t l = 0; l < {mt.lanes}; l++) V{a[0].n}[l] = V{a[2].n}[l] ? "
                 f"{self.elem(m.sym, f'{base} + l')} : 0;")
            self.count_lookup(m.sym, f"wadd({idx[-1]}, {on0})")
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
        it = self.vtypes.get(lanes.n)
        if it is None or is_float(it.dtype) or it.dtype in ("i1", "bool"):
            raise Unsupported("a gather whose index vector is not of integers")
        if vt.dtype != self.p.symbols[m.sym].dtype:
            raise Unsupported("a gather converting types")
        k = self.new_site()
        prefix = [self.ival(i) for i in m.index[:-1]]
        ct, isz = CTYPE[vt.dtype], elem_bytes(vt.dtype)
        n_on = self.var(f"non{k}", "int64_t")
        self(f"{n_on} = 0; for (int64_t l = 0; l < {mt.lanes}; l++) {n_on} += V{a[2].n}[l] != 0;")
        t = self.begin(ins, n_on if store else "0")
        if store:
            self.array(f"pa{k}", "int64_t", mt.lanes)
            self.array(f"pe{k}", "double", mt.lanes)
            self.array(f"pl{k}", "double", mt.lanes)
        else:
            self.array(f"tmp{k}", ct, mt.lanes)
            self(f"memset(tmp{k}, 0, {self.arrays[f'tmp{k}']});")
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
                 f"1, pf, &is_prefetches); if (pl{k}[j] < 0.0) {self.fail()} }}")
            self(f"for (int64_t j = 0; j < {np_}; j++) if (pe{k}[j] > {dn}) {dn} = pe{k}[j];")
            self(f"{dn} = pipe_retire(P, {dn}, CAT_STORE);")
            self(f"for (int64_t j = 0; j < {np_}; j++) pipe_commit(P, pa{k}[j], pa{k}[j] + {isz}, pe{k}[j], {dn}, "
                 f"pl{k}[j]);")
        else:
            self(f"memcpy(V{a[0].n}, tmp{k}, {self.arrays[f'tmp{k}']});")
            self.done(ins, f"{dn} + xp_gather_latency", "load")

    def vector_load_uop(self, t: str) -> None:
        """execute.Core.vector_load_uop: the ALU-port uop of a 512-bit load, then the load's dispatch (into `t`)."""
        self(f"pipe_issue(P, {ExecuteUnit.GROUPS.index('int_alu')}, {t}); {t} = pipe_next(P, {t}, CAT_COMPUTE, {t});")
