"""Compile the fast engine's generated C and keep the libraries in an on-disk cache that is checked before use.

Loading a shared library runs its constructors, so a cache entry is code that runs as the user.  The cache
therefore trusts a directory only when it is the user's own and nobody else can write to it (else the run
stops with an error saying how to fix it); an unusable directory gives way to a private temporary one, never
to a shared path.  Every entry is a `.so` plus a sidecar recording the sha256 of its bytes; the library is
installed by rename after fsync, the sidecar after it, so a crash leaves an entry without a valid sidecar,
which is rebuilt.  What is loaded is a private copy of exactly the bytes that were hashed (see `_dlopen`).
Temporary files are removed when compilation fails, raises or is interrupted by SIGTERM, SIGINT or SIGHUP.
docs/cache.md says what the cache trusts and what it does not.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import secrets
import shutil
import stat
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from ...ir.diagnostics import EmberError
from ...signals import signals_unwind
from .boundary import Args, check
from .cdefs import Unsupported

# -O1: GCC 12.2 builds a program in about 55% of -O2's time (the sample DLRM at -O3: 0.59 s against 1.07 s), and
# the programs ran as fast or faster (paper-size RM3 at -O3 0.44 s against 0.51 s, GNN 0.11 against 0.13, DHE 0.41
# against 0.44; RM1 at -O0, TT and ROBE the same: best of two runs of ember.bench.run, 25 Nov 2026).
# -fno-tree-vectorize: GCC 12.2 (Debian 12's) vectorizes a lane loop converting double -> float -> double so
# that a subnormal double survives the round trip (5e-324 stays 5e-324, where float32 holds 0): the fuzzer's find,
# kept as tests/test_fast_engine.py::test_a_round_trip_through_float32_rounds_every_lane.  -O1 does not vectorize;
# the flag keeps it so should the level change.
CFLAGS = ["-O1", "-fno-tree-vectorize", "-shared", "-fPIC", "-fno-fast-math", "-ffp-contract=off",
          "-fno-strict-aliasing", "-w"]
FORMAT = "ember-fast 2"  # part of every key: a change to the entry layout or the flags gives new names
STALE_SECONDS = 86_400  # a temporary file this old belongs to no running build
_loaded: dict[str, ctypes.CDLL] = {}
_private: list[Path] = []  # this process's temporary cache directory, once one was needed
notes: list[str] = []  # what the CLI tells the user about the last run: why the reference engine ran it, and so on


def compiler() -> str | None:
    """The C compiler to use (its full path, which is part of the cache key), or None."""
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        found = shutil.which(name) if name else None
        if found:
            return os.path.abspath(found)
    return None


def configured_dir() -> Path:
    return Path(os.environ.get("EMBER_CACHE_DIR") or Path.home() / ".cache" / "ember" / "fast")


def cache_dir() -> Path:
    """The cache directory, created 0700.  One that exists but is not private to the user is refused; one that
    cannot be created or written is replaced, for this process, by a private temporary directory."""
    try:
        d = configured_dir()
    except (RuntimeError, KeyError):  # Path.home() without a home directory
        return _private_dir("no home directory for the compile cache (EMBER_CACHE_DIR can name one)")
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = d.stat()
    except FileExistsError:
        return _private_dir(f"the compile cache directory {d} is not a directory")
    except OSError as e:
        return _private_dir(f"cannot create the compile cache directory {d} ({e.strerror or e})")
    how = "set EMBER_CACHE_DIR to a directory of your own, or unset it to use ~/.cache/ember/fast"
    if st.st_uid != os.geteuid():
        raise EmberError(f"the compile cache directory {d} belongs to user id {st.st_uid}, not to you "
                         f"(user id {os.geteuid()}), so its contents cannot be trusted: {how}")
    if st.st_mode & 0o022:
        raise EmberError(f"the compile cache directory {d} is writable by others (mode {stat.S_IMODE(st.st_mode):o}), "
                         f"so its contents cannot be trusted: run `chmod go-w {d}`, or {how}")
    if not os.access(d, os.W_OK | os.X_OK):
        return _private_dir(f"the compile cache directory {d} is not writable")
    return d


def _private_dir(why: str) -> Path:
    """A directory of this process's own (mkdtemp makes it 0700), removed at exit; the reason goes to `notes`."""
    if not _private:
        _private.append(Path(tempfile.mkdtemp(prefix="ember-fast-")))
        atexit.register(shutil.rmtree, _private[0], ignore_errors=True)
    note = f"{why}; compiled programs go to {_private[0]}, a private directory removed at exit"
    if note not in notes:
        notes.append(note)
    return _private[0]


def key_of(source: str, cc: str) -> str:
    """The cache key: the source, the compiler's path and the flags, so any of them changing gives a new entry."""
    return hashlib.sha256("\0".join([FORMAT, cc, *CFLAGS, source]).encode()).hexdigest()[:32]


def entry(d: Path, key: str) -> tuple[Path, Path]:
    """The library and its sidecar (`sha256 <hex of the library's bytes> <key>`)."""
    return d / f"ember_{key}.so", d / f"ember_{key}.sha256"


def sidecar_text(data: bytes, key: str) -> str:
    return f"sha256 {hashlib.sha256(data).hexdigest()} {key}\n"


def trusted_bytes(d: Path, key: str) -> bytes | None:
    """The cached library's bytes when its sidecar vouches for exactly them, else None (absent or untrusted)."""
    so, side = entry(d, key)
    try:
        data = _read(so)
        recorded = _read(side).decode("ascii", "replace")
    except OSError:
        return None
    return data if recorded == sidecar_text(data, key) else None


def load(source: str) -> ctypes.CDLL:
    """The compiled library of a generated source: from the cache when its entry checks out, else compiled now.

    An entry that fails its check is rebuilt; one that passes but does not load is rebuilt once.  A library
    that still does not load (a broken compiler, a full disk) raises Unsupported: the reference engine runs.
    One whose structures are laid out otherwise than boundary.py's ctypes classes say raises EmberError
    (boundary.check), before anything is called.
    """
    cc = compiler()
    if cc is None:
        raise Unsupported("machines without a C compiler (set CC, or install cc, gcc or clang)")
    key = key_of(source, cc)
    lib = _loaded.get(key)
    if lib is not None:
        return lib
    d = cache_dir()
    data = trusted_bytes(d, key)
    built = data is None
    if data is None:
        data = build(cc, source, d, key)
    while True:
        try:
            lib = _dlopen(d, key, data)
            break
        except OSError as e:
            if built:
                for path in entry(d, key):  # not worth keeping: the next run compiles afresh
                    path.unlink(missing_ok=True)
                raise Unsupported(f"a program whose compiled library does not load even when rebuilt "
                                  f"({str(e) or type(e).__name__})") from None
            data, built = build(cc, source, d, key), True
    check(lib)
    lib.simulate.restype, lib.simulate.argtypes = ctypes.c_int64, [ctypes.POINTER(Args)]
    lib.release.restype, lib.release.argtypes = None, [ctypes.POINTER(Args)]
    _loaded[key] = lib
    return lib


def build(cc: str, source: str, d: Path, key: str) -> bytes:
    """Compile `source` (fed on stdin, so no C file is written) and install the entry; returns the library's bytes.

    The library is compiled to a temporary name in the cache directory, fsynced and renamed over the entry;
    then the sidecar is written the same way.  The compiler's own temporary files (its assembly and object) go
    to a directory of their own there ($TMPDIR for it).  Every temporary file is gone when this returns or raises,
    and when a signal interrupts it (the compiler is killed first, so it cannot write after the cleanup).  A full
    disk is a cache that cannot be written, whoever notices it, so the reference engine runs the program.
    """
    so, side = entry(d, key)
    _sweep(d)
    tmp_so, tmp_side = _temp_name(d, key, ".so"), _temp_name(d, key, ".sha256")
    proc: subprocess.Popen[bytes] | None = None
    scratch: Path | None = None
    with signals_unwind("compiling the fast engine's program") as held:
        try:
            with held():  # a signal now waits until `scratch` is named, so that cleanup can remove it
                scratch = Path(tempfile.mkdtemp(prefix=f"tmp-ember_{key}.cc.", dir=d))
            try:
                with held():  # a signal now waits until `proc` names the compiler, so that cleanup can kill it
                    proc = subprocess.Popen([cc, *CFLAGS, "-x", "c", "-", "-o", str(tmp_so)], stdin=subprocess.PIPE,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            env={**os.environ, "TMPDIR": str(scratch)})
            except OSError as e:
                raise Unsupported(f"a C compiler that cannot be run ({cc}: {e.strerror or e})") from None
            _, err = proc.communicate(source.encode())
            if proc.returncode != 0:
                text = err.decode(errors="replace")
                full = next((w for w in ("No space left on device", "Disk quota exceeded", "File too large",
                                         "File size limit exceeded") if w in text), None)
                if full is not None:
                    raise Unsupported(f"a compile cache that cannot be written ({d}: {full.lower()})")
                lines = text.splitlines() or [f"exit status {proc.returncode}"]
                first = next((s for s in lines if "error" in s), lines[0])
                raise EmberError(f"internal error: the C compiler ({cc}) rejected a generated program: {first.strip()}")
            data = _read(tmp_so, sync=True)
            os.replace(tmp_so, so)
            _write_new(tmp_side, sidecar_text(data, key).encode())
            os.replace(tmp_side, side)
            _sync_dir(d)
            return data
        except OSError as e:  # a full disk, say: the reference engine needs none of this
            raise Unsupported(f"a compile cache that cannot be written ({d}: {e.strerror or e})") from None
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            for path in (tmp_so, tmp_side):
                path.unlink(missing_ok=True)
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
    raise AssertionError("unreachable: signals_unwind raises after an interruption")


def _dlopen(d: Path, key: str, data: bytes) -> ctypes.CDLL:
    """dlopen a fresh private copy of `data`, the bytes that were hashed, under a name used once.

    Opening the entry itself would leave a window between hashing and dlopen in which the file could be
    replaced, and dlopen of a path the process has loaded before returns the old library without reading the
    file.  The copy is written by this process into the user's 0700 directory (so nobody else can swap it),
    never reused, and unlinked once mapped.  It is not /proc/self/fd/N of the open entry: glibc matches
    already-loaded libraries by that name, and fd numbers are reused, so a later load could get an earlier
    library back.
    """
    _check_elf(data, entry(d, key)[0])
    copy = _temp_name(d, key, ".load.so")
    with signals_unwind("compiling the fast engine's program"):
        try:
            _write_new(copy, data, sync=False)
            return ctypes.CDLL(str(copy))
        except OSError as e:
            raise OSError(str(e).replace(str(copy), str(entry(d, key)[0]))) from None
        finally:
            copy.unlink(missing_ok=True)
    raise AssertionError("unreachable: signals_unwind raises after an interruption")


def _check_elf(data: bytes, name: Path) -> None:
    """Refuse an ELF file whose headers or loadable segments reach past its end: dlopen maps such a file and the
    process dies of SIGBUS when it touches the missing pages (a truncated library is one).  Not ELF: dlopen judges."""
    if data[:4] != b"\x7fELF":
        return
    wide, order = data[4:5] == b"\x02", "<" if data[5:6] == b"\x01" else ">"
    head, (ph, sh) = ("QQ", (0x20, 0x28)) if wide else ("II", (0x1C, 0x20))
    try:
        phoff, shoff = struct.unpack_from(order + head, data, ph)
        phsize, phnum, shsize, shnum = struct.unpack_from(order + "HHHH", data, sh + (0xE if wide else 0xA))
        segments = [struct.unpack_from(order + ("I4xQ8x8xQ" if wide else "II8xI"), data, phoff + i * phsize)
                    for i in range(phnum)]
    except struct.error:
        segments = None
    if segments is None or shoff + shnum * shsize > len(data) or any(
            kind == 1 and offset + size > len(data) for kind, offset, size in segments):  # 1: PT_LOAD
        raise OSError(f"{name}: not a whole shared library (it ends before its headers say)")


def _sweep(d: Path) -> None:
    """Remove temporary files over a day old: left by a process that could not clean up (SIGKILL, power loss)."""
    cutoff = time.time() - STALE_SECONDS
    for path in d.glob("tmp-ember_*"):
        try:
            if path.lstat().st_mtime < cutoff:
                path.unlink()
        except OSError:
            pass


def _temp_name(d: Path, key: str, suffix: str) -> Path:
    """A name no other process or call uses; chosen before anything is created, so cleanup always knows it."""
    return d / f"tmp-ember_{key}.{os.getpid()}.{secrets.token_hex(4)}{suffix}"


def _read(path: Path, sync: bool = False) -> bytes:
    """A regular file's bytes, read through one descriptor that does not follow a symlink (an entry is never one)
    and does not wait on a FIFO."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read()
        if sync:
            os.fsync(fd)
        return data
    finally:
        os.close(fd)


def _write_new(path: Path, data: bytes, sync: bool = True) -> None:
    """Create `path` (it must not exist) and write `data`; fsync unless it is a copy that lives for a moment."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def _sync_dir(d: Path) -> None:
    """Make the renames durable; a filesystem that cannot fsync a directory only loses that guarantee."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


