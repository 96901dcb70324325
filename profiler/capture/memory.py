"""The process's resident memory over a script's steps, sampled from a thread.

Place in the pipeline: inside the script process (``profiler.capture.script.worker``), from
before the script starts to its end. A daemon thread reads the resident set size from
``/proc/self/statm`` every ``INTERVAL_S`` (a read of a few bytes: ~10 µs of the GIL 100 times a
second, ~0.1% of the run), and each sample is placed on the step count done at that moment, so
the analysis can say what the process holds per step and how it grows. At most ``MAX_POINTS``
samples are kept (every other one is dropped when full: the run's whole span stays covered).
Linux only; elsewhere the record says memory was not measured. Every
``memory_causes.EVERY_S`` the same thread also reads what could be growing (graphs, traced
functions, the script's containers: ``profiler.capture.memory_causes``), so a growth can be
named with its cause; and on each new high of resident memory (``memory_peak.PeakWatch``) it
takes a census of the arrays and tensors the script's names hold
(``profiler.capture.memory_peak``), so the peak can be said with what held it.

A process the kernel's out-of-memory killer ends (SIGKILL) runs none of its own ending: the
same thread therefore keeps the record so far in the workload's folder (``SPILL_FILES``), every
``SPILL_S`` and sooner while resident memory climbs (``SPILL_RISE`` above the last write, at
most every ``SPILL_MIN_S``), which the runner reads back when the process died
(``read_spill``). A write is one ``pwrite`` of the three columns as bytes with a small JSON
header into the older of two files opened once, numbered and closed by its number at both
ends, so a kill in mid-write leaves the other whole. Creating and renaming a file instead cost
1.5 ms a write on these machines; the write in place costs ~10-30 µs for 2,000 samples.
"""

from __future__ import annotations

import json
import os
import struct
import threading
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profiler.capture import threads
from profiler.capture.memory_allocator import AllocatorProbe
from profiler.capture.memory_causes import EVERY_S, CauseProbe
from profiler.capture.memory_peak import PeakWatch

INTERVAL_S = 0.01
#: How often the other processes' load is read (``RssSampler.loads``), and the readings kept.
LOAD_EVERY_S = 0.1
MAX_LOADS = 20_000
#: Probe times kept (start and end each) for probes of at least ``SLOW_PROBE_NS``.
MAX_PROBES = 20_000
SLOW_PROBE_NS = 5_000_000
MAX_POINTS = 2000
_STATM = "/proc/self/statm"

#: The record so far, in the workload's folder, written in turn (removed once the trace holds
#: the whole record).
SPILL_FILES = ("memory-so-far.0", "memory-so-far.1")
#: Seconds between writes of the record so far ...
SPILL_S = 0.5
#: ... and sooner when resident bytes passed the last write's by this share (the last sample
#: before an out-of-memory kill stays within a few percent of the size it was killed at) ...
SPILL_RISE = 0.02
#: ... but never twice within this many seconds.
SPILL_MIN_S = 0.05
_MAGIC = b"RSS2"
#: magic, write number, samples, JSON header bytes; then the header, 3 columns, the number.
_HEAD = struct.Struct("<4sQII")
_SEQ = struct.Struct("<Q")


def rss_bytes() -> int | None:
    """This process's resident set size now, or None where ``/proc`` has no statm."""
    try:
        with open(_STATM, "rb") as fh:
            fields = fh.read().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class RssSampler:
    """Samples (time ns, resident bytes, steps done) from a daemon thread until ``stop``.

    Args:
        clock: the clock steps are timed with.
        steps: returns the steps done so far (the script's step driver).
        spill: the folder to keep the record so far in while the process runs (None: none).
    """

    def __init__(
        self,
        clock: Callable[[], int],
        steps: Callable[[], int],
        spill: Path | None = None,
        as_written: Callable[[], bool] | None = None,
        state: Callable[[], int] | None = None,
    ) -> None:
        self.clock = clock
        self.steps = steps
        #: Whether the script runs as written now: no census and no probe of what grows while
        #: a what-if's variant is on (its float32 block read a history list's float64 copies,
        #: and the script's arrays, as float32).
        self.as_written = as_written or (lambda: True)
        #: A number that changes whenever a variant is switched (``StepDriver.switches``): a
        #: census taken across a switch is dropped.
        self.state = state or (lambda: 0)
        # Columns (int64): appending is as cheap as a list's, and a write copies them as bytes.
        self.t_ns = array("q")
        self.rss = array("q")
        self.step = array("q")
        self.peak: tuple[int, int, int] | None = None
        self._every = 1
        self._seen = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.available = rss_bytes() is not None
        #: The slow probes' start and end times (the script's clock), for the long steps'.
        self.probe_ns: list[int] = []
        #: What could be growing, read every ``EVERY_S`` from the same thread.
        self.causes = CauseProbe()
        #: TensorFlow's allocator figures, read at the same times (``memory_allocator``).
        self.allocator = AllocatorProbe()
        self._next_probe = 0.0
        #: What the script's names hold, on each new high (``profiler.capture.memory_peak``).
        self.census = PeakWatch()
        self._census_json: dict[str, Any] | None = None
        self._point: tuple[int, int, int] | None = None
        self.spill = spill
        self._fds: list[int] = []
        self._causes_json: dict[str, Any] | None = None
        self._spilled_at = 0.0
        self._spilled_rss = 0
        #: (steps done, time ns, other processes' busy ns so far) every ``LOAD_EVERY_S``: how
        #: busy the machine was around each block of steps (a busy process starting mid-run
        #: slows the steps from then on: a numpy loop read "steps take 3.9x ... from iteration
        #: 1,816" where its work per step did not change, measured without the profiler).
        self.loads: list[tuple[int, int, int]] = []
        self._next_load = 0.0
        #: Writes of the record so far, and their cost (ns of this thread's CPU time).
        self.spills = 0
        self.spill_ns = 0

    @property
    def points(self) -> list[tuple[int, int, int]]:
        """The samples kept, as (time ns, resident bytes, steps done)."""
        return list(zip(self.t_ns, self.rss, self.step, strict=True))

    def start(self) -> None:
        if not self.available:
            return
        self._sample()
        self._thread = threading.Thread(target=self._run, name="profiler-memory", daemon=True)
        self._thread.start()

    def _sample(self) -> int | None:
        rss = rss_bytes()
        if rss is None:
            return None
        point = (self.clock(), rss, self.steps())
        self._point = point
        if self.peak is None or rss > self.peak[1]:
            self.peak = point
        self._seen += 1
        if self._seen % self._every:
            return rss
        self.t_ns.append(point[0])
        self.rss.append(rss)
        self.step.append(point[2])
        if len(self.t_ns) >= MAX_POINTS:
            self.t_ns, self.rss, self.step = self.t_ns[::2], self.rss[::2], self.step[::2]
            self._every *= 2
        return rss

    def _run(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            rss = self._sample()
            now = time.monotonic()
            point = self._point
            t0 = self.clock()
            state = self.state()

            def still(state: int = state) -> bool:
                return self.as_written() and self.state() == state

            if (
                rss is not None
                and point is not None
                and self.as_written()
                and self.census.sample(*point, now, still)
            ):
                self._census_json = None
                self._slow_probe(t0)  # a census of the names: a probe too
            if now >= self._next_load:
                self._next_load = now + LOAD_EVERY_S
                self._read_load()
            if now >= self._next_probe and self.as_written():
                self._next_probe = now + EVERY_S
                t0 = self.clock()
                self.causes.probe(self.steps())
                self.allocator.read(self.clock(), self.steps())
                self._causes_json = None
                # The probe holds the interpreter's lock: beside a busy process the steps it
                # fell in took ~100 ms, at its period (every 330 steps of a numpy loop), and
                # were read as work the loop does once in a while.
                self._slow_probe(t0)
            if self.spill is not None and rss is not None and self._spill_due(now, rss):
                self.write_spill()

    def _read_load(self) -> None:
        others = threads.others_busy_ns()
        if others is None:
            return
        if len(self.loads) >= MAX_LOADS:
            self.loads = self.loads[::2]
        self.loads.append((self.steps(), self.clock(), others))

    def _slow_probe(self, t0: int) -> None:
        """Keep a probe's start and end where it took ``SLOW_PROBE_NS`` or more (a long step
        holding it is the probe's, not the script's; a quick one inside a long evaluation
        step is no reason to leave that step out)."""
        t1 = self.clock()
        if t1 - t0 >= SLOW_PROBE_NS and len(self.probe_ns) < MAX_PROBES:
            self.probe_ns += (t0, t1)

    def _spill_due(self, now: float, rss: int) -> bool:
        since = now - self._spilled_at
        if since >= SPILL_S:
            return True
        return since >= SPILL_MIN_S and rss > self._spilled_rss * (1 + SPILL_RISE)

    def write_spill(self) -> None:
        """Write the record so far over the older of the two files (see the module docstring).
        A write that fails (a full disk, no memory left) is skipped: the next may work."""
        if self.spill is None or not self.t_ns:
            return
        # The thread's CPU time: its wall time includes waits for the GIL, which cost the
        # script nothing.
        t0 = time.thread_time_ns()
        try:
            if not self._fds:
                self._fds = [
                    os.open(self.spill / name, os.O_WRONLY | os.O_CREAT, 0o644)
                    for name in SPILL_FILES
                ]
            if self._causes_json is None:
                self._causes_json = self.causes.record()
            if self._census_json is None:
                self._census_json = self.census.record()
            head = json.dumps(
                {
                    "interval_s": INTERVAL_S * self._every,
                    "peak": list(self.peak) if self.peak else None,
                    "causes": self._causes_json,
                    "census": self._census_json,
                    "allocator": self.allocator.record(),
                },
                separators=(",", ":"),
            ).encode()
            seq = self.spills + 1
            buf = b"".join(
                (
                    _HEAD.pack(_MAGIC, seq, len(self.t_ns), len(head)),
                    head,
                    self.t_ns.tobytes(),
                    self.rss.tobytes(),
                    self.step.tobytes(),
                    _SEQ.pack(seq),
                )
            )
            os.pwrite(self._fds[seq % 2], buf, 0)
        except (OSError, MemoryError, ValueError):
            return
        finally:
            self._spilled_at = time.monotonic()
        self._spilled_rss = self.rss[-1]
        self.spills = seq
        self.spill_ns += time.thread_time_ns() - t0

    def drop_spill(self) -> None:
        """Close and remove the record so far (the trace now holds the whole record)."""
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []
        if self.spill is not None:
            for name in SPILL_FILES:
                try:
                    (self.spill / name).unlink()
                except OSError:
                    pass

    def stop(self) -> None:
        """Stop sampling, with one last sample (once: a second call does nothing)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        if self.available:
            self._sample()
            self.causes.probe(self.steps())
            self.allocator.read(self.clock(), self.steps())
            self._causes_json = None
            if self._point is not None:
                self.census.final(*self._point, time.monotonic())
                self._census_json = None

    def record(self) -> dict[str, Any]:
        """The script record's ``memory``: the samples (as columns) and the peak."""
        if not self.available or not self.t_ns:
            return {"measured": False, "why": "no /proc/self/statm on this system"}
        return {
            "measured": True,
            "interval_s": INTERVAL_S * self._every,
            "t_ns": list(self.t_ns),
            "rss_bytes": list(self.rss),
            "steps": list(self.step),
            "peak_bytes": self.peak[1] if self.peak else None,
            "peak_step": self.peak[2] if self.peak else None,
            "causes": self.causes.record(),
            # What the script's names held near the peak (profiler.capture.memory_peak).
            "census": self.census.record(),
            # TensorFlow's allocator figures per device (profiler.capture.memory_allocator).
            "allocator": self.allocator.record(),
            # The writes of the record so far and their mean cost (profiler.capture.memory).
            "spills": self.spills,
            "spill_cost_ns": self.spill_ns // self.spills if self.spills else None,
        }


def read_spill(folder: Path) -> dict[str, Any] | None:
    """The record a script process kept so far in ``folder`` (``RssSampler.write_spill``), as
    ``record`` gives it: the newer whole one of its two files, or None (none, or none whole)."""
    best: tuple[int, dict[str, Any]] | None = None
    for name in SPILL_FILES:
        got = _read_one(folder / name)
        if got is not None and (best is None or got[0] > best[0]):
            best = got
    return best[1] if best is not None else None


def _read_one(path: Path) -> tuple[int, dict[str, Any]] | None:
    try:
        data = path.read_bytes()
        magic, seq, n, size = _HEAD.unpack_from(data)
        if magic != _MAGIC or n < 1:
            return None
        at = _HEAD.size + size
        end = at + 3 * 8 * n
        if _SEQ.unpack_from(data, end)[0] != seq:
            return None  # killed in mid-write: the other file holds the last whole record
        head = json.loads(data[_HEAD.size : at])
        cols = []
        for i in range(3):
            col = array("q")
            col.frombytes(data[at + i * 8 * n : at + (i + 1) * 8 * n])
            cols.append(list(col))
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    peak = head.get("peak") or [None, None, None]
    return seq, {
        "measured": True,
        "interval_s": head.get("interval_s"),
        "t_ns": cols[0],
        "rss_bytes": cols[1],
        "steps": cols[2],
        "peak_bytes": peak[1],
        "peak_step": peak[2],
        "causes": head.get("causes"),
        "census": head.get("census"),
        "allocator": head.get("allocator"),
    }


def overhead_ns(samples: int = 200) -> int:
    """What one sample costs the sampling thread (ns, median of ``samples``): the figure the
    bench quotes against a step."""
    times = []
    for _ in range(samples):
        t = time.perf_counter_ns()
        rss_bytes()
        times.append(time.perf_counter_ns() - t)
    times.sort()
    return times[len(times) // 2]
