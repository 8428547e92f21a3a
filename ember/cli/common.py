"""What every command shares: `-` for stdin/stdout, atomic outputs, one-line errors, exit status 1."""

from __future__ import annotations

import contextlib
import functools
import io
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..ir.diagnostics import EmberError
from ..signals import signals_unwind
from . import started

if TYPE_CHECKING:
    from rich.console import Console

    from ..backend.dae import Program
    from ..machine import Machine
    from ..sim.trace import Events, TraceOptions

F = TypeVar("F", bound=Callable[..., Any])


STDOUT_STOPPED = "cannot write to standard output: its reader stopped before the end"
STDOUT_CLOSED = "cannot write to standard output: it is closed"


class ClosedStdout(io.TextIOBase):
    """sys.stdout while a command runs with its standard output closed (`>&-`).  Python sets sys.stdout to None
    there, and print, click.echo and rich then write nothing: the command exited 0 with its report lost."""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        raise EmberError(STDOUT_CLOSED)


class Command(click.Command):
    """A command whose usage errors (an unknown option, a bad option value, a missing argument) are one line,
    `prog: error: ...`, with exit status 1, as every other error is, instead of click's usage block and status 2;
    and whose output to a closed standard output, or to a pipe whose reader stopped, is an error too."""

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        prog = prog_name or self.name or os.path.basename(sys.argv[0])
        if started():  # Ctrl-C while the tool's modules were imported (ember/cli/__init__.py)
            _fail(f"{prog}: interrupted")
        closed = sys.stdout is None
        if closed:
            sys.stdout = ClosedStdout()
        _buffered_stdout()
        try:
            rv = super().main(args, prog, complete_var, standalone_mode=False, **extra)
            if (lost := _flush_stdout()) is not None:
                raise lost
        except click.UsageError as e:
            _fail(f"{prog}: error: {e.format_message().rstrip('.')} ({prog} --help lists the options)")
        except click.ClickException as e:
            _fail(f"{prog}: error: {e.format_message()}")
        except click.Abort:
            _fail(f"{prog}: interrupted")
        except EmberError as e:  # --help or another eager option writing to a closed stdout
            _fail(f"{prog}: {e.render()}")
        finally:
            _flush_stdout()  # after an error already reported (a broken pipe met while printing)
            if closed:
                sys.stdout = None  # type: ignore[assignment]
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)  # click returns the code of --help and ctx.exit() here

    # --help and eager options print while the arguments are parsed, outside guarded; click would exit 1 without a
    # word on EPIPE, and show a traceback for a full disk
    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except OSError as e:
            raise _stdout_error(e) from None


def report_console(*outputs: str | None) -> Console:
    """A rich console for a command's report: on stdout, or on stderr when stdout carries one of the command's
    `outputs` (`-`).  Its broken pipe is the command's one-line error: rich's own answer is a silent exit 1."""
    from rich.console import Console

    class ReportConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return ReportConsole(stderr="-" in outputs)


def _buffered_stdout() -> None:
    """Under `python -u` or PYTHONUNBUFFERED, stdout's binary layer is the raw file, whose write to a pipe can take
    part of the data (when the reader goes away meanwhile) and report it in a count that print, rich and a plain
    write ignore: the rest was lost with exit 0.  A BufferedWriter over it writes everything or raises."""
    out = sys.stdout
    if isinstance(out, io.TextIOWrapper) and isinstance(out.buffer, io.RawIOBase):
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(out.buffer), encoding=out.encoding, errors=out.errors,
                                      line_buffering=True)


def _fail(line: str) -> None:
    click.echo(line, err=True)
    sys.exit(1)


def _flush_stdout() -> EmberError | None:
    """Deliver what is still buffered for stdout now, so that a reader that stopped early (or a full disk) is this
    command's error rather than Python's complaint at exit; the error, or None."""
    try:
        sys.stdout.flush()
        return None
    except (OSError, ValueError) as e:
        # Python flushes stdout again at exit: give what is left somewhere to go.  (This opens the null device
        # the system has; nothing is written to a path.)
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)
        return _stdout_error(e)


def _stdout_error(e: OSError | ValueError) -> EmberError:
    """What a failed write to stdout tells the user: a reader that stopped (a broken pipe, or the stream already
    closed for it), or the system's reason (a full disk, a file-size limit)."""
    if isinstance(e, BrokenPipeError | ValueError):
        return EmberError(STDOUT_STOPPED)
    return EmberError(f"cannot write to standard output: {e.strerror or e}")


def command(prog: str) -> dict[str, Any]:
    """click.command's arguments for the tool `prog`: its name in usage lines and messages however it is started
    (a console script, `python -m`, `python -c`), one-line usage errors, and -h beside --help."""
    return {"name": prog, "cls": Command, "context_settings": {"help_option_names": ["-h", "--help"]}}


def guarded(prog: str) -> Callable[[F], F]:
    """Turn every failure into `prog: file:line:col: error: ...` on stderr and exit status 1; a signal that ends
    the command (Ctrl-C, SIGTERM, SIGHUP) first unwinds it, so that no temporary file or worker process outlives it."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                with signals_unwind(prog):  # SIGTERM and SIGHUP run the finally blocks too, then end the process
                    return fn(*args, **kwargs)
            except EmberError as e:
                click.echo(f"{prog}: {e.render()}", err=True)
            except MemoryError:  # its text is empty
                click.echo(f"{prog}: error: out of memory (the input, or the machine's settings, need more than this "
                           "process may have)", err=True)
            except BrokenPipeError as e:  # printing a report: the output files' own errors name them
                click.echo(f"{prog}: {_stdout_error(e).render()}", err=True)
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
    """Write every output, all or none.  A path that is a regular file, or does not exist yet, gets a temporary
    file beside it first, renamed into place (with the mode the file had) only once everything else is written; a
    symlink is followed and its target written so (the link stays).  A path that exists and is not a regular file
    (a device such as /dev/null, a FIFO, /dev/stdout onto a pipe) cannot be staged or replaced: it is written
    through, before the renames, so that a failure there leaves no file replaced.  A path that is this process's
    stdout (/dev/stdout onto a file, say) is stdout, `-`.  Two outputs naming one file, by any path, are an
    error."""
    where = [_where(path) for path, _ in files]
    seen: dict[object, str] = {}
    for (path, _), (_, key) in zip(files, where):
        if key is None:
            continue
        if key in seen:
            raise EmberError(f"two outputs name the same file: '{seen[key]}' and '{path}'")
        seen[key] = path
    outputs = [(path, how, data.encode() if isinstance(data, str) else data)
               for (path, data), (how, _) in zip(files, where)]
    staged: list[tuple[str, Path, str]] = []
    try:
        for path, how, raw in outputs:
            if how == "staged":
                real = Path(os.path.realpath(path))
                staged.append((_stage(str(real), raw, path), real, path))
        for path, how, raw in outputs:
            if how == "stdout":
                _write_stdout(raw)
            elif how == "through":
                try:
                    with open(path, "wb") as f:  # open follows /proc's links (/dev/stdout onto a pipe)
                        f.write(raw)
                except OSError as e:
                    raise EmberError(f"cannot write: {e.strerror or e}", path) from None
        for tmp, real, path in staged:
            try:
                os.replace(tmp, real)
            except OSError as e:
                raise EmberError(f"cannot write: {e.strerror or e}", path) from None
        staged = []
    finally:
        for tmp, _, _ in staged:
            Path(tmp).unlink(missing_ok=True)


def _where(path: str) -> tuple[str, object]:
    """How an output is written ("stdout", "through" or "staged") and what makes two outputs one file (None: never
    one with another).  os.stat follows links, /proc's too, so /dev/stdout is whatever stdout is: this process's
    stdout is "-" (/dev/stdout onto a file opened with >>); a character device (/dev/null, a terminal) is written
    through and may be named twice; anything else that exists and is not a regular file (a FIFO, a pipe, a
    directory: the write says why not) is written through; a regular file, or a path with nothing there yet, is
    staged, one file with any other name of it."""
    if path == "-":
        return "stdout", "-"
    try:
        st = os.stat(path)
    except OSError:
        return "staged", os.path.realpath(path)
    if stat.S_ISCHR(st.st_mode):
        return "through", None
    try:
        out = os.fstat(sys.stdout.fileno())
        if (st.st_dev, st.st_ino) == (out.st_dev, out.st_ino):
            return "stdout", "-"
    except (OSError, ValueError, AttributeError):  # stdout closed, or not a file (a test's capture)
        pass
    return "staged" if stat.S_ISREG(st.st_mode) else "through", (st.st_dev, st.st_ino)


def _write_stdout(raw: bytes) -> None:
    """All of `raw` to stdout, or an error (a reader that stopped early, a closed stdout, a full disk) that says so."""
    stream = getattr(sys.stdout, "buffer", None)
    if stream is None:
        raise EmberError(STDOUT_CLOSED)
    try:
        stream.write(raw)
        stream.flush()
    except (OSError, ValueError) as e:
        raise _stdout_error(e) from None


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
        try:  # a file replaced keeps its mode (a private 0600 file stays private)
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:  # a new file gets the usual permissions (mkstemp makes 0600)
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
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
