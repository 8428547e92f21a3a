"""Decompression bombs: an archive member that would inflate far past its stored size is refused before
it is inflated, naming the member (issue 13's 3 MB archive that inflated to 3 GiB)."""

from __future__ import annotations

import time
import zipfile
from pathlib import Path

import pytest
from conftest import MODELS, run_tool

from ember.frontends import import_model
from ember.ir.diagnostics import EmberError


def _bomb_copy(src: Path, dst: Path, member_suffix: str, inflated: int) -> str:
    """`src` with the member ending in `member_suffix` replaced by `inflated` zero bytes, deflated."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        victim = next(n for n in zin.namelist() if n.endswith(member_suffix))
        for info in zin.infolist():
            if info.filename == victim:
                zout.writestr(victim, bytes(inflated), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            else:
                zout.writestr(info, zin.read(info.filename))
    return victim


@pytest.mark.parametrize(("archive", "member"), [("bag_sum.pt2", "model.json"), ("bag_sum.traced.pt", "data.pkl")])
def test_a_member_that_inflates_a_thousandfold_is_refused_before_inflating(tmp_path: Path, archive: str,
                                                                           member: str) -> None:
    bomb = tmp_path / archive
    victim = _bomb_copy(MODELS / archive, bomb, member, 64 << 20)  # 64 MiB of zeros deflate to ~64 KB
    start = time.perf_counter()
    with pytest.raises(EmberError) as e:
        import_model(str(bomb), str(bomb))
    assert time.perf_counter() - start < 2.0
    assert f"archive member '{victim}' would inflate to {64 << 20:,} bytes" in e.value.message
    r = run_tool("import", str(bomb), "-o", str(tmp_path / "out.eir"))
    assert r.returncode == 1 and not (tmp_path / "out.eir").exists()
    assert r.stderr.decode().count("\n") == 1 and "EMBER_ARCHIVE_RATIO" in r.stderr.decode()


def test_the_limit_can_be_raised_for_a_member_that_really_is_that_compressible(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The same bomb passes the size check with a higher ratio, and then fails as what it is: not JSON."""
    bomb = tmp_path / "bag_sum.pt2"
    _bomb_copy(MODELS / "bag_sum.pt2", bomb, "model.json", 64 << 20)
    monkeypatch.setenv("EMBER_ARCHIVE_RATIO", "100000")
    r = run_tool("import", str(bomb), "-o", str(tmp_path / "out.eir"))
    assert r.returncode == 1
    assert "would inflate" not in r.stderr.decode()
