"""Reading either torch archive (a zip) and the tensors and JSON in it, with one clear error per way a
file can be damaged or crafted, and within the caps of ember/limits.py: what a member inflates to, what
all of an archive builds, and how many objects a JSON or pickle member expands to."""

from __future__ import annotations

import json
import math
import os
import zipfile
import zlib
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ...ir.diagnostics import EmberError
from ...limits import ARCHIVE_DEPTH, ARCHIVE_MEMBER_BYTES, ARCHIVE_OBJECTS, ARCHIVE_RATIO

__all__ = ["Archive", "check_declared", "check_structure", "has_member", "open_zip", "plain_children", "read_json",
           "read_member", "strided_tensor"]

SMALL = 1 << 24
"""What a file may make Ember build however small it is: 16 MiB, below which ratios say nothing."""
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
"""What torch's zip reader reads too.  zipfile inflates bzip2 and LZMA data a whole read at a time, so a
member under either could fill memory before its inflated size is counted."""


class Archive(zipfile.ZipFile):
    """A torch archive that counts the bytes Ember builds from it: members inflated and tensors copied out
    of their storages.  All of them together stay within ARCHIVE_RATIO times the file's size (or SMALL),
    so many members that each compress well, or many views of one storage, cannot add up to a bomb."""

    def __init__(self, path: str):
        super().__init__(path)
        self.path = path
        self.size = os.fstat(self.fp.fileno()).st_size if self.fp is not None else 0
        self.built = 0

    def room(self) -> tuple[int, str]:
        """The bytes Ember may still build from this archive, and the limit worded for an error."""
        ratio = ARCHIVE_RATIO.get()
        why = (f"{ratio} times the archive's size of {self.size:,} bytes for all Ember builds from it "
               f"({ARCHIVE_RATIO.env})")
        return max(SMALL, ratio * self.size) - self.built, why

    def charge(self, nbytes: int, what: str) -> None:
        """Count `nbytes` more built from the archive, refusing `what` if they do not fit."""
        room, why = self.room()
        if nbytes > room:
            raise EmberError(f"{what} would take {nbytes:,} bytes, over {why}", self.path)
        self.built += nbytes


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


def open_zip(path: str) -> Archive:
    """Open an archive, turning every way a file can fail to be a zip into one clear error."""
    try:
        return Archive(path)
    except FileNotFoundError:
        raise EmberError("no such file", path) from None
    except OSError as e:
        raise EmberError(f"cannot read the file: {e.strerror or e}", path) from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as e:
        raise EmberError(f"not a zip archive, or a truncated one ({e})", path) from None


def has_member(zf: zipfile.ZipFile, name: str) -> bool:
    try:
        zf.getinfo(name)
    except KeyError:
        return False
    return True


def _declared(zf: Archive, info: zipfile.ZipInfo, path: str) -> tuple[int, str]:
    """The most bytes member `info` may inflate to, and that limit worded; refuses a member whose method
    or declared size already breaks it."""
    name = info.filename
    if info.compress_type not in _METHODS:
        method = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "LZMA"}.get(info.compress_type, "an unknown method")
        raise EmberError(f"archive member '{name}' is compressed with {method}; Ember, like torch, reads only "
                         "stored and deflated members", path)
    cap, ratio = ARCHIVE_MEMBER_BYTES.get(), ARCHIVE_RATIO.get()
    allowed, why = min((cap, f"the limit of {cap:,} bytes for one member ({ARCHIVE_MEMBER_BYTES.env})"),
                       (max(SMALL, ratio * info.compress_size),
                        f"{ratio} times its stored size ({ARCHIVE_RATIO.env}, for members over {SMALL >> 20} MiB)"),
                       zf.room())
    if info.file_size > allowed:
        raise EmberError(f"archive member '{name}' would inflate to {info.file_size:,} bytes from "
                         f"{info.compress_size:,}, over {why}", path)
    return allowed, why


def check_declared(path: str) -> None:
    """Refuse an archive any of whose members, or all of them together, declare more than read_member would
    inflate: for a reader that trusts the declared sizes (torch.jit.load allocates them and stops there)."""
    with open_zip(path) as zf:
        for info in zf.infolist():
            _declared(zf, info, path)
            zf.built += info.file_size


def read_member(zf: Archive, name: str, path: str) -> bytes:
    """A member's bytes, refusing one that would inflate past ARCHIVE_MEMBER_BYTES, past ARCHIVE_RATIO
    times its stored size, or past what the archive may still build (Archive), before inflating it.

    The sizes in the zip's directory may lie: zipfile stops inflating at the declared size (and then
    fails the CRC if the data went on), and inflates deflated data at most one read's worth at a time,
    so the loop counting what actually arrives bounds both the memory and the work."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise EmberError(f"the archive has no '{name}'", path) from None
    allowed, why = _declared(zf, info, path)
    try:
        parts, total = [], 0
        with zf.open(info) as f:
            while chunk := f.read(1 << 20):
                total += len(chunk)
                if total > allowed:
                    raise EmberError(f"archive member '{name}' inflates past {why}", path)
                parts.append(chunk)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as e:
        raise EmberError(f"cannot read archive member '{name}' ({e})", path) from None  # RuntimeError: encrypted
    zf.built += total
    return b"".join(parts)


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
