"""The command-line tools, each a console script (`ember-sim = ember.cli.sim:main`).

Importing a tool's module imports what it needs (numpy, onnx) before the command can handle anything; a Ctrl-C in
that moment ended the tool with a traceback, or, inside a C extension's initialisation, a crash.  So when a console
script imports this package, Ctrl-C is only recorded until the command starts (common.Command.main), which reports
it as an interruption.  The handler is set first thing, with the C module, so that the window before it is only
Python's own start-up.
"""

import _signal
import sys

_came: list[int] = []


def _record(signum: int, frame: object) -> None:
    _came.append(signum)


if sys.argv and sys.argv[0].rpartition("/")[2].startswith("ember-") \
        and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _record)


def started() -> bool:
    """The command starts: Ctrl-C acts again; True when one came while its modules were imported."""
    if _signal.getsignal(_signal.SIGINT) is _record:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    came = bool(_came)
    _came.clear()
    return came
