"""Outputs respect what is at their path: a device or a FIFO is written through, never replaced by a regular file; a
symlink is followed and its target written; two outputs of one command may not be one file; ember-bench's
--json and --csv, and ember-sim's files after a failed --check, are all or none.  No test writes to a real device
node: the device here is a private one made in the test's directory."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest
from conftest import MODELS, ROOT, run_tool, tool

LEVELS = ROOT / "samples" / "levels"
EIR = LEVELS / "bag_sum.ts.emb.eir"


def test_a_fifo_is_written_through_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)  # blocks if replaced
    reader.start()
    r = run_tool("opt", "-O0", str(EIR), "-o", str(fifo))
    reader.join(timeout=30)
    assert r.returncode == 0, r.stderr.decode()
    assert stat.S_ISFIFO(fifo.stat().st_mode), "the FIFO was replaced"
    assert got and got[0].startswith(b".dae"), got
    assert [p.name for p in tmp_path.iterdir()] == ["out.fifo"]  # no temporary left beside it


def test_a_device_node_is_written_through_not_replaced(tmp_path: Path) -> None:
    """A private character device with /dev/null's numbers: `-o` onto it works as onto /dev/null in any Unix
    tool, and it stays a device."""
    null = tmp_path / "null"
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot make a device node here ({e})")
    r = run_tool("opt", "-O0", str(EIR), "-o", str(null))
    assert r.returncode == 0, r.stderr.decode()
    assert stat.S_ISCHR(null.stat().st_mode), "the device node was replaced by a regular file"


def test_a_symlink_is_followed_and_stays(tmp_path: Path) -> None:
    target = tmp_path / "real.eir"
    target.write_text("old\n")
    link = tmp_path / "link.eir"
    link.symlink_to(target)
    r = run_tool("opt", "--pass=lower-emb", str(EIR), "-o", str(link))
    assert r.returncode == 0, r.stderr.decode()
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert "loop.for" in target.read_text()


@pytest.mark.parametrize("alias", ["same", "symlink"])
def test_two_outputs_naming_one_file_are_refused(tmp_path: Path, alias: str) -> None:
    """ember-sim --outputs F --stats F used to write the statistics over the outputs and exit 0."""
    binary = tmp_path / "m.bin"
    assert run_tool("asm", str(LEVELS / "bag_sum.ts.dae"), "-o", str(binary)).returncode == 0
    out = tmp_path / "r.npz"
    other = out
    if alias == "symlink":
        out.write_bytes(b"kept")
        other = tmp_path / "alias.npz"
        other.symlink_to(out)
    r = run_tool("sim", str(binary), "--inputs", str(MODELS / "bag_sum.in.npz"), "--outputs", str(out),
                 "--stats", str(other), "-q")
    assert r.returncode == 1
    assert "two outputs name the same file" in r.stderr.decode()
    assert (out.read_bytes() == b"kept") if alias == "symlink" else not out.exists()


def test_a_failed_check_leaves_no_outputs(tmp_path: Path) -> None:
    binary = tmp_path / "m.bin"
    assert run_tool("asm", str(LEVELS / "bag_sum.ts.dae"), "-o", str(binary)).returncode == 0
    wrong = tmp_path / "wrong.npz"  # the expected outputs of another model
    wrong.write_bytes((MODELS / "embedding.ts.out.npz").read_bytes())
    out, stats = tmp_path / "out.npz", tmp_path / "stats.txt"
    r = run_tool("sim", str(binary), "--inputs", str(MODELS / "bag_sum.in.npz"), "--outputs", str(out),
                 "--stats", str(stats), "--check", str(wrong), "-q")
    assert r.returncode == 1, r.stderr.decode()
    assert not out.exists() and not stats.exists()


def test_bench_json_and_csv_are_all_or_none(tmp_path: Path) -> None:
    """--json and --trace that can be written and --csv that cannot: none is left behind (the JSON used to be, and
    the trace after a review of issue 35); --trace and --json may not name one file (the trace was overwritten)."""
    ok, trace = tmp_path / "ok.json", tmp_path / "t.json"
    run = ("bench", "--suite", "tiny", "--only", "RM1_L0", "--variants", "O0", "-q")
    r = run_tool(*run, "--json", str(ok), "--trace", str(trace), "--csv", str(tmp_path / "missing" / "x.csv"))
    assert r.returncode == 1
    assert "cannot write" in r.stderr.decode()
    assert not ok.exists() and not trace.exists()
    r = run_tool(*run, "--json", str(ok), "--trace", str(ok))
    assert r.returncode == 1
    assert r.stderr.decode().endswith(f"two outputs name the same file: '{ok}' and '{ok}'\n"), r.stderr.decode()


def _with_stdout(fd_setup: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    """Run a tool in its own process with fd 1 closed (`closed`) or a pipe whose reader has gone (`gone`)."""
    if fd_setup == "closed":
        return subprocess.run(tool(args[0]) + list(args[1:]), stderr=subprocess.PIPE, timeout=120,
                              preexec_fn=lambda: os.close(1))  # noqa: PLW1509 (no threads in the child yet)
    read, write = os.pipe()
    os.close(read)  # every write to the pipe now fails with EPIPE, whatever its size
    try:
        return subprocess.run(tool(args[0]) + list(args[1:]), stdout=write, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(write)


@pytest.mark.parametrize("fd_setup", ["closed", "gone"])
@pytest.mark.parametrize("args", [("opt", "-O0", str(EIR)), ("asm", str(LEVELS / "bag_sum.ts.dae"), "-o", "-"),
                                  ("opt", "--list-passes"), ("sim", "--help")],
                         ids=["text", "binary", "eager-option", "help"])
def test_a_lost_stdout_is_an_error(fd_setup: str, args: tuple[str, ...]) -> None:
    """Writing to a closed stdout (`>&-`) or a pipe nobody reads is exit 1 and one line saying so, never exit 0
    with the output lost (print, click and rich write nothing when stdout is closed) nor Python's complaint."""
    r = _with_stdout(fd_setup, *args)
    err = r.stderr.decode()
    assert r.returncode == 1, err
    want = "it is closed" if fd_setup == "closed" else "its reader stopped before the end"
    assert err.splitlines() == [f"ember-{args[0]}: error: cannot write to standard output: {want}"], err


def test_a_report_to_a_lost_stdout_is_an_error(tmp_path: Path) -> None:
    """ember-sim's statistics table, printed by rich, on a closed stdout: exit 1, and the outputs asked for are
    still written (they are files of their own)."""
    out, binary = tmp_path / "o.npz", tmp_path / "p.bin"
    assert run_tool("asm", str(LEVELS / "bag_sum.ts.O1.dae"), "-o", str(binary)).returncode == 0
    sim = ("sim", str(binary), "--inputs", str(MODELS / "bag_sum.in.npz"))
    r = _with_stdout("closed", *sim, "--outputs", str(out))
    assert r.returncode == 1, r.stderr.decode()
    assert r.stderr.decode().splitlines() == ["ember-sim: error: cannot write to standard output: it is closed"]
    assert out.stat().st_size > 0
    r = _with_stdout("gone", *sim)
    assert r.returncode == 1, r.stderr.decode()
    assert r.stderr.decode().splitlines() == [
        "ember-sim: error: cannot write to standard output: its reader stopped before the end"]


@pytest.mark.parametrize("args", [("asm", "-"), ("disasm", "-"), ("opt", "-O0", "-"), ("sim", "-", "--inputs", "x")])
def test_a_closed_stdin_is_an_error(args: tuple[str, ...]) -> None:
    """Reading `-` with stdin closed (`<&-`) is a one-line error; it was an internal error (sys.stdin is None)."""
    r = subprocess.run(tool(args[0]) + list(args[1:]), capture_output=True, timeout=120,
                       preexec_fn=lambda: os.close(0))  # noqa: PLW1509 (no threads in the child yet)
    assert r.returncode == 1
    assert r.stderr.decode().splitlines() == [f"ember-{args[0]}: error: cannot read standard input: it is closed"]


def test_an_unbuffered_stdout_loses_nothing_silently(tmp_path: Path) -> None:
    """Under PYTHONUNBUFFERED a write to a pipe whose reader goes away takes part of the data and returns its count,
    which print and rich ignore: ember-sim exited 0 having delivered 4 KiB of 13 KiB.  The reader here waits until
    the pipe (4 KiB) is full, so the tool is inside that write when the reader closes."""
    import fcntl
    import termios

    binary = tmp_path / "p.bin"
    assert run_tool("asm", str(LEVELS / "bag_sum.ts.O1.dae"), "-o", str(binary)).returncode == 0
    read, write = os.pipe()
    fcntl.fcntl(write, 1031, 4096)  # F_SETPIPE_SZ
    p = subprocess.Popen(tool("sim") + [str(binary), "--inputs", str(MODELS / "bag_sum.in.npz"), "--stats", "-", "-q"],
                         stdout=write, stderr=subprocess.PIPE, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    os.close(write)
    waiting = bytearray(4)
    while p.poll() is None:
        fcntl.ioctl(read, termios.FIONREAD, waiting)
        if int.from_bytes(waiting, "little") >= 4096:
            break
    os.close(read)
    err = p.communicate(timeout=120)[1].decode()
    assert p.returncode == 1, err
    assert err.splitlines() == ["ember-sim: error: cannot write to standard output: its reader stopped before the end"]


def test_dev_stdout_is_stdout(tmp_path: Path) -> None:
    """`-o /dev/stdout` onto a pipe wrote nothing ('No such file or directory': the link resolved to a name that
    is no file), and onto a file opened with >> replaced that file, losing what was there (a review of issue 35);
    it is stdout, so it is also one file with `-`."""
    log = tmp_path / "log"
    log.write_text("before\n")
    with open(log, "ab") as out:
        r = subprocess.run(tool("opt") + [str(EIR), "-o", "/dev/stdout"], stdout=out, stderr=subprocess.PIPE,
                           timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert log.read_text().startswith("before\nmodule attributes")
    r = subprocess.run(tool("opt") + [str(EIR), "-o", "/dev/stdout"], capture_output=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith(b"module attributes"), r.stderr.decode()
    r = subprocess.run(tool("opt") + [str(EIR), "-O0", "-o", "-", "--stats", "/dev/stdout"], capture_output=True,
                       timeout=120)
    assert r.returncode == 1
    assert r.stderr.decode() == "ember-opt: error: two outputs name the same file: '-' and '/dev/stdout'\n"


def test_a_full_stdout_is_one_line() -> None:
    """A write to stdout that fails otherwise than a broken pipe (a full disk, a file-size limit) printed the error
    and then a traceback, exit 120."""
    import resource
    import signal as signals

    def limited() -> None:
        signals.signal(signals.SIGXFSZ, signals.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100))

    for args in ([str(EIR), "-O3"], ["--list-passes"]):
        with tempfile.TemporaryFile() as out:
            r = subprocess.run(tool("opt") + args, stdout=out, stderr=subprocess.PIPE, timeout=120,
                               preexec_fn=limited)  # noqa: PLW1509 (no threads in the child yet)
        assert r.returncode == 1
        assert r.stderr.decode() == "ember-opt: error: cannot write to standard output: File too large\n"


def test_a_replaced_file_keeps_its_mode_and_a_failed_write_through_replaces_nothing(tmp_path: Path) -> None:
    """An output that replaces a 0600 file made it 0644; an output that is written through (here a directory, which
    cannot be) failed after the other outputs had been renamed into place."""
    private = tmp_path / "p.eir"
    private.write_text("")
    private.chmod(0o600)
    assert run_tool("opt", str(EIR), "-o", str(private)).returncode == 0
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and private.read_text().startswith("module")
    (tmp_path / "adir").mkdir()
    r = run_tool("opt", str(EIR), "-O0", "-o", str(tmp_path / "out.dae"), "--stats", str(tmp_path / "adir"))
    assert r.returncode == 1 and b"adir: error: cannot write: Is a directory" in r.stderr
    assert not (tmp_path / "out.dae").exists()
