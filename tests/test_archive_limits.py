"""Bounded imports (issue 13): decompression bombs, billion-laughs pickles and their relatives are refused
in one line naming the archive member, quickly and in little memory.

The hostile files are generated here, into tmp_path: a zip is written byte by byte so that its directory
can lie, a deflate stream of zeros is one compressed MiB repeated (a full flush makes each copy
self-contained), and pickles are written opcode by opcode.
"""

from __future__ import annotations

import functools
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS, ROOT, run_tool, tools_in_process
from test_frontend_torch import _BUILD, _MARK, _NEWOBJ, _REDUCE, _STOP, _TUPLE, _global, _small, _str

from ember.cli.sim import load_inputs
from ember.frontends import import_model
from ember.frontends.aten.archive import open_zip, read_member
from ember.frontends.torchscript import _Archive
from ember.ir.diagnostics import EmberError

MiB = 1 << 20
SOURCE = MODELS / "bag_sum.traced.pt"
PREFIX = "bag_sum.traced/"


# ---------------------------------------------------------------------------------------------
# Generators


def _write_zip(path: Path, members: list[tuple[str, int, bytes, int, int]]) -> Path:
    """A zip of (name, method, stored bytes, CRC-32, inflated size as declared) members, the sizes as given."""
    body, directory = bytearray(), bytearray()
    for name, method, data, crc, size in members:
        raw = name.encode()
        offset = len(body)
        body += struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(data), size, len(raw), 0)
        body += raw + data
        directory += struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc, len(data), size,
                                 len(raw), 0, 0, 0, 0, 0, offset) + raw
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(members), len(members), len(directory), len(body), 0)
    path.write_bytes(bytes(body + directory + end))
    return path


@functools.cache
def _zeros_crc(mib: int) -> int:
    crc, chunk = 0, bytes(MiB)
    for _ in range(mib):
        crc = zlib.crc32(chunk, crc)
    return crc


def _deflated_zeros(mib: int) -> bytes:
    """A raw deflate stream of `mib` MiB of zeros, about 1 KB per MiB, made without inflating anything."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(MiB)) + c.flush(zlib.Z_FULL_FLUSH)
    return block * mib + c.flush()


def _torch_archive(path: Path, replace: dict[str, tuple[int, bytes, int, int]], source: Path = SOURCE) -> Path:
    """`source` (bag_sum.traced.pt) with the members named in `replace` (without the prefix) written as given."""
    with zipfile.ZipFile(source) as zf:
        members = []
        for info in zf.infolist():
            short = info.filename.split("/", 1)[1]
            if short in replace:
                members.append((info.filename, *replace[short]))
            else:
                data = zf.read(info)
                members.append((info.filename, zipfile.ZIP_STORED, data, zlib.crc32(data), len(data)))
    return _write_zip(path, members)


def _pickle_archive(path: Path, pkl: bytes, extra: dict[str, bytes] | None = None) -> Path:
    members = {"data.pkl": pkl, **(extra or {})}
    return _torch_archive(path, {k: (zipfile.ZIP_STORED, v, zlib.crc32(v), len(v)) for k, v in members.items()})


def _bomb_archive(path: Path, inflated_mib: int, declared_mib: int | None = None) -> Path:
    """data.pkl deflated from `inflated_mib` MiB of zeros, its directory saying `declared_mib`."""
    data = _deflated_zeros(inflated_mib)
    size = (inflated_mib if declared_mib is None else declared_mib) * MiB
    return _torch_archive(path, {"data.pkl": (zipfile.ZIP_DEFLATED, data, _zeros_crc(inflated_mib), size)})


def _module(state: bytes) -> bytes:
    """A protocol-2 pickle of one module object whose state is the dict `state` builds (key, value, ...)."""
    return (b"\x80\x02" + _global("__torch__.m", "M") + b")" + _NEWOBJ + b"}" + _MARK + state + b"u" + _BUILD
            + _STOP)


def _get(i: int) -> bytes:
    return b"j" + struct.pack("<I", i)  # LONG_BINGET


def _put(i: int) -> bytes:
    return b"r" + struct.pack("<I", i)  # LONG_BINPUT


def _laughs(levels: int, fanout: int = 10, tuples: bool = False) -> bytes:
    """Level 0 an empty list (tuple), level i a list (tuple) of `fanout` references to level i-1, each but
    the last popped once memoized: `levels` * 58 bytes that expand to fanout**levels objects."""
    close = b"t" if tuples else b"l"
    out = (b")" if tuples else b"]") + _put(0)
    for i in range(1, levels + 1):
        out += b"0" + _MARK + _get(i - 1) * fanout + close + _put(i)
    return out


# ---------------------------------------------------------------------------------------------
# The acceptance cases, measured in a fresh interpreter

_PEAK = """
import re, resource, sys
from ember.cli.sim import load_inputs
from ember.frontends import import_model
from ember.ir.diagnostics import EmberError
try:
    import_model(sys.argv[1], sys.argv[1])
    print("imported")
except EmberError as e:
    print(e.message)
try:
    with open("/proc/self/status") as f:
        print(re.search(r"VmHWM:\\s*(\\d+) kB", f.read()).group(1))
except OSError:
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _import_in_child(path: Path) -> tuple[str, float]:
    """The import's one-line outcome and the child's peak resident memory in MiB.  Linux's VmHWM, where
    there is one: ru_maxrss keeps the parent's peak when the child is forked from a large test process."""
    r = subprocess.run([sys.executable, "-c", _PEAK, str(path)], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    message, kib = r.stdout.strip().splitlines()
    # Under mutmut the modules imported are its copies, which hold every mutant of each function: the
    # peak then says nothing about the import's own memory.
    return message, 0.0 if tools_in_process() else int(kib) / 1024


def test_a_3mb_archive_that_inflates_to_3gib_is_refused_in_little_memory(tmp_path: Path) -> None:
    bomb = _bomb_archive(tmp_path / "bomb.pt", 3072)
    assert 3 * MiB < bomb.stat().st_size < 3.5 * MiB
    message, peak = _import_in_child(bomb)
    assert f"archive member '{PREFIX}data.pkl' would inflate to {3 << 30:,} bytes from" in message
    assert peak < 200
    r = run_tool("import", str(bomb), "-o", str(tmp_path / "out.eir"))
    assert r.returncode == 1 and not (tmp_path / "out.eir").exists()
    assert r.stderr.decode().count("\n") == 1 and "EMBER_ARCHIVE_RATIO" in r.stderr.decode()


def test_a_directory_that_understates_the_size_is_not_trusted(tmp_path: Path) -> None:
    """Declared 1 MiB, really 3 GiB: inflating stops at the declared size and the CRC gives the lie away."""
    bomb = _bomb_archive(tmp_path / "liar.pt", 3072, declared_mib=1)
    message, peak = _import_in_child(bomb)
    assert f"cannot read archive member '{PREFIX}data.pkl' (Bad CRC-32" in message
    assert peak < 200


def test_a_billion_laughs_pickle_is_refused_in_little_memory(tmp_path: Path) -> None:
    pkl = _module(_str("bomb") + _laughs(112))  # 10**112 lists
    assert 6000 < len(pkl) < 6700
    bomb = _pickle_archive(tmp_path / "laughs.pt", pkl)
    message, peak = _import_in_child(bomb)
    assert message == "data.pkl expands to more than 1,000,000 objects when read, through references it shares " \
                      "(EMBER_ARCHIVE_OBJECTS)"
    assert peak < 200
    r = run_tool("import", str(bomb), "-o", str(tmp_path / "out.eir"))
    assert r.returncode == 1 and r.stderr.decode().count("\n") == 1 and "data.pkl" in r.stderr.decode()


# ---------------------------------------------------------------------------------------------
# The archive


def test_a_member_that_inflates_a_thousandfold_is_refused_before_inflating(tmp_path: Path) -> None:
    bomb = _bomb_archive(tmp_path / "bomb.pt", 64)
    with pytest.raises(EmberError) as e:
        import_model(str(bomb), str(bomb))
    assert f"'{PREFIX}data.pkl' would inflate to {64 * MiB:,} bytes" in e.value.message
    assert "over 100 times" in e.value.message and "EMBER_ARCHIVE_RATIO" in e.value.message


def test_the_limits_can_be_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A higher ratio lets the same member through to fail as what it is (zeros are no pickle); a lower
    member cap refuses the real archive's storage; a value that is not a positive integer is an error."""
    bomb = _bomb_archive(tmp_path / "bomb.pt", 64)
    monkeypatch.setenv("EMBER_ARCHIVE_RATIO", "100000")
    with pytest.raises(EmberError, match="data.pkl is not a valid TorchScript pickle"):
        import_model(str(bomb), str(bomb))
    monkeypatch.delenv("EMBER_ARCHIVE_RATIO")
    monkeypatch.setenv("EMBER_ARCHIVE_MEMBER_BYTES", "1000")
    with pytest.raises(EmberError, match=f"'{PREFIX}data/0' would inflate to 1,280 bytes .* 1,000 bytes for one"):
        import_model(str(SOURCE), str(SOURCE))
    monkeypatch.setenv("EMBER_ARCHIVE_MEMBER_BYTES", "lots")
    r = run_tool("import", str(SOURCE), "-o", str(tmp_path / "out.eir"))
    assert r.returncode == 1 and r.stderr.decode().count("\n") == 1
    assert "EMBER_ARCHIVE_MEMBER_BYTES must be a positive integer, not 'lots'" in r.stderr.decode()


def test_many_members_that_each_compress_well_cannot_add_up(tmp_path: Path) -> None:
    """16 MiB each is allowed any ratio, but all an archive holds stays within 100 times its size."""
    block = _deflated_zeros(16)
    archive = _write_zip(tmp_path / "many.zip", [(f"m{i}", zipfile.ZIP_DEFLATED, block, _zeros_crc(16), 16 * MiB)
                                                 for i in range(40)])
    zf = open_zip(str(archive))
    read = 0
    with pytest.raises(EmberError, match=r"archive member 'm\d+' would inflate .* over 100 times the archive's size"):
        for i in range(40):
            read += len(read_member(zf, f"m{i}", str(archive)))
    assert 0 < read <= 100 * archive.stat().st_size


def test_a_scripted_archive_is_checked_whole_before_torch_reads_it(tmp_path: Path) -> None:
    """torch.jit.load inflates members the torch-free reader never reads, such as the debug pickles."""
    source = MODELS / "embedding.scripted.pt"
    with zipfile.ZipFile(source) as zf:
        debug = next(n for n in zf.namelist() if n.endswith(".debug_pkl")).split("/", 1)[1]
    bomb = _torch_archive(tmp_path / "scripted.pt", {debug: (zipfile.ZIP_DEFLATED, _deflated_zeros(64),
                                                             _zeros_crc(64), 64 * MiB)}, source)
    r = run_tool("import", str(bomb), "-o", str(tmp_path / "out.eir"))
    assert r.returncode == 1 and r.stderr.decode().count("\n") == 1
    assert f"{debug}' would inflate to {64 * MiB:,} bytes" in r.stderr.decode()


def test_an_npz_input_is_checked_before_numpy_inflates_it(tmp_path: Path) -> None:
    """ember-sim's --inputs: numpy allocates and fills the array a member's header declares."""
    bomb = tmp_path / "in.npz"
    np.savez_compressed(bomb, x=np.zeros(64 * MiB, np.uint8))
    with pytest.raises(EmberError, match=f"archive member 'x.npy' would inflate to {64 * MiB + 128:,} bytes"):
        load_inputs(str(bomb))
    fine = tmp_path / "fine.npz"
    np.savez_compressed(fine, x=np.arange(1000))
    np.testing.assert_array_equal(load_inputs(str(fine))["x"], np.arange(1000))


def test_bzip2_and_lzma_members_are_refused(tmp_path: Path) -> None:
    """zipfile inflates these a whole read at a time: 450 bytes of bzip2 would take 800 MB to count."""
    archive = tmp_path / "bz.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("a", b"x" * 100, compress_type=zipfile.ZIP_BZIP2)
        zf.writestr("b", b"x" * 100, compress_type=zipfile.ZIP_LZMA)
    zf = open_zip(str(archive))
    for name, method in (("a", "bzip2"), ("b", "LZMA")):
        with pytest.raises(EmberError, match=f"'{name}' is compressed with {method}; .* stored and deflated"):
            read_member(zf, name, str(archive))


# ---------------------------------------------------------------------------------------------
# The pickle


def _tensor(size: int, stride: int) -> bytes:
    """_rebuild_tensor_v2 of float storage '0' (one element) at offset 0 with one dimension."""
    return (_global("torch._utils", "_rebuild_tensor_v2") + _MARK + _MARK + _str("storage")
            + _global("torch", "FloatStorage") + _str("0") + _str("cpu") + _small(1) + _TUPLE + b"Q"
            + _small(0) + _MARK + b"J" + struct.pack("<i", size) + _TUPLE + _MARK + _small(stride) + _TUPLE + b"\x89"
            + _global("collections", "OrderedDict") + b")" + _REDUCE + _TUPLE + _REDUCE)


@pytest.mark.parametrize(("state", "refusal"), [
    (_str("deep") + b"]" * 300 + b"a" * 299, "data.pkl nests more than 200 levels deep (EMBER_ARCHIVE_DEPTH)"),
    (_str("loop") + b"]" + _put(0) + _get(0) + b"a", "data.pkl holds a container that contains itself"),
    (_str("d") + b"}" + _laughs(60, tuples=True) + _small(1) + b"s",  # hashing this key walks 10**60 tuples
     "data.pkl uses a tuple as a dictionary key or set member (only strings and numbers may be)"),
    # the same 2000-entry list copied by 1000 calls: 7 bytes each, 2000 objects each
    (_global("torch.jit._pickle", "build_tensorlist") + _put(0) + b"0" + b"]" + _put(1) + _MARK
     + _small(7) * 2000 + b"e" + b"0" + (_get(0) + _get(1) + b"\x85" + _REDUCE + b"0") * 1000 + _str("c") + _get(1),
     "data.pkl builds more than 1,000,000 objects (EMBER_ARCHIVE_OBJECTS)"),
    (_str("os") + _str("os\nsystem") + _str("x") + b"\x93",
     "data.pkl refers to the global 'os\\nsystem.x', which Ember refuses"),
    (_str("w") + _MARK + _str("storage") + _small(1) + _TUPLE + b"Q",  # a persistent id of two fields, not five
     "data.pkl has an unknown persistent reference ('storage', 1)"),
    (_str("w") + _tensor(4, 1).replace(_MARK + b"J" + struct.pack("<i", 4) + _TUPLE, _small(4)),  # size 4, not [4]
     "data.pkl rebuilds a tensor whose size or stride is not a list"),
])
def test_a_pickle_that_would_expand_is_refused_naming_the_member(tmp_path: Path, state: bytes,
                                                                 refusal: str) -> None:
    bomb = _pickle_archive(tmp_path / "bomb.pt", _module(state))
    with pytest.raises(EmberError) as e:
        import_model(str(bomb), str(bomb))
    assert refusal in e.value.message and "\n" not in e.value.message


def test_a_stride_0_tensor_cannot_copy_one_element_into_a_gigabyte(tmp_path: Path) -> None:
    bomb = _pickle_archive(tmp_path / "broadcast.pt", _module(_str("w") + _tensor(1 << 28, 0)),
                           {"data/0": bytes(4)})
    with pytest.raises(EmberError, match=r"data.pkl: a tensor of size \[268435456\] would take 1,073,741,824 bytes, "
                                         r"over 100 times the archive's size"):
        import_model(str(bomb), str(bomb))
    small = _pickle_archive(tmp_path / "small.pt", _module(_str("w") + _tensor(1000, 0)), {"data/0": bytes(4)})
    assert _Archive(str(small)).tensors["w"].shape == (1000,)


def test_the_pickle_caps_can_be_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the caps the same pickles load; the archive then fails for what it lacks (its module's code)."""
    deep = _pickle_archive(tmp_path / "deep.pt", _module(_str("deep") + b"]" * 300 + b"a" * 299))
    wide = _pickle_archive(tmp_path / "wide.pt", _module(_str("wide") + _laughs(6)))  # 10**6 lists
    for path, env in ((deep, "EMBER_ARCHIVE_DEPTH"), (wide, "EMBER_ARCHIVE_OBJECTS")):
        with pytest.raises(EmberError, match=env):
            import_model(str(path), str(path))
        monkeypatch.setenv(env, "2000000")
        with pytest.raises(EmberError, match="gen_models|code/__torch__/m.py") as e:
            import_model(str(path), str(path))
        assert env not in e.value.message


# ---------------------------------------------------------------------------------------------
# The .pt2's JSON


def _pt2_with_model_json(path: Path, text: bytes) -> Path:
    """bag_sum.pt2 with models/model.json replaced (deflated, as a user's re-zip might store it)."""
    with zipfile.ZipFile(MODELS / "bag_sum.pt2") as zin, zipfile.ZipFile(path, "w") as zout:
        for info in zin.infolist():
            data = text if info.filename.endswith("models/model.json") else zin.read(info)
            zout.writestr(info.filename, data, compress_type=zipfile.ZIP_DEFLATED)
    return path


@pytest.mark.parametrize(("text", "refusal"), [
    (b'{"a": [' + b"[]," * 1_000_000 + b"[]]}", "holds more than 1,000,000 JSON values (EMBER_ARCHIVE_OBJECTS)"),
    (b'{"a": ' + b"[" * 300 + b"]" * 300 + b"}", "nests more than 200 levels deep (EMBER_ARCHIVE_DEPTH)"),
])
def test_a_json_member_that_would_build_too_much_is_refused_before_parsing(tmp_path: Path, text: bytes,
                                                                           refusal: str) -> None:
    """3 MB of '[],' parses to a million lists (64 MB of objects); a 16 KB member could hold 5 million."""
    bomb = _pt2_with_model_json(tmp_path / "bomb.pt2", text)
    with pytest.raises(EmberError) as e:
        import_model(str(bomb), str(bomb))
    assert "archive member '" in e.value.message and "models/model.json' " in e.value.message
    assert refusal in e.value.message


def test_the_readme_lists_every_cap_with_its_default() -> None:
    """The README's limits table is the user's list of caps: each Limit in ember/limits.py, with its default."""
    from ember import limits

    readme = (ROOT / "README.md").read_text()
    caps = [v for v in vars(limits).values() if isinstance(v, limits.Limit)]
    assert len(caps) == len(limits.__all__) - 1
    for cap in caps:
        row = next((ln for ln in readme.splitlines() if ln.startswith(f"| `{cap.env}` |")), None)
        assert row is not None, f"{cap.env} is not in the README's limits table"
        shown = row.split("|")[2].strip()
        d = cap.default
        assert shown in {f"{d:,}", f"{d >> 30} GiB" if d % (1 << 30) == 0 else "", f"{d >> 20} MiB"}, (cap.env, shown)
