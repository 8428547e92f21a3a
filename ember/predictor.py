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
