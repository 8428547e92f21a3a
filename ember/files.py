"""Reading the files a tool is given (`-` for stdin), and the paths written inside them: what the commands and
the planner, which reads a model or `.eir` the same way, share."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .ir.diagnostics import EmberError


def display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text()
    except UnicodeDecodeError:
        raise EmberError("not a text file", path) from None
    except OSError as e:
        raise EmberError(f"cannot read: {e.strerror}", path) from None


def read_bytes(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise EmberError(f"cannot read: {e.strerror}", path) from None


def base_dir(path: str) -> Path:
    """Directory relative paths inside a file are resolved against (cwd for stdin/stdout)."""
    return Path.cwd() if path == "-" else Path(path).resolve().parent


def rebase(ref: str, from_path: str, to_path: str) -> str:
    """Re-express a path written in `from_path` (relative to it) as seen from `to_path`."""
    if not ref or os.path.isabs(ref):
        return ref
    absolute = (base_dir(from_path) / ref).resolve()
    return os.path.relpath(absolute, base_dir(to_path))
