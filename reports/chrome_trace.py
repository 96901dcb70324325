"""Chrome/Perfetto trace per workload (``trace.json.gz``), written from the trace model.

Place in the pipeline: a per-workload artefact writer
(``profiler.processes.pipeline.ARTEFACT_WRITERS``), run in the parent after capture:
``WorkloadTrace`` -> Trace Event Format -> ``runs/<id>/workloads/<slug>/trace.json.gz``, so a user
without TensorBoard opens the same timeline in https://ui.perfetto.dev (or ``chrome://tracing``).
Everything is on the workload's step clock; ``ts``/``dur`` are microseconds from the first warm-up
step.

Tracks (one thread each, named and ordered by metadata events):

* ``phase: <name>``: one complete (``X``) event per step of that phase's window (warm-up first);
* ``gaps``: time the runner spent between segments of a window (recording the loss);
* ``tf/python``, ``tf/compute/0``, ...: the framework phase's spans (``profiler.capture.collectors
  .xplane``): steps, ``run_call``, executor work and kernels;
* ``hooks: split``: for the hooks phase's stored steps, the measured parts of each step laid end
  to end inside it. Their durations are measured; their order inside the step is schematic.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

from profiler.model import Span, Window, WorkloadTrace
from profiler.model.atomic import atomic_write_bytes
from profiler.model.records import HooksData

FILE_NAME = "trace.json.gz"
PID = 1
HOOKS_TRACK = "hooks: split"
GAPS_TRACK = "gaps"


def _us(ns: int) -> float:
    return round(ns / 1e3, 3)


class _Tracks:
    """Track name -> tid, in order of first use (that order is also the display order)."""

    def __init__(self) -> None:
        self.tids: dict[str, int] = {}

    def tid(self, name: str) -> int:
        if name not in self.tids:
            self.tids[name] = len(self.tids) + 1
        return self.tids[name]

    def metadata(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name, tid in self.tids.items():
            out.append(
                {"ph": "M", "pid": PID, "tid": tid, "name": "thread_name", "args": {"name": name}}
            )
            out.append(
                {
                    "ph": "M",
                    "pid": PID,
                    "tid": tid,
                    "name": "thread_sort_index",
                    "args": {"sort_index": tid},
                }
            )
        return out


def _windows(trace: WorkloadTrace) -> list[Window]:
    return [trace.warmup, *(p.window for p in trace.phases if p.window is not None)]


def _origin(trace: WorkloadTrace) -> int:
    starts = [s.start_ns for w in _windows(trace) for s in w.segments]
    starts += [sp.start_ns for p in trace.phases for sp in p.spans]
    return min(starts) if starts else 0


#: Steps drawn per window. A 3 µs loop runs ~600,000 steps in a 2 s window; a timeline of them
#: all is hundreds of MB that no viewer opens. The rest are counted in ``otherData``.
MAX_STEPS_PER_WINDOW = 5_000


def _step_events(
    trace: WorkloadTrace, tracks: _Tracks, t0: int, omitted: dict[str, int] | None = None
) -> tuple[list[dict[str, Any]], dict[tuple[str, int], tuple[int, int]]]:
    events: list[dict[str, Any]] = []
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    for window in _windows(trace):
        tid = tracks.tid(f"phase: {window.phase}")
        if omitted is not None and window.n_steps > MAX_STEPS_PER_WINDOW:
            omitted[window.phase] = window.n_steps - MAX_STEPS_PER_WINDOW
        for step in itertools.islice(window.steps(trace.work), MAX_STEPS_PER_WINDOW):
            bounds[(window.phase, step.index)] = (step.start_ns, step.end_ns)
            events.append(
                {
                    "name": f"step {step.index}",
                    "cat": "step",
                    "ph": "X",
                    "pid": PID,
                    "tid": tid,
                    "ts": _us(step.start_ns - t0),
                    "dur": _us(step.dur_ns),
                    "args": {
                        "phase": window.phase,
                        "step": step.index,
                        "samples": step.samples,
                        "updates": step.updates,
                        "epoch": step.epoch,
                    },
                }
            )
    return events, bounds


def _gap_events(trace: WorkloadTrace, tracks: _Tracks, t0: int) -> list[dict[str, Any]]:
    gaps = [(w.phase, g) for w in _windows(trace) for g in w.gaps]
    if not gaps:
        return []
    tid = tracks.tid(GAPS_TRACK)
    return [
        {
            "name": g.reason,
            "cat": "gap",
            "ph": "X",
            "pid": PID,
            "tid": tid,
            "ts": _us(g.start_ns - t0),
            "dur": _us(g.dur_ns),
            "args": {"phase": phase},
        }
        for phase, g in sorted(gaps, key=lambda pg: pg[1].start_ns)
    ]


def _span_events(spans: tuple[Span, ...], tracks: _Tracks, t0: int) -> list[dict[str, Any]]:
    # Tracks in order of their first span (the Python thread before the compute threads);
    # longer spans first at equal start, so enclosing events precede what they contain.
    first: dict[str, int] = {}
    for s in spans:
        first[s.track] = min(first.get(s.track, s.start_ns), s.start_ns)
    ordered = sorted(spans, key=lambda s: (first[s.track], s.track, s.start_ns, -s.dur_ns))
    return [
        {
            "name": s.name,
            "cat": s.category or "framework",
            "ph": "X",
            "pid": PID,
            "tid": tracks.tid(s.track),
            "ts": _us(s.start_ns - t0),
            "dur": _us(s.dur_ns),
            "args": {"step": s.step},
        }
        for s in ordered
    ]


def _hooks_events(
    data: HooksData,
    bounds: dict[tuple[str, int], tuple[int, int]],
    tracks: _Tracks,
    t0: int,
) -> list[dict[str, Any]]:
    per_step = data.per_step
    partition = data.partition
    steps = per_step.get("step") or ()
    if not steps or not partition:
        return []
    tid = tracks.tid(HOOKS_TRACK)
    categories = data.categories
    out: list[dict[str, Any]] = []
    for i, step in enumerate(steps):
        if ("hooks", step) not in bounds:
            continue
        t = bounds[("hooks", step)][0]
        for part in partition:
            values = per_step.get(part) or ()
            ns = int(values[i]) if i < len(values) else 0
            if ns <= 0:
                continue
            out.append(
                {
                    "name": part,
                    "cat": categories.get(part, "hooks"),
                    "ph": "X",
                    "pid": PID,
                    "tid": tid,
                    "ts": _us(t - t0),
                    "dur": _us(ns),
                    "args": {"step": step, "ns": ns},
                }
            )
            t += ns
    return out


def build(trace: WorkloadTrace) -> dict[str, Any]:
    """The Trace Event Format document of one workload (see the module docstring)."""
    t0 = _origin(trace)
    tracks = _Tracks()
    omitted: dict[str, int] = {}
    events, bounds = _step_events(trace, tracks, t0, omitted)
    events += _gap_events(trace, tracks, t0)
    for p in trace.phases:
        if p.spans:
            events += _span_events(p.spans, tracks, t0)
    hooks = trace.phase("hooks")
    if hooks is not None and isinstance(hooks.data, HooksData):
        events += _hooks_events(hooks.data, bounds, tracks, t0)
    process = [
        {"ph": "M", "pid": PID, "name": "process_name", "args": {"name": trace.workload}},
    ]
    return {
        "traceEvents": process + tracks.metadata() + events,
        "displayTimeUnit": "ns",
        "otherData": {
            "workload": trace.workload,
            "status": trace.status,
            "clock": "µs from the first warm-up step (the workload's step clock)",
            "steps_not_drawn": omitted,
        },
    }


def write(path: Path, trace: WorkloadTrace) -> Path:
    """Write ``build(trace)`` gzipped to ``path`` atomically; returns ``path``."""
    data = json.dumps(build(trace), separators=(",", ":")).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, gzip.compress(data, compresslevel=6))
    return path
