"""The start-up capture: py-spy on a script's process from its start until its first step.

Place in the pipeline: started by the script's schedule (``profiler.capture.script.schedule``)
as the script begins. If the script never reaches a detected step, its samples are all there is
(the whole run is attributed from them); once a step is detected it is stopped and its
main-thread samples are kept as the trace's ``before_steps``: what the script did before its
first step (imports, data, model), read by ``profiler.analysis.before_steps``. Its files are
``startup.speedscope.json`` and ``startup.pyspy.log``, beside the sampled phase's.

Native sampling (``--native``) is decided from what the process has loaded *when it samples*:
a script starts with nothing but the standard library, so the capture starts native, and the
moment the script begins importing a heavy framework (``sampled.HEAVY_FRAMEWORKS``; the import
watcher calls ``on_framework_import`` before the framework's first line runs) the native capture
is stopped and a non-native one started in its place: ``--native`` on a process with TensorFlow
loaded costs ~75x. The script's thread waits while py-spy re-attaches; that wait is measured
and recorded (``record()``), with every capture's settings.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from profiler.capture.collectors import pyspy
from profiler.capture.phases import PhaseContext, PhaseUnavailable
from profiler.capture.phases import sampled as sampled_mod
from profiler.model import Frame, PhaseRecord, Sample, Window, is_own_frame

#: The start-up capture's py-spy output and log, in the workload's folder.
STARTUP_FILES = ("startup.speedscope.json", "startup.pyspy.log")


def compact(samples: Iterable[Sample]) -> tuple[Sample, ...]:
    """The samples with only the frames ``profiler.analysis.before_steps`` reads: the user's own
    frames, the first frame below the innermost of them (what it ran in), and one frame of
    Python's import machinery where there is one; stacks left alike are counted together. A
    TensorFlow script's start-up held 211-279 distinct stacks of up to ~100 frames, 3.5-5.5 MB
    of the trace's JSON, and the trace of a script run out of memory could not be written."""
    merged: dict[tuple[Frame, ...], int] = {}
    for s in samples:
        frames = s.frames
        own = [i for i, f in enumerate(frames) if is_own_frame(f)]
        keep = list(own)
        below = None
        if own:
            below = next((i for i in range(own[-1] + 1, len(frames)) if not frames[i].native), None)
            if below is not None:
                keep.append(below)
        imp = next(
            (i for i, f in enumerate(frames) if f.file.startswith("<frozen importlib")), None
        )
        if imp is not None:
            keep.append(imp)
        # The frame below is read for its file (its package) only.
        key = tuple(
            Frame("", frames[i].file) if i == below else frames[i] for i in sorted(set(keep))
        )
        merged[key] = merged.get(key, 0) + s.count
    return tuple(
        Sample(frames, n, pyspy.MAIN_THREAD)
        for frames, n in sorted(merged.items(), key=lambda kv: -kv[1])
    )


@dataclass
class StartupRecord:
    """What the start-up capture did, for the script's record.

    Attributes:
        captures: per capture, ``native`` and why it ended (``restart``, ``first step``,
            ``script end``).
        switched_at: the framework whose import stopped a native capture, if one did.
        blocked_ms: how long the script's thread waited for py-spy to re-attach.
        started_ms: how long starting the first capture took (on the schedule's thread).
        note: why there is no capture, if there is none.
        sampled_s: the time the kept capture covered before the first step (its start-up
            to the step; the script's start before it, or before a restart, is not sampled).
        samples: the main thread's samples kept (``WorkloadTrace.before_steps``).
    """

    captures: list[dict[str, Any]] = field(default_factory=list)
    switched_at: str | None = None
    blocked_ms: float = 0.0
    started_ms: float = 0.0
    note: str = ""
    sampled_s: float = 0.0
    samples: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "sampled_s": round(self.sampled_s, 3),
            "samples": self.samples,
            "captures": list(self.captures),
            "switched_at": self.switched_at,
            "blocked_ms": round(self.blocked_ms, 3),
            "started_ms": round(self.started_ms, 3),
            "note": self.note,
        }


class StartupCapture:
    """py-spy from the script's start (see the module docstring). Thread-safe: the schedule's
    thread starts and ends it, the script's thread may switch it at an import."""

    def __init__(self, ctx: PhaseContext, options: dict[str, Any], allow_native: bool) -> None:
        self.ctx = ctx
        self.options = dict(options)
        self.allow_native = allow_native
        self.lock = threading.Lock()
        self.phase: sampled_mod.SampledPhase | None = None
        self.native = False
        #: A heavy framework whose import began (set even before the capture started).
        self.framework: str | None = None
        self.record = StartupRecord()
        #: The main thread's samples up to the first step (``keep``).
        self.samples: tuple[Sample, ...] = ()

    def _start(self, native: bool) -> None:
        from profiler.capture.phases.registry import PHASES

        mode = "auto" if native else "off"
        phase = sampled_mod.SampledPhase(
            PHASES["sampled"][1],
            {"sample_nonblocking": True, **self.options, "sample_native": mode},
            files=STARTUP_FILES,
        )
        phase.install(self.ctx)
        self.phase = phase
        self.native = bool(phase.settings and phase.settings.native)

    def start(self) -> bool:
        """Start sampling (native only if allowed and no heavy framework is loaded yet)."""
        t0 = time.perf_counter_ns()
        with self.lock:
            loaded = self.framework or sampled_mod.heavy_framework_loaded()
            try:
                self._start(self.allow_native and loaded is None)
            except PhaseUnavailable as exc:
                self.record.note = f"no start-up capture: {exc}"
                self.phase = None
                return False
        self.record.started_ms = (time.perf_counter_ns() - t0) / 1e6
        return True

    def _end(self, why: str) -> None:
        phase = self.phase
        if phase is not None and phase.capture is not None:
            cap, phase.capture = phase.capture, None
            sampled_mod.kill(cap)
            self.record.captures.append({"native": self.native, "ended": why})

    def on_framework_import(self, name: str) -> None:
        """A heavy framework starts importing: a native capture becomes a non-native one."""
        with self.lock:
            self.framework = self.framework or name
            if self.phase is None or not self.native:
                return
            t0 = time.perf_counter_ns()
            self._end("restart")
            self.record.switched_at = name
            try:
                self._start(False)
            except PhaseUnavailable as exc:
                self.phase = None
                self.record.note = f"the start-up capture could not restart: {exc}"
            self.record.blocked_ms += (time.perf_counter_ns() - t0) / 1e6

    def keep(self, first_step_ns: int, clock_ns: int) -> None:
        """A step was detected: stop sampling and keep the main thread's samples up to the
        first step (what ran before it). ``first_step_ns`` is the first step's start on the
        script's clock, which reads ``clock_ns`` now. The samples after the first step (the
        first steps themselves, the script's wait for this stop) are left out in proportion
        to their time: py-spy writes a thread's samples in the order it took them. A capture
        that cannot be read leaves a note and no samples."""
        to_first_ns = first_step_ns - clock_ns + time.monotonic_ns()
        with self.lock:
            phase, self.phase = self.phase, None
            cap = phase.capture if phase is not None else None
            if phase is None or cap is None:
                return
            phase.capture = None
            self.record.captures.append({"native": self.native, "ended": "first step"})
            covered_ns = max(to_first_ns - cap.attached_ns, 0)
            head = covered_ns / max(time.monotonic_ns() - cap.attached_ns, 1)
            try:
                sampled_mod.stop(cap)
                got = pyspy.read_speedscope(cap.output, main_tid=os.getpid(), head=head)
            except (OSError, ValueError, RuntimeError) as exc:
                self.record.note = f"what ran before the first step is not sampled: {exc}"
                return
            self.samples = compact(s for s in got if s.thread in (pyspy.MAIN_THREAD, ""))
            self.record.samples = sum(s.count for s in self.samples)
            self.record.sampled_s = covered_ns / 1e9

    def finish(self, ctx: PhaseContext, window: Window) -> PhaseRecord | None:
        """No step was detected: the capture's record over the whole run (None without one)."""
        with self.lock:
            phase, self.phase = self.phase, None
            if phase is None:
                return None
            self.record.captures.append({"native": self.native, "ended": "script end"})
            return phase.remove(ctx, window)

    def abort(self) -> None:
        with self.lock:
            if self.phase is not None:
                self.phase.abort(self.ctx)
                self.phase = None
