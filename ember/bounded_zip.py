"""A zip archive read within the caps of ember/limits.py: the torch frontends' `.pt` and `.pt2`, and
ember-sim's `.npz` inputs.

A member's declared sizes are checked before it is inflated (its method, its size, its ratio to its
stored size, and what the whole archive may still build), and what actually inflates is counted, so a
directory that understates a size is caught too.  Every refusal is one line naming the member.
"""

from __future__ import annotations

import os
import zipfile
import zlib
from typing import BinaryIO

from .ir.diagnostics import EmberError
from .limits import ARCHIVE_MEMBER_BYTES, ARCHIVE_RATIO

__all__ = ["SMALL", "Archive", "check_declared", "has_member", "open_zip", "read_member"]

SMALL = 1 << 24
"""What a file may make Ember build however small it is: 16 MiB, below which ratios say nothing."""
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
"""What torch's zip reader reads too.  zipfile inflates bzip2 and LZMA data a whole read at a time, so a
member under either could fill memory before its inflated size is counted."""


class Archive(zipfile.ZipFile):
    """A zip that counts the bytes Ember builds from it: members inflated and, for a torch archive, tensors
    copied out of their storages (`charge`).  All of them together stay within ARCHIVE_RATIO times the
    file's size (or SMALL), so many members that each compress well, or many views of one storage, cannot
    add up to a bomb."""

    def __init__(self, file: str | BinaryIO, path: str | None = None):
        super().__init__(file)
        self.path = path if path is not None else str(file)
        assert self.fp is not None
        self.size = self.fp.seek(0, os.SEEK_END)  # zipfile seeks before every read
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


def open_zip(path: str, file: BinaryIO | None = None) -> Archive:
    """Open an archive (the file at `path`, or `file` if given), turning every way a file can fail to be a
    zip into one clear error."""
    try:
        return Archive(path if file is None else file, path)
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


def check_declared(path: str, file: BinaryIO | None = None) -> None:
    """Refuse an archive (at `path`, or in `file`) any of whose members, or all of them together, declare
    more than read_member would inflate: for a reader that trusts the declared sizes (torch.jit.load, and
    numpy's npz reader, allocate them and read that far)."""
    with open_zip(path, file) as zf:
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
