"""`ember-bench --sweep`: the cartesian product of machine parameters, variants and engines over a suite.

A sweep is a list of points (workload, variant, swept settings). Each point is one `bench.run.run`, independent
of every other, so points run in any order, on a local process pool or a Dask cluster, and a point's row never
depends on where or alongside what it ran. Finished points are appended to a JSON-lines file the moment they
finish, so a killed sweep loses only the points that were running, and rerunning the same command skips the
points the file already holds.
"""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import re
import signal
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rich.table import Table

from ..files import read_bytes
from ..ir.diagnostics import EmberError
from ..machine import Machine
from ..sim.engines import ENGINES
from .report import cycles_cell, frac_cell
from .run import HOST_TIME as HOST_TIME  # re-exported: the figures a row's readers leave out when comparing
from .run import STATS, VARIANTS, is_stat, run
from .workloads import Workload

PSEUDO_KEYS = ("variant", "engine")  # swept like machine keys, but they pick what runs, not the machine
CONTEXT = ("suite", "machine", "overrides")  # what every row of one sweep file must share
SHOWN = ("cycles", "roofline_fraction", "dram_bandwidth_fraction")  # the console table's statistics


@dataclass(frozen=True)
class Axis:
    """One `--sweep KEY=V1,V2`: the key and its values, each as (text for Machine.set, typed value for rows)."""

    key: str
    options: tuple[tuple[str, Any], ...]

    @property
    def values(self) -> list[Any]:
        return [v for _, v in self.options]


@dataclass(frozen=True)
class Point:
    """One simulation of the sweep; `settings` holds every swept key but `variant`, in --sweep order."""

    workload: str
    variant: str
    settings: tuple[tuple[str, Any], ...]

    def key(self) -> str:
        """What identifies the point in the results file (typed values, so '16' and '0x10' are one point)."""
        return json.dumps([self.workload, self.variant, [[k, v] for k, v in self.settings]])

    def label(self) -> str:
        return " ".join([self.workload, self.variant, *(f"{k}={show(v)}" for k, v in self.settings)])


@dataclass(frozen=True)
class Task:
    """Everything a worker needs to run a point; plain frozen dataclasses, so it pickles to any process."""

    point: Point
    workload: Workload
    machine: Machine
    engine: str
    timing_only: bool = False


def show(value: Any) -> str:
    """A swept value as people write it: 16 rather than 16.0, but every digit a float needs."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def machine_value(m: Machine, key: str) -> Any:
    """The typed value of a dotted key `Machine.set` accepted, read back so rows hold what was simulated."""
    parts = key.split(".")
    if key == "caches.line_bytes":
        return m.line_bytes
    if parts[0] == "caches":
        return getattr(m.cache(parts[1]), parts[2])
    obj: Any = m
    for part in parts:
        obj = getattr(obj, part)
    return obj


def parse_axes(items: Sequence[str], base: Machine, fixed: Sequence[str] = ()) -> list[Axis]:
    """`KEY=V1,V2,...` options as axes, every key and value checked now, so a typo costs no simulation.
    A key also in `fixed` (the --set keys) is refused: which of the two would win is not obvious."""
    axes: list[Axis] = []
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise EmberError(f"bad --sweep '{item}' (expected KEY=V1,V2,..., e.g. dram.channels=1,2,4,8)")
        if key in fixed:
            raise EmberError(f"--sweep {key} is also given with --set (sweep it or set it, not both)")
        if any(a.key == key for a in axes):
            raise EmberError(f"--sweep {key} is given twice (list all its values in one --sweep)")
        texts = [t.strip() for t in text.split(",") if t.strip()]
        if not texts:
            raise EmberError(f"--sweep {key}: no values given (expected {key}=V1,V2,...)")
        options: dict[Any, str] = {}  # typed value -> first text that gave it, in order
        for t in texts:
            if key in PSEUDO_KEYS:
                valid = VARIANTS if key == "variant" else ENGINES
                if t not in valid:
                    raise EmberError(f"--sweep {key}: unknown {key} '{t}' (valid: {', '.join(valid)})")
                value: Any = t
            else:
                try:
                    value = machine_value(base.set(key, t), key)
                except EmberError as e:
                    raise EmberError(f"--sweep {key}={t}: {e.message}") from None
            options.setdefault(value, t)
        axes.append(Axis(key, tuple((t, v) for v, t in options.items())))
    return axes


class Sweep:
    """The points of a sweep and how to run and record each; built once, before anything runs."""

    def __init__(self, scale: str, workloads: Sequence[Workload], variants: Sequence[str], axes: Sequence[Axis],
                 base: Machine, overrides: Sequence[str], engine: str, timing_only: bool = False) -> None:
        self.scale = scale
        self.workloads = {w.name: w for w in workloads}
        self.axes = [a for a in axes if a.key != "variant"]
        by_key = {a.key: a for a in axes}
        self.variants = by_key["variant"].values if "variant" in by_key else list(variants)
        self.base = base
        self.overrides = list(overrides)
        self.engine = engine
        self.timing_only = timing_only  # rows are the same either way, so it is no part of a file's context
        self.keys = [a.key for a in self.axes]
        self.swept = [a.key for a in axes]  # what a plot may put on its x axis, variant included
        self.context = {"suite": scale, "machine": base.name, "overrides": " ".join(overrides)}
        self._machines: dict[tuple[tuple[str, Any], ...], Machine] = {}
        machine_axes = [a for a in self.axes if a.key not in PSEUDO_KEYS]
        for combo in itertools.product(*(a.options for a in machine_axes)):  # every machine, valid before any run
            m = base
            for axis, (text, _) in zip(machine_axes, combo):
                try:
                    m = m.set(axis.key, text)
                except EmberError as e:
                    where = ", ".join(f"{a.key}={v}" for a, (_, v) in zip(machine_axes, combo))
                    raise EmberError(f"--sweep point {where}: {e.message}") from None
            self._machines[tuple((a.key, v) for a, (_, v) in zip(machine_axes, combo))] = m
        settings = list(itertools.product(*([(a.key, v) for v in a.values] for a in self.axes)))
        self.points = [Point(w.name, v, tuple(s)) for w in workloads for v in self.variants for s in settings]

    def engine_of(self, p: Point) -> str:
        return dict(p.settings).get("engine", self.engine)

    def task(self, p: Point) -> Task:
        machine = self._machines[tuple((k, v) for k, v in p.settings if k not in PSEUDO_KEYS)]
        return Task(p, self.workloads[p.workload], machine, self.engine_of(p), self.timing_only)

    def row(self, p: Point, stats: dict[str, float]) -> dict[str, Any]:
        """workload, variant, each swept value, engine, the suite/machine/--set context, then every statistic."""
        return {"workload": p.workload, "variant": p.variant, **dict(p.settings), "engine": self.engine_of(p),
                **self.context, **stats}

    def point_key(self, row: dict[str, Any]) -> str | None:
        """The key of the point a row records, or None when the row lacks one of this sweep's keys."""
        if any(k not in row for k in ("workload", "variant", *self.keys)):
            return None
        return Point(row["workload"], row["variant"], tuple((k, row[k]) for k in self.keys)).key()


# --- the results file ----------------------------------------------------------------------------------------


def load_finished(path: str, sweep: Sweep) -> dict[str, dict[str, Any]]:
    """Rows already in `path` by point key. A partial last line (a run killed mid-write) is cut off, so the
    next append starts on a line of its own; a file of another sweep's context is refused, not mixed in."""
    file = Path(path)
    if not os.path.exists(path):  # nothing there yet (a dangling link included): nothing finished
        return {}
    data = read_bytes(path)  # bounded: EMBER_INPUT_BYTES
    end = data.rfind(b"\n") + 1
    if end < len(data):
        try:
            with file.open("r+b") as f:
                f.truncate(end)
        except OSError as e:
            raise EmberError(f"cannot write: {e.strerror or e}", path) from None
    finished: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(data[:end].decode(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict) or "workload" not in row or "variant" not in row:
            raise EmberError("not a sweep row (each line is one JSON object that --sweep-out wrote)", f"{path}:{n}")
        theirs = {k: row.get(k) for k in CONTEXT}
        if theirs != sweep.context:
            diff = ", ".join(f"{k} {theirs[k]!r} here, {sweep.context[k]!r} now" for k in CONTEXT
                             if theirs[k] != sweep.context[k])
            raise EmberError(f"holds a point of another sweep ({diff}); give this sweep its own --sweep-out file",
                             f"{path}:{n}")
        key = sweep.point_key(row)
        if key is not None:
            finished[key] = row
    return finished


class Appender:
    """Appends one JSON row a line, flushed at once, so whatever finished survives a kill."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._file: IO[str] | None = None
        if path is not None:
            try:
                self._file = open(path, "a", encoding="utf-8")  # closed by close(), after the run
            except OSError as e:
                raise EmberError(f"cannot write: {e.strerror or e}", path) from None

    def write(self, row: dict[str, Any]) -> None:
        if self._file is not None:
            self._file.write(json.dumps(row) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


# --- running -------------------------------------------------------------------------------------------------


def run_task(task: Task) -> dict[str, Any]:
    """One point in whatever process runs it: {"stats": ...}, or {"error": message} for a user-facing error,
    returned rather than raised so that it crosses any process or network boundary intact."""
    try:
        res = run(task.workload, task.point.variant, task.machine, engine=task.engine, timing_only=task.timing_only)
    except EmberError as e:
        return {"error": f"{e.where}: {e.message}" if e.where else e.message}
    return {"stats": res.stats}


Outcomes = Generator[tuple[Task, dict[str, Any]], None, None]


def cpu_count() -> int:
    """CPUs this process may use (its affinity mask where the OS has one), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:
        return os.cpu_count() or 1


def execute(tasks: Sequence[Task], jobs: int, client: Any = None,
            started: Callable[[Task], None] | None = None) -> Outcomes:
    """(task, outcome) as each finishes: inline, on a local process pool, or on a Dask cluster (`client`, from
    `connect`). After the first error no new point starts; those already running finish and are yielded, so
    their work is kept."""
    if client is not None:
        yield from _on_dask(tasks, client)
    elif jobs <= 1 or len(tasks) <= 1:
        for t in tasks:
            if started is not None:
                started(t)
            outcome = run_task(t)
            yield t, outcome
            if "error" in outcome:
                return
    else:
        yield from _on_pool(tasks, min(jobs, len(tasks)))


def _ignore_sigint() -> None:
    """Workers leave Ctrl-C to the parent, which stops them; otherwise each prints its own traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _on_pool(tasks: Sequence[Task], workers: int) -> Outcomes:
    # spawn, not fork: the parent runs a progress-bar thread, and forking a threaded process can deadlock
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"), initializer=_ignore_sigint)
    try:
        futures: dict[Future[dict[str, Any]], Task] = {pool.submit(run_task, t): t for t in tasks}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                if f.cancelled():
                    continue
                outcome = f.result()
                yield futures[f], outcome
                if "error" in outcome:
                    for g in pending:
                        g.cancel()
                    pending = {g for g in pending if not g.cancelled()}
    except BaseException:  # interrupted, or the caller stopped: do not wait for the points still running
        _stop_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    stop = getattr(pool, "terminate_workers", None)  # Python 3.14+
    if stop is not None:
        stop()
        return
    for process in list(getattr(pool, "_processes", {}).values()):
        process.terminate()


def connect(scheduler: str) -> Any:
    """A Dask client for `scheduler`, or a one-line error; connected before any progress bar is drawn."""
    if not re.fullmatch(r"([a-z]+://)?(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):\d+", scheduler):
        raise EmberError(f"--scheduler '{scheduler}' is not a scheduler address like tcp://HOST:PORT")
    try:
        from distributed import Client
    except ImportError:
        raise EmberError("--scheduler needs dask.distributed, which is not installed: pip install 'ember[dask]'"
                         ) from None
    try:
        return Client(scheduler, timeout=10, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as e:
        raise EmberError(f"cannot connect to the Dask scheduler at {scheduler}: {e}") from None


def _on_dask(tasks: Sequence[Task], client: Any) -> Outcomes:
    """The same tasks on a Dask distributed cluster; its workers need this version of ember installed."""
    from distributed import as_completed

    futures = [client.submit(run_task, t, pure=False) for t in tasks]
    by_key = {f.key: t for f, t in zip(futures, tasks)}
    stopping = False
    try:
        for f in as_completed(futures, loop=client.loop):
            if f.cancelled():
                continue
            outcome = f.result()
            yield by_key[f.key], outcome
            if "error" in outcome and not stopping:
                stopping = True
                client.cancel([g for g in futures if not g.done()])
    finally:
        client.cancel([g for g in futures if not g.done()])  # interrupted: free the cluster for others


def run_sweep(sweep: Sweep, pending: Sequence[Point], out: Appender, jobs: int, client: Any = None,
              started: Callable[[Point], None] | None = None,
              finished: Callable[[Point], None] | None = None) -> dict[str, dict[str, Any]]:
    """Run `pending`, appending each row to `out` as it finishes; rows by point key. The first failing point
    becomes the error, after the points already running have finished and been recorded."""
    rows: dict[str, dict[str, Any]] = {}
    failure: str | None = None
    on_start = None if started is None else (lambda t: started(t.point))
    results = execute([sweep.task(p) for p in pending], jobs, client, on_start)
    try:
        for task, outcome in results:
            if "error" in outcome:
                failure = failure or f"{task.point.label()}: {outcome['error']}"
                continue
            row = sweep.row(task.point, outcome["stats"])
            out.write(row)
            rows[task.point.key()] = row
            if finished is not None:
                finished(task.point)
    finally:
        results.close()
    if failure is not None:
        raise EmberError(f"sweep point {failure}")
    return rows


# --- reporting -----------------------------------------------------------------------------------------------


def parse_plots(items: Sequence[str], sweep: Sweep) -> list[tuple[str, str]]:
    """`METRIC:PARAM` pairs, checked against the statistics and the swept keys before anything runs."""
    plots: list[tuple[str, str]] = []
    for item in items:
        metric, colon, param = (s.strip() for s in item.rpartition(":"))
        if not colon or not metric or not param:
            raise EmberError(f"bad --plot-sweep '{item}' (expected METRIC:PARAM, e.g. cycles:dram.channels)")
        if not is_stat(metric):
            raise EmberError(f"--plot-sweep {item}: unknown statistic '{metric}' (valid: {', '.join(STATS)}, "
                              "energy.<block>_j)")
        if param not in sweep.swept:
            raise EmberError(f"--plot-sweep {item}: '{param}' is not swept (swept: {', '.join(sweep.swept)})")
        plots.append((metric, param))
    return list(dict.fromkeys(plots))


def default_plots(sweep: Sweep) -> list[tuple[str, str]]:
    """Without --plot-sweep, cycles against each swept parameter (variant only when nothing else is swept)."""
    params = [k for k in sweep.keys if k != "engine"] or sweep.swept
    return [("cycles", p) for p in params]


def caption(sweep: Sweep) -> str:
    """What was held fixed and what was swept, under the table and on every figure."""
    sets = f"--set {' '.join(sweep.overrides)}" if sweep.overrides else "no --set overrides"
    swept = "; ".join(f"{k}={','.join(map(show, v))}" for k, v in
                      [("variant", sweep.variants), *((a.key, a.values) for a in sweep.axes)])
    engine = "" if "engine" in sweep.keys else f", engine {sweep.engine}"
    engine += ", timing only" if sweep.timing_only else ""
    return f"suite '{sweep.scale}', machine '{sweep.base.name}', {sets}{engine}. Swept: {swept}."


def table(rows: Sequence[dict[str, Any]], sweep: Sweep) -> Table:
    """The console view: one line per point, the swept values and a few headline statistics."""
    t = Table(title=f"Sweep: {len(rows)} points", caption_justify="left")
    for col in ("workload", "variant", *sweep.keys):
        t.add_column(col)
    for stat in SHOWN:
        t.add_column(stat, justify="right")
    for row in rows:
        cells = [show(row.get(c, "")) for c in ("workload", "variant", *sweep.keys)]
        for stat in SHOWN:
            v = row.get(stat)
            cells.append(cycles_cell(v) if stat.endswith("cycles") else frac_cell(v))
        t.add_row(*cells)
    return t
