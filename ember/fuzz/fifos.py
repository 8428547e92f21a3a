"""The other end of a FIFO a tool is given, in a thread, such that no case can block on it: whatever the tool
does (reads it, writes it, never opens it, replaces it), `close` returns within seconds."""

from __future__ import annotations

import errno
import os
import select
import threading
from pathlib import Path

WAIT = 5.0  # seconds `close` waits for the thread once the tool is done


class Drain:
    """Reads a FIFO output to its end.  It holds a write end of its own until `close`, so the end it sees is the
    tool's last close after the tool has run, and a tool that never opened the FIFO leaves nothing waiting."""

    def __init__(self, path: Path):
        self.rfd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.hold = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        self.data = bytearray()
        self.thread = threading.Thread(target=self._read, name="fuzz-drain", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                if not select.select([self.rfd], [], [], 0.1)[0]:
                    continue
                try:
                    chunk = os.read(self.rfd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    return
                self.data += chunk
        except OSError:  # closed under it by `close`: the tool left a write end open
            return

    def close(self) -> bytes:
        """Everything read; call once the tool is done."""
        os.close(self.hold)
        self.thread.join(WAIT)
        os.close(self.rfd)
        return bytes(self.data)


class Feed:
    """Writes `data` into a FIFO input once a reader has opened it, then closes it; `data` None closes it at
    once (a writer that sends nothing).  It opens only when a reader is there, so it never waits for one."""

    def __init__(self, path: Path, data: bytes | None):
        self.path, self.payload = path, data or b""
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._write, name="fuzz-feed", daemon=True)
        self.thread.start()

    def _write(self) -> None:
        while not self.stop.is_set():
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                    return
                self.stop.wait(0.005)
                continue
            try:
                os.set_blocking(fd, True)
                view = memoryview(self.payload)
                while view:
                    view = view[os.write(fd, view):]
            except OSError:  # the reader stopped early (refused at its cap): EPIPE
                pass
            finally:
                os.close(fd)
            return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(WAIT)
