"""The fast engine's compile cache (ember/sim/fast/build.py) against planted, truncated and corrupt entries,
unsafe or unusable directories, broken compilers and signals during compilation; results are checked
against the reference engine."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import MODELS, ROOT, compile_model, run_tool, tool

from ember.backend.binary import assemble
from ember.backend.dae import Program
from ember.ir.diagnostics import EmberError
from ember.machine import load_machine
from ember.sim import reference
from ember.sim.fast import build
from ember.sim.fast import engine as fast
from ember.sim.fast.c_source import generate

MACHINE = load_machine("default")
MODEL = "embedding.ts.onnx"
INPUTS = MODELS / "embedding.in.npz"
HOST_TIME = {"host_seconds", "sim_cycles_per_host_second", "lookups_per_host_second"}
CC = build.compiler()
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler")

# A library whose constructor leaves a marker file: if it is ever loaded, the marker appears.
PLANTED_C = r"""
#include <stdio.h>
#include <stdint.h>
__attribute__((constructor)) static void planted(void) { FILE *f = fopen("%s", "w"); if (f) fclose(f); }
int64_t simulate(void) { return 0; }
void release(void) {}
"""


@pytest.fixture(scope="module")
def program() -> Program:
    return compile_model(MODELS / MODEL, "O1")


@pytest.fixture(scope="module")
def expected(program: Program) -> tuple[dict[str, np.ndarray], dict]:
    return reference.simulate(program, dict(np.load(INPUTS)), MACHINE)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory of this test's own, and no library loaded in this process yet."""
    d = tmp_path / "cache"
    monkeypatch.setenv("EMBER_CACHE_DIR", str(d))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(build, "_loaded", {})
    return d


def run_fast(program: Program) -> tuple[dict[str, np.ndarray], dict]:
    program.__dict__.pop("_fast_libs", None)  # as a fresh process would: through build.load
    return fast.simulate(program, dict(np.load(INPUTS)), MACHINE, None, False)


def assert_as_reference(got: tuple[dict[str, np.ndarray], dict], want: tuple[dict[str, np.ndarray], dict]) -> None:
    (out, st), (ref_out, ref_st) = got, want
    assert out.keys() == ref_out.keys()
    for k in ref_out:
        np.testing.assert_array_equal(out[k], ref_out[k])
    assert {k: v for k, v in st.items() if k not in HOST_TIME} == \
        {k: v for k, v in ref_st.items() if k not in HOST_TIME}


def key(program: Program, cc: str) -> str:
    return build.key_of(generate(program, frozenset(), MACHINE.execute.simd_bits), cc)


def fake_cc(path: Path, body: str) -> str:
    """A shell script standing in for the C compiler; `$out` is the path after -o."""
    path.write_text('#!/bin/sh\nout=""\nprev=""\nfor a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
                    + body)
    path.chmod(0o755)
    return str(path)


def listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.mark.parametrize("sidecar", ["none", "of other bytes", "of another key"])
def test_a_planted_library_is_never_loaded(program: Program, expected: tuple, cache: Path, tmp_path: Path,
                                           sidecar: str) -> None:
    marker = tmp_path / "constructor-ran"
    (tmp_path / "planted.c").write_text(PLANTED_C % marker)
    subprocess.run([CC, *build.CFLAGS, str(tmp_path / "planted.c"), "-o", str(tmp_path / "planted.so")], check=True)
    k = key(program, CC)
    cache.mkdir(mode=0o700)
    so, side = build.entry(cache, k)
    planted = (tmp_path / "planted.so").read_bytes()
    so.write_bytes(planted)
    if sidecar == "of other bytes":
        side.write_text(build.sidecar_text(planted + b"\0", k))
    elif sidecar == "of another key":
        side.write_text(build.sidecar_text(planted, "0" * 32))
    assert_as_reference(run_fast(program), expected)
    assert not marker.exists()
    assert not fast.notes
    rebuilt = so.read_bytes()
    assert rebuilt != planted and side.read_text() == f"sha256 {hashlib.sha256(rebuilt).hexdigest()} {k}\n"
    assert listing(cache) == sorted([so.name, side.name])  # no temporary file left behind


@pytest.mark.parametrize("sidecar", ["of the whole library", "of the truncated bytes"])
def test_a_truncated_library_is_rebuilt(program: Program, expected: tuple, cache: Path, sidecar: str) -> None:
    assert_as_reference(run_fast(program), expected)  # builds the entry
    k = key(program, CC)
    so, side = build.entry(cache, k)
    whole = so.read_bytes()
    so.write_bytes(whole[: len(whole) // 2])
    if sidecar == "of the truncated bytes":  # passes the hash check, then fails to load: rebuilt once
        side.write_text(build.sidecar_text(whole[: len(whole) // 2], k))
    build._loaded.clear()
    assert_as_reference(run_fast(program), expected)
    assert not fast.notes
    assert len(so.read_bytes()) == len(whole) and build.trusted_bytes(cache, k) == so.read_bytes()
    assert listing(cache) == sorted([so.name, side.name])


def test_an_entry_is_trusted_for_its_own_key_only(program: Program, expected: tuple, cache: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A trusted entry is loaded without compiling (a compiler that would fail is not called); an entry moved to
    another key's name is not trusted, as its sidecar names its key."""
    assert_as_reference(run_fast(program), expected)
    calls = tmp_path / "calls"
    failing = fake_cc(tmp_path / "cc", f"echo x >> {calls}\nexit 1\n")
    monkeypatch.setenv("CC", failing)
    old, new = key(program, CC), key(program, failing)
    for a, b in zip(build.entry(cache, old), build.entry(cache, new)):
        os.rename(a, b)
    build._loaded.clear()
    with pytest.raises(EmberError, match="C compiler .* rejected"):
        run_fast(program)
    assert calls.read_text() == "x\n" and listing(cache) == [f"ember_{new}.sha256", f"ember_{new}.so"]
    build.entry(cache, new)[1].write_text(build.sidecar_text(build.entry(cache, new)[0].read_bytes(), new))
    assert_as_reference(run_fast(program), expected)
    assert calls.read_text() == "x\n"


def test_a_group_or_world_writable_directory_is_refused(program: Program, cache: Path, tmp_path: Path) -> None:
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.raises(EmberError, match=f"{cache} is writable by others.*chmod go-w {cache}"):
        run_fast(program)
    assert listing(cache) == []
    binary = tmp_path / "m.bin"
    binary.write_bytes(assemble(program))
    cache.chmod(0o770)
    r = run_tool("sim", str(binary), "--inputs", str(INPUTS), "-q")
    err = r.stderr.decode()
    assert r.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err and "mode 770" in err, err


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_directory_of_another_user_is_refused(program: Program, cache: Path) -> None:
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, 65534)
    with pytest.raises(EmberError, match=f"{cache} belongs to user id 65534, not to you"):
        run_fast(program)
    assert listing(cache) == []


def test_a_new_directory_is_private(program: Program, expected: tuple, cache: Path) -> None:
    assert_as_reference(run_fast(program), expected)
    st = cache.stat()
    assert st.st_mode & 0o777 == 0o700 and st.st_uid == os.geteuid()


def test_a_build_removes_temporary_files_only_once_stale(program: Program, expected: tuple, cache: Path) -> None:
    """What a SIGKILLed build leaves is removed by a later build once a day old; a running build's files stay."""
    cache.mkdir(mode=0o700)
    stale, fresh = cache / "tmp-ember_0.1.a.so", cache / "tmp-ember_0.2.b.so"
    for path in (stale, fresh):
        path.write_bytes(b"partial")
    old = time.time() - build.STALE_SECONDS - 60
    os.utime(stale, (old, old))
    assert_as_reference(run_fast(program), expected)
    assert not stale.exists() and fresh.exists()


def test_an_unusable_directory_gives_way_to_a_private_one_removed_at_exit(program: Program, expected: tuple,
                                                                         tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    binary = tmp_path / "m.bin"
    binary.write_bytes(assemble(program))
    env = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path / "file" / "cache"), PYTHONPATH=str(ROOT))
    r = subprocess.run([*tool("sim"), str(binary), "--inputs", str(INPUTS), "--outputs", str(tmp_path / "o.npz"),
                        "-q"], capture_output=True, env=env, timeout=300)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    note = next(line for line in err.splitlines() if "private directory removed at exit" in line)
    private = Path(note.split("compiled programs go to ")[1].split(",")[0])
    assert private.parent == Path(tempfile.gettempdir()) and private.name.startswith("ember-fast-")
    assert not private.exists()  # removed when the process ended
    np.testing.assert_array_equal(np.load(tmp_path / "o.npz")["output"], expected[0]["output"])


def test_the_private_directory_is_the_processes_own(program: Program, expected: tuple, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "file"))
    monkeypatch.setattr(build, "_loaded", {})
    monkeypatch.setattr(build, "_private", [])
    assert_as_reference(run_fast(program), expected)
    assert len(fast.notes) == 1 and "is not a directory" in fast.notes[0]
    private = build._private[0]
    st = private.stat()
    assert st.st_mode & 0o777 == 0o700 and st.st_uid == os.geteuid() and private != Path("/tmp/ember-fast")
    assert any(p.suffix == ".so" for p in private.iterdir())


@pytest.mark.parametrize("entry", ["absent", "untrusted", "trusted"])
def test_a_compiler_producing_garbage_falls_back_to_the_reference(program: Program, expected: tuple, cache: Path,
                                                                  tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  entry: str) -> None:
    calls = tmp_path / "calls"
    cc = fake_cc(tmp_path / "garbage-cc", f'echo x >> {calls}\nprintf "not an ELF file" > "$out"\n')
    monkeypatch.setenv("CC", cc)
    k = key(program, cc)
    cache.mkdir(mode=0o700)
    so, side = build.entry(cache, k)
    if entry != "absent":
        so.write_bytes(b"\x7fELF garbage")
    if entry == "trusted":
        side.write_text(build.sidecar_text(b"\x7fELF garbage", k))
    assert_as_reference(run_fast(program), expected)
    assert len(fast.notes) == 1 and "does not load even when rebuilt" in fast.notes[0], fast.notes
    assert "the reference engine ran it" in fast.notes[0]
    assert ".so: file too short)" in fast.notes[0], fast.notes  # the loader's own words, not the error's type
    assert calls.read_text() == "x\n"  # built (or rebuilt) once, not again
    assert listing(cache) == []  # the useless entry is removed; nothing temporary is left


SIGNAL_SCRIPT = """
import signal, sys
import numpy as np
from ember.backend.binary import disassemble
from ember.sim.fast import engine as fast
from ember.machine import load_machine
if sys.argv[3] == "handler":
    def handler(signum, frame):
        open(sys.argv[4], "w").write(str(signum))
        sys.exit(3)
    signal.signal(signal.SIGTERM, handler)
program = disassemble(open(sys.argv[1], "rb").read(), "m.bin")
fast.simulate(program, dict(np.load(sys.argv[2])), load_machine("default"), None, False)
"""


def _gone(pid: int) -> bool:
    """No such process, or a zombie (killed; its new parent has not reaped it yet, as under pytest-xdist)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


RACE_SCRIPT = """
import os, signal, subprocess, sys
import numpy as np
from ember.backend.binary import disassemble
from ember.sim.fast import engine as fast
from ember.machine import load_machine
real = subprocess.Popen
def popen(*args, **kwargs):
    child = real(*args, **kwargs)
    open(sys.argv[3], "w").write(str(child.pid))
    os.kill(os.getpid(), signal.SIGTERM)  # the signal arrives before Popen has returned the child
    sum(range(1000))
    return child
subprocess.Popen = popen
program = disassemble(open(sys.argv[1], "rb").read(), "m.bin")
fast.simulate(program, dict(np.load(sys.argv[2])), load_machine("default"), None, False)
"""


def test_sigterm_while_the_compiler_starts_still_kills_it(program: Program, tmp_path: Path) -> None:
    """A signal that arrives while the compiler's process is being started, before the caller holds it, waits
    until it does: cleanup then kills the compiler (it was left running, seen under load)."""
    cc = fake_cc(tmp_path / "slow-cc", "exec sleep 60\n")
    binary = tmp_path / "m.bin"
    binary.write_bytes(assemble(program))
    cache, child = tmp_path / "cache", tmp_path / "child"
    env = dict(os.environ, CC=cc, EMBER_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-c", RACE_SCRIPT, str(binary), str(INPUTS), str(child)], env=env,
                       capture_output=True, timeout=60)
    assert r.returncode == -signal.SIGTERM, r.stderr.decode()
    pid, deadline = int(child.read_text()), time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(pid)  # killed, not left running for a minute
    assert listing(cache) == []


@pytest.mark.parametrize("caller", ["default", "handler"])
def test_sigterm_during_compilation_leaves_no_temporary_file(program: Program, tmp_path: Path, caller: str) -> None:
    """A slow compiler is interrupted: its partial output and every temporary name are removed, the compiler is
    killed, and then the caller's SIGTERM disposition acts (the default ends the process by the signal)."""
    started = tmp_path / "started"
    cc = fake_cc(tmp_path / "slow-cc", f'printf partial > "$out"\necho $$ > {started}.tmp\nmv {started}.tmp {started}\n'
                 'exec sleep 60\n')
    binary = tmp_path / "m.bin"
    binary.write_bytes(assemble(program))
    cache = tmp_path / "cache"
    env = dict(os.environ, CC=cc, EMBER_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    marker = tmp_path / "handler-ran"
    proc = subprocess.Popen([sys.executable, "-c", SIGNAL_SCRIPT, str(binary), str(INPUTS), caller, str(marker)],
                            env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not started.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode() if proc.stderr else ""
        time.sleep(0.05)
    assert any(p.name.startswith("tmp-") for p in cache.iterdir())  # the compiler's partial output is there
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    if caller == "default":
        assert proc.returncode == -signal.SIGTERM, err.decode()
    else:
        assert proc.returncode == 3 and marker.read_text() == str(int(signal.SIGTERM)), err.decode()
    assert listing(cache) == []
    pid, deadline = int(started.read_text()), time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:  # killed, but the kernel may not have cleared it yet
        time.sleep(0.05)
    assert _gone(pid)  # the compiler was killed, not left running


def test_the_compilers_own_files_stay_out_of_tmpdir_and_a_full_disk_falls_back(
        program: Program, expected: tuple, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiler writes its assembly and object under $TMPDIR, which the build points at a directory of its own
    in the cache and removes, so a compiler that stops early (killed, or failing) leaves nothing in the user's
    $TMPDIR; a compiler that finds no room on the disk means a cache that cannot be written, and the reference
    engine runs the program, as docs/cache.md promises (issue 35)."""
    user_tmp = tmp_path / "tmp"
    user_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(user_tmp))
    cc = fake_cc(tmp_path / "full-cc", 'printf partial > "$TMPDIR/ccQ1.s"\n'
                 'echo "cc: error: cannot write: No space left on device" >&2\nexit 1\n')
    monkeypatch.setenv("CC", cc)
    build._loaded.clear()
    assert_as_reference(run_fast(program), expected)
    assert len(fast.notes) == 1 and "no space left on device" in fast.notes[0], fast.notes
    assert listing(user_tmp) == []
    assert not [p for p in cache.iterdir() if p.name.startswith("tmp-ember_")]
