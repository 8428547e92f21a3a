"""Reading the files a tool is given (`-` for stdin), and the paths written inside them: what the commands and
the planner, which reads a model or `.eir` the same way, share."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from pathlib import Path

from .ir.diagnostics import EmberError
from .limits import INPUT_BYTES, TEXT_BYTES, Limit


def display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def read_text(path: str) -> str:
    try:
        return read_bytes(path, TEXT_BYTES).decode()
    except UnicodeDecodeError:
        raise EmberError("not a text file", display_name(path)) from None


def read_bytes(path: str, limit: Limit = INPUT_BYTES) -> bytes:
    """The whole file, or an error once it passes `limit` bytes: a regular file by its size, anything else (stdin,
    a pipe, a device such as /dev/zero) as it is read, a megabyte at a time."""
    cap = limit.get()
    too_big = too_large(path, limit)
    if path == "-" and sys.stdin is None:  # `<&-`: Python leaves sys.stdin None
        raise EmberError("cannot read standard input: it is closed")
    try:
        with contextlib.nullcontext(sys.stdin.buffer) if path == "-" else open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if path != "-" and stat.S_ISREG(st.st_mode):
                if st.st_size > cap:
                    raise too_big
                return f.read()
            chunks, size = [], 0
            while chunk := f.read(1 << 20):
                size += len(chunk)
                if size > cap:
                    raise too_big
                chunks.append(chunk)
            return b"".join(chunks)
    except OSError as e:
        raise EmberError(f"cannot read: {e.strerror}", display_name(path)) from None


def too_large(path: str, limit: Limit) -> EmberError:
    """The error of a file past `limit`, naming the variable that raises it."""
    return EmberError(f"larger than {limit.get():,} bytes, the most Ember reads ({limit.env} raises it)",
                      display_name(path))


def base_dir(path: str) -> Path:
    """Directory relative paths inside a file are resolved against (cwd for stdin/stdout)."""
    return Path.cwd() if path == "-" else Path(path).resolve().parent


def rebase(ref: str, from_path: str, to_path: str) -> str:
    """Re-express a path written in `from_path` (relative to it) as seen from `to_path`."""
    if not ref or os.path.isabs(ref):
        return ref
    absolute = (base_dir(from_path) / ref).resolve()
    return os.path.relpath(absolute, base_dir(to_path))
