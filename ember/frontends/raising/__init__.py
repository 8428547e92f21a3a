"""Compressed embeddings written with tensor ops, raised to their `emb` ops after any frontend's import.

A model that writes ROBE, DHE or a tensor train with ordinary operators imports op by op, in any format, as
host arithmetic, `emb.gather`s and MatMuls.  Each raising finds one such lookup in the imported block by what it
computes (matching.py) and replaces it with `emb.robe`, `emb.dhe` or `emb.ttbag`; whatever does not match stays
as imported.  The frontends differ only in how they read a constant's data and make new constants and host ops,
which they pass in.

    matching.py  reading the block, evaluating its integer arithmetic on probe indices, replacing a pooled bag
    robe.py      ROBE (Hetu's robe kernels)
    dhe.py       DHE (Hetu's learn_hash kernel, uniform encoding, nn.Linear layers)
    tt.py        TT-Rec's tensor trains in FBTT-Embedding's layout
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ...ir.core import Block, Value
from .dhe import raise_dhe
from .matching import Const, Consts, Host
from .robe import raise_robe
from .tt import raise_tt

RAISINGS = (raise_robe, raise_dhe, raise_tt)


def raise_all(block: Block, results: list[Value], consts: Consts, const: Const, host: Host) -> list[Value]:
    """Every raising over `block`; returns `results` with the values they replaced mapped to the new ops'."""
    for raising in RAISINGS:
        results = raising(block, results, consts, const, host)
    return results


@contextmanager
def kept_as_written() -> Iterator[None]:
    """No raising while the block runs: the lookups import op by op (`ember-import --no-raise`), to compare the
    two forms or to keep batched host GEMMs where the raised op would run its MLP or chain on the core."""
    global RAISINGS
    saved, RAISINGS = RAISINGS, ()
    try:
        yield
    finally:
        RAISINGS = saved
