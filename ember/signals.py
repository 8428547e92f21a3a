"""Signals that unwind: SIGTERM, SIGINT and SIGHUP run the `finally` blocks of what they interrupt (temporary files
removed, worker processes stopped, a compiler killed) before the process ends as the signal would have ended it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from types import FrameType

from .ir.diagnostics import EmberError

SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, n))


class Interrupted(KeyboardInterrupt):
    """Raised by the temporary signal handler so that `finally` blocks run.  A KeyboardInterrupt, so that what
    already winds down on Ctrl-C (the fast engine's wait for its C thread) does so on SIGTERM and SIGHUP too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def signals_unwind(what: str) -> Iterator[Callable[[], AbstractContextManager[None]]]:
    """While the block runs, SIGTERM, SIGINT and SIGHUP unwind it (running its `finally`) instead of ending the
    process on the spot; afterwards the caller's own handlers are back and the signal is delivered to them as
    if it had just arrived: the default action ends the process by that signal, a Python handler is called.

    It yields `held`: inside `with held():` a signal only waits, and unwinds at the end of that block, so that
    a statement such as `proc = Popen(...)` either finishes (and cleanup knows the child) or never starts it.
    Signals the caller ignores stay ignored.  Outside the main thread handlers cannot be set, so there
    only `finally` cleans up (exceptions, not signals).
    """
    previous: dict[int, object] = {}
    pending: list[int] = []
    armed = [True]
    holding = [False]

    def handler(signum: int, frame: FrameType | None) -> None:
        pending.append(signum)
        if armed[0] and not holding[0]:  # the first signal unwinds; another one must not cut the cleanup short
            armed[0] = False
            raise Interrupted(signum)

    @contextmanager
    def held() -> Iterator[None]:
        holding[0] = True
        try:
            yield
        finally:
            holding[0] = False
        if pending and armed[0]:
            armed[0] = False
            raise Interrupted(pending[0])

    interrupted = False
    try:  # from the first handler on: a signal arriving while the rest are set still restores them all
        for s in SIGNALS if threading.current_thread() is threading.main_thread() else ():
            old = signal.getsignal(s)
            if old is signal.SIG_IGN or old is None:  # ignored, or set outside Python (cannot be restored)
                continue
            previous[s] = old
            signal.signal(s, handler)
        yield held
    except Interrupted:
        interrupted = True
    finally:
        armed[0] = False
        for s, old in previous.items():
            signal.signal(s, old)  # type: ignore[arg-type]
        if pending:  # delivered now to the caller's handler, as if it had just arrived
            old = previous[pending[0]]
            if callable(old):
                old(pending[0], None)
            else:
                signal.raise_signal(pending[0])  # SIG_DFL: the process ends by this signal, as it would have
    if interrupted:  # the caller's handler let the process go on
        raise EmberError(f"{what} was interrupted by {signal.Signals(pending[0]).name}")


@contextmanager
def sigint_deferred() -> Iterator[None]:
    """Ctrl-C waits until the block ends, then acts.  For importing a library with C extensions on first use
    (onnxruntime, torch, matplotlib): a KeyboardInterrupt raised inside an extension's initialisation can leave it
    half made, and the process crashes or hangs later."""
    old = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(old):
        yield  # only the main thread is given the signal; one ignored or left to the system needs no deferring
        return
    came: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if came:
        old(signal.SIGINT, None)
