"""The machine's branch predictors, as rules both the simulator and the compiler's cost model run.

They sit beside the machine description, below `passes/` and `sim/`, so that `choose-plan`'s estimate of
mispredicted dispatches calls the very rule the simulator times (and the fast engine's generated C repeats;
tests/test_blocks.py compares the two), rather than a copy of it.
"""

from __future__ import annotations

from collections.abc import Hashable


class DispatchPredictor:
    """The dispatch jump's indirect-branch predictor: it predicts the case that followed the previous token the
    last time that token was seen (a one-token history, as a history-based indirect predictor learns).  One per
    access program: its tokens form their own sequence."""

    def __init__(self) -> None:
        self.last: Hashable | None = None  # the token before; None before the first
        self.follows: dict[Hashable | None, Hashable] = {}  # a token -> the token that came after it last time

    def miss(self, token: Hashable) -> bool:
        """Dispatch `token`: whether the jump was mispredicted.  The predictor then learns it."""
        seen, self.last = self.last, token
        if self.follows.get(seen) != token:
            self.follows[seen] = token
            return True
        return False


class BranchPredictor:
    """The conditional branches' predictor: gshare (S. McFarling, "Combining Branch Predictors", DEC WRL TN-36,
    1993).  A table of 2-bit saturating counters, indexed by the branch's position in the code XOR the outcomes of
    the last `history` conditional branches; a counter of 2 or 3 predicts taken.  Every counter starts at 1 (weakly
    not taken).  One per core, shared by the main program and every callback, as a core's predictor is."""

    def __init__(self, entries: int, history: int):
        self.mask = entries - 1  # entries is a power of two (machine validation)
        self.hmask = (1 << history) - 1
        self.history = 0
        self.counters = bytearray([1]) * entries

    def miss(self, pc: int, taken: bool) -> bool:
        """The branch at `pc` went `taken`: whether it was mispredicted.  The predictor then learns it."""
        i = (pc ^ self.history) & self.mask
        c = self.counters[i]
        self.counters[i] = min(c + 1, 3) if taken else max(c - 1, 0)
        self.history = ((self.history << 1) | taken) & self.hmask
        return (c >= 2) != taken
