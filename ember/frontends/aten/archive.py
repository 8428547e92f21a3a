"""Reading either torch archive (a zip) and the tensors in it, with one clear error per way a file can
be damaged or crafted."""

from __future__ import annotations

import os
import zipfile
import zlib

import numpy as np

from ...ir.diagnostics import EmberError

__all__ = ["MEMBER_BYTES", "RATIO", "has_member", "open_zip", "read_member", "strided_tensor"]

MEMBER_BYTES = int(os.environ.get("EMBER_ARCHIVE_MEMBER_BYTES", 1 << 32))
"""Largest archive member read, inflated (4 GiB unless EMBER_ARCHIVE_MEMBER_BYTES says otherwise)."""
RATIO = int(os.environ.get("EMBER_ARCHIVE_RATIO", 100))
"""Largest inflated/stored size ratio of a member over 16 MiB (EMBER_ARCHIVE_RATIO).  torch stores
tensor data uncompressed and its pickles and JSON compress about 10x, so a higher ratio is a
decompression bomb, not a model."""
_ANY_RATIO = 1 << 24  # members up to 16 MiB inflated may compress as well as they like


def strided_tensor(storage: np.ndarray, offset: int, size: list[int], stride: list[int], what: str,
                   path: str) -> np.ndarray:
    """Copy a tensor out of its flat storage, checking every element lies inside it.

    The sizes come from the file, so a crafted archive could otherwise make `as_strided` read past
    the buffer.
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
    try:
        if 0 in size:
            return np.zeros(size, dtype=storage.dtype)
        item = storage.dtype.itemsize
        view = np.lib.stride_tricks.as_strided(storage[offset:], shape=tuple(size),
                                               strides=tuple(s * item for s in stride))
        return np.array(view)
    except (ValueError, OverflowError, MemoryError) as e:  # e.g. a huge broadcast (stride 0) tensor
        raise EmberError(f"{what}: cannot materialize a tensor of size {size} ({type(e).__name__})", path) from None


def open_zip(path: str) -> zipfile.ZipFile:
    """Open an archive, turning every way a file can fail to be a zip into one clear error."""
    try:
        return zipfile.ZipFile(path)
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


def read_member(zf: zipfile.ZipFile, name: str, path: str) -> bytes:
    """A member's bytes, refusing one that would inflate past MEMBER_BYTES or RATIO before inflating it.

    zipfile stops at the size the entry declares (and fails its CRC if the data is longer), so checking
    the declared size bounds the work; the loop re-checks what actually arrives."""
    try:
        info = zf.getinfo(name)
        allowed = min(MEMBER_BYTES, max(_ANY_RATIO, RATIO * info.compress_size))
        if info.file_size > allowed:
            raise EmberError(f"archive member '{name}' would inflate to {info.file_size:,} bytes from "
                             f"{info.compress_size:,}, over the limit of {allowed:,} (EMBER_ARCHIVE_MEMBER_BYTES, "
                             "EMBER_ARCHIVE_RATIO)", path)
        parts, total = [], 0
        with zf.open(info) as f:
            while chunk := f.read(1 << 20):
                total += len(chunk)
                if total > allowed:
                    raise EmberError(f"archive member '{name}' inflates past the limit of {allowed:,} bytes", path)
                parts.append(chunk)
        return b"".join(parts)
    except KeyError:
        raise EmberError(f"the archive has no '{name}'", path) from None
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError) as e:
        raise EmberError(f"cannot read '{name}' from the archive ({e})", path) from None
