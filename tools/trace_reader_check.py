"""Load `ember-sim --trace` files into a real trace reader and say what it made of them.

The reader is catapult's trace viewer, the code of chrome://tracing, whose importer (`tr.importer.Import` into a
`tr.Model`) is run in Debian's headless Chromium.  Perfetto's trace processor could not be used here: its Python
package downloads its binary at run time from a host this machine cannot reach.  Set-up (docs/trace.md):

    apt-get install -y chromium && pip install playwright      # no `playwright install`: Debian's Chromium is used
    VIEWER=catapult's `tracing/bin/trace2html` run on an empty trace (one self-contained HTML file)
    python tools/trace_reader_check.py --viewer $VIEWER TRACE.json [TRACE.json ...]

For each file it prints the processes, their threads with how many slices and instants the reader found, the
counters with their samples, and the reader's import warnings; it exits 1 if there is a warning or if a core lacks
a track that --trace promises (access unit, callbacks, front-end waits, the queue counter) or DRAM has no channel.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]

READ = r"""
(text) => {
  const model = new tr.Model();
  const options = new tr.importer.ImportOptions();
  options.showImportWarnings = false;
  options.pruneEmptyContainers = false;
  new tr.importer.Import(model, options).importTraces([text]);
  const processes = {};
  for (const p of model.getAllProcesses()) {
    const threads = {};
    for (const t of Object.values(p.threads)) {
      const all = t.sliceGroup.slices;
      const instants = all.filter(s => s.duration === 0).length;  // a thread's instants become empty slices
      threads[t.name] = {slices: all.length - instants, instants: instants};
    }
    const counters = {};
    for (const c of Object.values(p.counters))
      counters[c.name] = c.series.length ? c.series[0].samples.length : 0;
    processes[p.name] = {pid: p.pid, threads: threads, counters: counters};
  }
  return {processes: processes, warnings: model.importWarnings.map(w => w.type + ": " + w.message)};
}
"""


def read(pages: Any, viewer: Path, trace: Path) -> dict[str, Any]:
    """What the reader parsed of `trace`."""
    page = pages.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(viewer.resolve().as_uri())
    page.wait_for_function("typeof tr !== 'undefined' && !!(tr.Model && tr.importer && tr.importer.Import)",
                           timeout=60_000)
    got = page.evaluate(READ, trace.read_text())
    page.close()
    got["warnings"] += [f"page error: {e}" for e in errors]
    return got


def problems(got: dict[str, Any]) -> list[str]:
    """What --trace promises that the reader did not find."""
    out = list(got["warnings"])
    cores = {n: p for n, p in got["processes"].items() if n.startswith("core ")}
    if not cores:
        out.append("no core process")
    for name, p in cores.items():
        for thread in ("access unit", "execute: callbacks, host ops, mispredictions", "execute: front-end waits"):
            if not p["threads"].get(thread, {}).get("slices"):
                out.append(f"{name}: no slices on '{thread}'")
        if not any(c.startswith("output queue bytes") for c in p["counters"]):
            out.append(f"{name}: no queue counter")
    dram = [p for n, p in got["processes"].items() if n.startswith("DRAM")]
    if not dram or not any(t["slices"] for t in dram[0]["threads"].values()):
        out.append("no DRAM channel with slices")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="+", type=Path)
    ap.add_argument("--viewer", type=Path, required=True, help="catapult's trace viewer as one HTML file")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="trace-reader-")
    failed = False
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(profile, executable_path=args.chromium, headless=True,
                                                            args=FLAGS)
            for trace in args.traces:
                t0 = time.monotonic()
                got = read(browser, args.viewer, trace)
                bad = problems(got)
                failed |= bool(bad)
                print(json.dumps({"trace": str(trace), "bytes": trace.stat().st_size,
                                  "seconds": round(time.monotonic() - t0, 1), **got, "problems": bad}, indent=1))
            browser.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
