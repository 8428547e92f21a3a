"""What every command shares: `-` for stdin/stdout, atomic outputs, one-line errors, exit status 1."""

from __future__ import annotations

import functools
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..ir.diagnostics import EmberError

F = TypeVar("F", bound=Callable[..., Any])


def guarded(prog: str) -> Callable[[F], F]:
    """Turn every failure into `prog: file:line:col: error: ...` on stderr and exit status 1."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except EmberError as e:
                click.echo(f"{prog}: {e.render()}", err=True)
            except (OSError, MemoryError) as e:
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
    """Write to stdout for `-`, else atomically (a temporary file renamed into place)."""
    write_outputs({path: data})


def write_outputs(files: dict[str, str | bytes]) -> None:
    """Write several outputs all or none: each goes to a temporary file beside its target first, and
    only when every one is written are they renamed into place (stdout, `-`, is written last)."""
    staged: list[tuple[str, Path]] = []
    try:
        for path, data in files.items():
            if path != "-":
                staged.append((_stage(path, data.encode() if isinstance(data, str) else data), Path(path)))
        for tmp, target in staged:
            try:
                os.replace(tmp, target)
            except OSError as e:
                raise EmberError(f"cannot write: {e.strerror or e}", str(target)) from None
        staged = []
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
    if "-" in files:
        data = files["-"]
        sys.stdout.buffer.write(data.encode() if isinstance(data, str) else data)
        sys.stdout.buffer.flush()


def _stage(path: str, raw: bytes) -> str:
    """`raw` in a new temporary file in `path`'s directory, with the permissions a new file gets."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    except OSError as e:
        raise EmberError(f"cannot write: {e.strerror}", path) from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; outputs get the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise EmberError(f"cannot write: {e.strerror or e}", path) from None
        raise
    return tmp






def host_runtime_option(fn: F) -> F:
    """`--host-runtime`: which library runs (and, at import, checks) host ONNX operators."""
    from ..host.executors import HELP, RUNTIMES

    # a plain string, checked by set_runtime: an unknown name is a one-line error (exit 1), like the variable's
    return click.option("--host-runtime", "host_runtime", metavar="|".join(RUNTIMES), default=None,
                        help=HELP)(fn)
