"""What every command shares: `-` for stdin/stdout, atomic outputs, one-line errors, exit status 1."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..ir.diagnostics import EmberError

if TYPE_CHECKING:
    from ..backend.dae import Program
    from ..machine import Machine
    from ..sim.trace import Events, TraceOptions

F = TypeVar("F", bound=Callable[..., Any])


class Command(click.Command):
    """A command whose usage errors (an unknown option, a bad option value, a missing argument) are one line,
    `prog: error: ...`, with exit status 1, as every other error is, instead of click's usage block and status 2."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        prog = prog_name or self.name or os.path.basename(sys.argv[0])
        try:
            rv = super().main(args, prog, complete_var, standalone_mode=False, **extra)
        except click.UsageError as e:
            click.echo(f"{prog}: error: {e.format_message().rstrip('.')} ({prog} --help lists the options)", err=True)
            sys.exit(1)
        except click.ClickException as e:
            click.echo(f"{prog}: error: {e.format_message()}", err=True)
            sys.exit(1)
        except click.Abort:
            click.echo(f"{prog}: interrupted", err=True)
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)  # click returns the code of --help and ctx.exit() here


def command(prog: str) -> dict[str, Any]:
    """click.command's arguments for the tool `prog`: its name in usage lines and messages however it is started
    (a console script, `python -m`, `python -c`), one-line usage errors, and -h beside --help."""
    return {"name": prog, "cls": Command, "context_settings": {"help_option_names": ["-h", "--help"]}}


def guarded(prog: str) -> Callable[[F], F]:
    """Turn every failure into `prog: file:line:col: error: ...` on stderr and exit status 1."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except EmberError as e:
                click.echo(f"{prog}: {e.render()}", err=True)
            except MemoryError:  # its text is empty
                click.echo(f"{prog}: error: out of memory (the input, or the machine's settings, need more than this "
                           "process may have)", err=True)
            except OSError as e:
                click.echo(f"{prog}: error: {e}", err=True)
            except KeyboardInterrupt:
                click.echo(f"{prog}: interrupted", err=True)
            except Exception as e:  # a bug in Ember: still one line, never a traceback
                if os.environ.get("EMBER_DEBUG"):
                    raise
                click.echo(f"{prog}: internal error: {type(e).__name__}: {e} (please report this)", err=True)
            sys.exit(1)

        return wrapper  # type: ignore[return-value]

    return deco


def write_output(path: str, data: str | bytes) -> None:
    """Write one output: see write_outputs."""
    write_outputs([(path, data)])


def write_outputs(files: list[tuple[str, str | bytes]]) -> None:
    """Write several outputs all or none, respecting what each path is.  A regular file, or a path that does not
    exist yet, gets a temporary file beside it first, renamed into place only when every output is staged; a
    symlink is followed and its target written so (the link stays).  A path that exists and is not a regular
    file (a device such as /dev/null, a FIFO, a socket) cannot be staged or replaced: it is written through,
    after the renames, as stdout (`-`) is, last.  Two outputs naming one file, by any path, are an error."""
    seen: dict[object, str] = {}
    for path, _ in files:
        key: object = "-" if path == "-" else _identity(path)
        if key in seen:
            raise EmberError(f"two outputs name the same file: '{seen[key]}' and '{path}'")
        seen[key] = path
    staged: list[tuple[str, Path, str]] = []
    through: list[tuple[str, bytes]] = []
    try:
        for path, data in files:
            raw = data.encode() if isinstance(data, str) else data
            if path == "-":
                continue
            real = Path(os.path.realpath(path))
            if real.exists() and not real.is_file():
                through.append((path, raw))
            else:
                staged.append((_stage(str(real), raw, path), real, path))
        for tmp, real, path in staged:
            try:
                os.replace(tmp, real)
            except OSError as e:
                raise EmberError(f"cannot write: {e.strerror or e}", path) from None
        staged = []
    finally:
        for tmp, _, _ in staged:
            Path(tmp).unlink(missing_ok=True)
    for path, raw in through:
        try:
            with open(path, "wb") as f:
                f.write(raw)
        except OSError as e:
            raise EmberError(f"cannot write: {e.strerror or e}", path) from None
    for path, data in files:
        if path == "-":
            _write_stdout(data.encode() if isinstance(data, str) else data)


def _identity(path: str) -> object:
    """What makes two paths one file: the device and inode of what exists (links and aliases resolved), else the
    resolved path."""
    try:
        st = os.stat(path)
        return (st.st_dev, st.st_ino)
    except OSError:
        return os.path.realpath(path)


def _write_stdout(raw: bytes) -> None:
    """All of `raw` to stdout, or an error (a reader that stopped early, a closed stdout) that says so."""
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:
        raise EmberError("cannot write the output: standard output is closed")
    try:
        stream.write(raw)
        stream.flush()
    except (BrokenPipeError, ValueError) as e:
        raise EmberError(f"cannot write the output to standard output: {e}") from None


def _stage(path: str, raw: bytes, shown: str) -> str:
    """`raw` in a new temporary file in `path`'s directory, with the permissions a new file gets; errors name the
    output as given (`shown`)."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    except OSError as e:
        raise EmberError(f"cannot write: {e.strerror}", shown) from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; outputs get the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise EmberError(f"cannot write: {e.strerror or e}", shown) from None
        raise
    return tmp


def host_runtime_option(fn: F) -> F:
    """`--host-runtime`: which library runs (and, at import, checks) host ONNX operators."""
    from ..host.executors import HELP, RUNTIMES

    # a plain string, checked by set_runtime: an unknown name is a one-line error (exit 1), like the variable's
    return click.option("--host-runtime", "host_runtime", metavar="|".join(RUNTIMES), default=None,
                        help=HELP)(fn)


def trace_options(fn: F) -> F:
    """`--trace`, `--trace-window`, `--trace-limit` and `--timeline`: a run's timeline (ember/sim/trace.py)."""
    from ..sim.trace import DEFAULT_LIMIT

    options = [
        click.option("--trace", "trace_path", metavar="FILE.json",
                     help="write the run's timeline as Chrome Trace Event JSON, for Perfetto (ui.perfetto.dev) or "
                          "chrome://tracing: the access unit's runs and queue-full stalls, the queue's bytes, each "
                          "callback and host op, the front end's waits by cause, mispredictions and each DRAM "
                          "channel's busy bus; the same file from either engine (docs/trace.md)"),
        click.option("--trace-window", metavar="START:END",
                     help="keep only events that overlap these simulated cycles (either side may be empty)"),
        click.option("--trace-limit", type=int, default=DEFAULT_LIMIT, show_default=True, metavar="N",
                     help="keep at most N events a core (about 90 bytes of JSON each); the rest are counted, "
                          "and a note says how many"),
        click.option("--timeline", "timeline_path", metavar="FILE.png",
                     help="draw the same timeline as a picture (needs the plot extra: matplotlib)"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def trace_request(trace_path: str | None, timeline_path: str | None, window: str | None, limit: int
                  ) -> TraceOptions | None:
    """What to record for --trace / --timeline; None when neither is asked."""
    from ..sim.trace import TraceOptions, check_limit, parse_window

    if trace_path is None and timeline_path is None:
        if window is not None:
            raise EmberError("--trace-window needs --trace or --timeline")
        return None
    if timeline_path is not None:  # before the run, not after it
        from ..sim.timeline import require_matplotlib

        require_matplotlib()
    return TraceOptions(check_limit(limit), parse_window(window))


def trace_files(runs: list[tuple[Events, Program]], m: Machine, trace_path: str | None, timeline_path: str | None,
                title: str, prog: str) -> list[tuple[str, str | bytes]]:
    """The --trace and --timeline files of recorded runs (one a core), with a note when the limit cut them."""
    from ..sim.trace import dropped_note, trace_json

    files: list[tuple[str, str | bytes]] = []
    if trace_path:
        files.append((trace_path, trace_json(runs, m)))
    if timeline_path:
        from ..sim.timeline import timeline_png

        files.append((timeline_path, timeline_png(runs, m, title)))
    note = dropped_note(runs)
    if note:
        click.echo(f"{prog}: note: {note}", err=True)
    return files
