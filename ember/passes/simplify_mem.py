"""simplify-mem: gathers and scatters over consecutive indices become contiguous masked loads/stores.

A `loop.gather` / `loop.scatter` whose index vector is `loop.iota %c` touches elements c, c+1, ...:
that is `loop.vload` / `loop.vstore` at start `c` (one access per cache line instead of one per lane).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.core import Op, new_op
from ..ir.rewrite import replace_op, replace_uses
from .base import Pass


@dataclass
class SimplifyMem(Pass):
    name = "simplify-mem"
    summary = "gathers/scatters over consecutive indices become contiguous masked loads/stores"

    def run(self, module: Op) -> None:
        for op in list(module.walk()):
            if op.name not in ("loop.gather", "loop.scatter"):
                continue
            idx = op.operands[-2]
            src = idx.owner
            if not (isinstance(src, Op) and src.name == "loop.iota"):
                continue
            name = "loop.vload" if op.name == "loop.gather" else "loop.vstore"
            new = new_op(name, op.operands[:-2] + [src.operands[0], op.operands[-1]], [r.type for r in op.results],
                         dict(op.attrs), loc=op.loc)
            for old, r in zip(op.results, new.results):
                r.name = old.name
                replace_uses(module, old, r)
            replace_op(op, new)
        for op in list(module.walk()):  # iotas nothing reads any more
            if op.name == "loop.iota" and op.parent is not None:
                users = [u for u in module.walk() if op.result in u.operands]
                if not users:
                    op.parent.ops.remove(op)
