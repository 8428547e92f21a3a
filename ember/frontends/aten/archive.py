"""Reading either torch archive (a zip, read through ember/bounded_zip.py) and the tensors and JSON in it,
with one clear error per way a file can be damaged or crafted, and within the caps of ember/limits.py:
what all of an archive builds, and how many objects a JSON or pickle member expands to."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ...bounded_zip import Archive, check_declared, has_member, open_zip, read_member
from ...ir.diagnostics import EmberError
from ...limits import ARCHIVE_DEPTH, ARCHIVE_OBJECTS

__all__ = ["Archive", "check_declared", "check_structure", "has_member", "open_zip", "plain_children", "read_json",
           "read_member", "strided_tensor"]


def strided_tensor(storage: np.ndarray, offset: int, size: list[int], stride: list[int], what: str,
                   path: str, archive: Archive | None = None) -> np.ndarray:
    """Copy a tensor out of its flat storage, checking every element lies inside it, and charging the
    copy to `archive`.

    The sizes come from the file, so a crafted archive could otherwise make `as_strided` read past
    the buffer, or copy a one-element storage out as a huge stride-0 tensor.
    """
    ints = [offset, *size, *stride]
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in ints):
        raise EmberError(f"{what}: tensor sizes, strides and offset must be integers", path)
    if len(size) != len(stride) or min(ints) < 0:
        raise EmberError(f"{what}: invalid tensor geometry (size {size}, stride {stride}, offset {offset})", path)
    last = offset + sum((d - 1) * s for d, s in zip(size, stride))
    if 0 not in size and last >= storage.size:
        raise EmberError(f"{what}: tensor of size {size} at offset {offset} runs past its storage "
                         f"of {storage.size} elements", path)
    if archive is not None:
        archive.charge(math.prod(size) * storage.dtype.itemsize, f"{what}: a tensor of size {size}")
    try:
        if 0 in size:
            return np.zeros(size, dtype=storage.dtype)
        item = storage.dtype.itemsize
        view = np.lib.stride_tricks.as_strided(storage[offset:], shape=tuple(size),
                                               strides=tuple(s * item for s in stride))
        return np.array(view)
    except (ValueError, OverflowError, MemoryError) as e:  # e.g. a huge broadcast (stride 0) tensor
        raise EmberError(f"{what}: cannot materialize a tensor of size {size} ({type(e).__name__})", path) from None


def read_json(zf: Archive, name: str, path: str) -> Any:
    """A JSON member's value, refusing one with more values than ARCHIVE_OBJECTS before parsing it (every
    value but the first follows a comma or opens a container, so counting those bounds them) or nested
    deeper than ARCHIVE_DEPTH."""
    data = read_member(zf, name, path)
    most = ARCHIVE_OBJECTS.get()
    if data.count(b",") + data.count(b"[") + data.count(b"{") >= most:
        raise EmberError(f"archive member '{name}' holds more than {most:,} JSON values ({ARCHIVE_OBJECTS.env})", path)
    try:
        got = json.loads(data)
    except (ValueError, RecursionError) as e:
        why = " ".join(str(e).split())[:200]
        raise EmberError(f"archive member '{name}' is not valid JSON ({why})", path) from None
    check_structure(got, f"archive member '{name}'", path)
    return got


def plain_children(x: Any) -> Iterable[Any] | None:
    """The values in a list, tuple or dict (a reader walks these); None for anything else."""
    if isinstance(x, list | tuple):
        return x
    if isinstance(x, dict):
        return x.values()
    return None


def check_structure(root: Any, member: str, path: str,
                    children: Callable[[Any], Iterable[Any] | None] = plain_children) -> None:
    """Refuse `root` if walking it, each shared reference as often as it is reached, would visit more
    than ARCHIVE_OBJECTS objects or go deeper than ARCHIVE_DEPTH, or would never end.

    Each container's expanded size and depth are computed once, from its children's, so this takes time
    linear in what was built however large the expansion."""
    most, deepest = ARCHIVE_OBJECTS.get(), ARCHIVE_DEPTH.get()
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    kids = children(root)
    if kids is None:
        return
    # one frame per container on the current path: [container, children left, size so far, deepest child]
    frames: list[list[Any]] = [[root, iter(kids), 1, 0]]
    on_path = {id(root)}

    def add(frame: list[Any], n: int, d: int) -> None:
        frame[2] += n
        frame[3] = max(frame[3], d)
        if frame[2] > most:
            raise EmberError(f"{member} expands to more than {most:,} objects when read, through references "
                             f"it shares ({ARCHIVE_OBJECTS.env})", path)

    while frames:
        top = frames[-1]
        for child in top[1]:
            grand = children(child)
            if grand is None:
                add(top, 1, 1)
            elif id(child) in size:
                add(top, size[id(child)], depth[id(child)])
            elif id(child) in on_path:
                raise EmberError(f"{member} holds a container that contains itself", path)
            elif len(frames) >= deepest:
                raise EmberError(f"{member} nests more than {deepest} levels deep ({ARCHIVE_DEPTH.env})", path)
            else:
                frames.append([child, iter(grand), 1, 0])
                on_path.add(id(child))
                break
        else:
            frames.pop()
            on_path.discard(id(top[0]))
            size[id(top[0])], depth[id(top[0])] = top[2], top[3] + 1
            if frames:
                add(frames[-1], top[2], top[3] + 1)
