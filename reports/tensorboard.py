"""TensorBoard scalars per workload: step time, the loss against steps, samples and updates, and
a script's resident memory against the steps.

Place in the pipeline: a per-workload artefact writer
(``profiler.processes.pipeline.ARTEFACT_WRITERS``), run in the parent after capture:
``WorkloadTrace`` -> one event file in ``runs/<id>/tensorboard/<slug>/``, the folder that also holds
the framework phase's profile capture, so TensorBoard shows each workload as one run with its
scalars and its profile.

The file's records are encoded by ``profiler.reports.event_file``: neither TensorFlow nor
TensorBoard is imported here, or needed (TensorFlow is optional, and 2.21 no longer installs
TensorBoard; ``EventFileWriter`` would import TensorFlow through ``tf.io.gfile``, and the parent
must not pay its seconds and ~500 MB). Only ``read``, for tests, uses TensorBoard's protos.

Tags (``Event.step`` is the x axis):

* ``step_time_us``: µs per training step of each timed unit of the timed window; step = the
  unit's first training step (global, counted from the first warm-up step);
* ``phase_step_time_us/<phase>``: the same for every instrumented phase's window (their
  inflation, step by step);
* ``loss/by_step``, ``loss/by_samples``, ``loss/by_updates``: the loss on the evaluation set
  against training steps, samples and parameter updates done (0 for the initial loss);
* ``memory/resident_mb``: a script's resident memory (MB, 2**20 bytes) against the steps done,
  the median of each bucket of consecutive steps as the step times are downsampled (its
  samples at one step are one bucket: the imports before the first step are step 0);
* ``memory/growth_kb_per_step``, once, at the run's last step: the growth per step after the
  warm-up (``profiler.analysis.memory``, the summary's figure), with its 95% interval's ends
  as ``memory/growth_kb_per_step_low95`` and ``..._high95``; none where it was not measured.

Event wall times are reconstructed from the step clock, anchored at the time of writing, so
TensorBoard's "relative" axis shows the run's own timing.

Training efficiency (seed 004, ``write_efficiency``): a second event file per implementation
of the summary's ``efficiency`` section, in ``tensorboard/<implementation>/``, with the loss
on the evaluation set (median over seeds) by work done: ``efficiency/loss_by_samples``,
``efficiency/excess_by_samples`` (above the noise floor) and ``efficiency/loss_by_updates``.
Their wall times are the training time with the logging excluded, so the "relative" axis is
loss against wall time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from profiler.analysis import memory
from profiler.analysis.attribution import Attribution
from profiler.model import CATEGORIES, Window, WorkloadTrace
from profiler.model.atomic import atomic_write_bytes
from profiler.reports import event_file

STEP_TIME = "step_time_us"
PHASE_STEP_TIME = "phase_step_time_us/{phase}"
LOSS_BY_STEP = "loss/by_step"
LOSS_BY_SAMPLES = "loss/by_samples"
LOSS_BY_UPDATES = "loss/by_updates"
BY_CATEGORY = "time_by_category/{category}"
MEMORY_RESIDENT = "memory/resident_mb"
MEMORY_GROWTH = "memory/growth_kb_per_step"
MEMORY_GROWTH_LOW = "memory/growth_kb_per_step_low95"
MEMORY_GROWTH_HIGH = "memory/growth_kb_per_step_high95"
#: Our event files end with this, so a re-render replaces them and nothing else.
FILE_SUFFIX = ".profiler-scalars"
#: The event-file format version TensorBoard reads, and the writer named in the file.
FILE_VERSION = "brain.Event:2"
WRITER = "training-loop-profiler"


#: Step-time points per window. TensorBoard itself shows at most 1,000 points a tag; a window
#: with more steps is written as the median of each run of consecutive steps (its last step's
#: index and end), so a 600,000-step window costs 2,000 events, not 600,000.
MAX_POINTS_PER_WINDOW = 2_000


def _downsampled(window: Window, k: int) -> Iterator[tuple[int, float, int]]:
    """``(last unit index, median µs per step, end ns)`` per bucket of consecutive units."""
    per = max(1, -(-window.n_steps // MAX_POINTS_PER_WINDOW))
    for seg in window.segments:
        b = seg.boundaries_ns
        for lo in range(0, seg.n_steps, per):
            hi = min(lo + per, seg.n_steps)
            durations = sorted(b[j + 1] - b[j] for j in range(lo, hi))
            median = durations[(len(durations) - 1) // 2]
            yield seg.first_step + hi - 1, median / k / 1e3, b[hi]


def _categories(
    trace: WorkloadTrace, att: Attribution | None
) -> Iterator[tuple[str, int, float, int]]:
    """``time_by_category/<category>``: µs per training step of each timed step's attribution.

    Downsampled like the step times: each point is the mean over a run of consecutive steps,
    so a point's categories still add up to that run's mean step.
    """
    timed = trace.phase("timed")
    if att is None or timed is None or timed.window is None:
        return
    k = att.units_per_step
    ends = [
        (seg.first_step + j, seg.boundaries_ns[j + 1])
        for seg in timed.window.segments
        for j in range(seg.n_steps)
    ]
    per = max(1, -(-len(ends) // MAX_POINTS_PER_WINDOW))
    for lo in range(0, len(ends), per):
        rows = att.steps[lo : lo + per]
        unit, end_ns = ends[min(lo + per, len(ends)) - 1]
        for i, category in enumerate(CATEGORIES):
            mean = sum(r[i] for r in rows) / len(rows)
            yield BY_CATEGORY.format(category=category), unit * k, mean / k / 1e3, end_ns


def _memory(trace: WorkloadTrace) -> Iterator[tuple[str, int, float, int]]:
    """``memory/*``: a script's resident memory against the steps done (the record's samples,
    one bucket per run of consecutive steps, at most ``MAX_POINTS_PER_WINDOW``; each bucket's
    median at its last step and its last sample's clock), then the growth per step once."""
    script = trace.script or {}
    record = script.get("memory") or {}
    steps, rss = list(record.get("steps") or []), list(record.get("rss_bytes") or [])
    if not record.get("measured") or not rss or len(steps) != len(rss):
        return
    k = trace.work.units_per_step
    t_ns = list(record.get("t_ns") or [0] * len(rss))
    # Samples in time order, their steps never going back: one group per step done.
    groups: list[tuple[int, list[int], list[int]]] = []  # (step, resident bytes, clock ns)
    for s, r, t in zip(steps, rss, t_ns, strict=False):
        if not groups or groups[-1][0] != s:
            groups.append((s, [], []))
        groups[-1][1].append(r)
        groups[-1][2].append(t)
    per = max(1, -(-len(groups) // MAX_POINTS_PER_WINDOW))
    for lo in range(0, len(groups), per):
        part = groups[lo : lo + per]
        values = sorted(r for _, rs, _ in part for r in rs)
        median = values[(len(values) - 1) // 2]
        yield MEMORY_RESIDENT, part[-1][0] * k, median / 2**20, part[-1][2][-1]
    m = memory.analyse(record, script, memory.clean_spans(trace))
    if m is None or m.growth_per_step is None:
        return
    at, t = m.last_step * k, t_ns[-1]
    yield MEMORY_GROWTH, at, m.growth_per_step / 1024, t
    if m.growth_low is not None and m.growth_high is not None:
        yield MEMORY_GROWTH_LOW, at, m.growth_low / 1024, t
        yield MEMORY_GROWTH_HIGH, at, m.growth_high / 1024, t


def scalars(
    trace: WorkloadTrace, att: Attribution | None = None
) -> Iterator[tuple[str, int, float, int]]:
    """``(tag, step, value, clock_ns)`` for every scalar of the trace, in capture order
    (``att``: the trace's attribution, for ``time_by_category``)."""
    w = trace.work
    k = w.units_per_step
    wanted = {m.step for m in trace.metrics}
    end_of: dict[int, int] = {}
    windows = [trace.warmup, *(p.window for p in trace.phases if p.window is not None)]
    for window in windows:
        for seg in window.segments:
            b = seg.boundaries_ns
            for step in wanted:
                j = step - seg.first_step
                if 0 <= j < seg.n_steps:
                    end_of[step] = b[j + 1]
    first_ns = trace.warmup.segments[0].start_ns if trace.warmup.segments else 0
    for p in trace.phases:
        if p.window is None:
            continue
        tag = STEP_TIME if p.name == "timed" else PHASE_STEP_TIME.format(phase=p.name)
        for unit, value_us, end_ns in _downsampled(p.window, k):
            yield tag, unit * k, value_us, end_ns
    yield from _categories(trace, att)
    yield from _memory(trace)
    for m in trace.metrics:
        if m.name != "loss":
            continue
        done = m.step + 1
        t = end_of.get(m.step, first_ns)
        yield LOSS_BY_STEP, done * k, m.value, t
        yield LOSS_BY_SAMPLES, done * w.samples_per_step, m.value, t
        yield LOSS_BY_UPDATES, done * w.updates_per_step, m.value, t


def _encode(points: list[tuple[str, int, float, float]], now: float) -> bytes:
    """Event-file bytes: a version record, then one ``Event`` per ``(tag, step, value,
    seconds before now)`` point, in the given order."""
    out = [event_file.record(event_file.header_event(now, FILE_VERSION, WRITER))]
    for tag, step, value, before_s in points:
        out.append(event_file.record(event_file.scalar_event(now - before_s, step, tag, value)))
    return b"".join(out)


def _write(logdir: Path, suffix: str, data: bytes, now: float) -> Path:
    """Replace our event file of kind ``suffix`` in ``logdir`` by ``data``."""
    logdir.mkdir(parents=True, exist_ok=True)
    for old in logdir.glob(f"events.out.tfevents.*{suffix}"):
        old.unlink()
    # TensorBoard finds event files by "tfevents" in the name; where its convention puts the
    # host name we put the tool's: nothing from the environment goes into an artefact.
    path = logdir / f"events.out.tfevents.{int(now):010d}.training-loop-profiler{suffix}"
    atomic_write_bytes(path, data)
    return path


def encode(trace: WorkloadTrace, att: Attribution | None = None, now: float | None = None) -> bytes:
    """The event file's bytes: a version record, then one ``Event`` per scalar."""
    now = time.time() if now is None else now
    # In capture order, as a live writer would have written them.
    points = sorted(scalars(trace, att), key=lambda p: p[3])
    last_ns = max((t for *_rest, t in points), default=0)
    return _encode([(tag, s, v, (last_ns - t) / 1e9) for tag, s, v, t in points], now)


def write(
    logdir: Path, trace: WorkloadTrace, att: Attribution | None = None, now: float | None = None
) -> Path:
    """Write the trace's scalars into ``logdir`` (replacing ours from a previous render)."""
    now = time.time() if now is None else now
    return _write(logdir, FILE_SUFFIX, encode(trace, att, now), now)


def read(path: Path) -> list[dict[str, Any]]:
    """The scalars of an event file written here, as dicts (for tests and debugging)."""
    import struct

    from tensorboard.compat.proto import event_pb2

    data = Path(path).read_bytes()
    out: list[dict[str, Any]] = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        event = event_pb2.Event.FromString(data[pos + 12 : pos + 12 + length])
        pos += 12 + length + 4
        for v in event.summary.value:
            out.append({"tag": v.tag, "step": event.step, "value": v.simple_value})
    return out


# --- training efficiency (seed 004): loss against the work done -------------------------------

EFF_LOSS_BY_SAMPLES = "efficiency/loss_by_samples"
EFF_EXCESS_BY_SAMPLES = "efficiency/excess_by_samples"
EFF_LOSS_BY_UPDATES = "efficiency/loss_by_updates"
#: Separate from ``FILE_SUFFIX`` so neither writer replaces the other's file.
EFFICIENCY_SUFFIX = ".profiler-efficiency"


def efficiency_scalars(impl: dict[str, Any]) -> Iterator[tuple[str, int, float, float]]:
    """``(tag, step, value, wall_ms)`` of one implementation of the ``efficiency`` section."""
    c = impl["curve"]
    for i, samples in enumerate(c["samples"]):
        wall = c["wall_ms"][i] or 0.0
        if c["loss_median"][i] is not None:
            yield EFF_LOSS_BY_SAMPLES, samples, c["loss_median"][i], wall
            yield EFF_LOSS_BY_UPDATES, c["updates"][i], c["loss_median"][i], wall
        if c["excess_median"][i] is not None:
            yield EFF_EXCESS_BY_SAMPLES, samples, c["excess_median"][i], wall


def write_efficiency(logdir: Path, impl: dict[str, Any], now: float | None = None) -> Path:
    """Write one implementation's efficiency scalars into ``logdir`` (replacing ours)."""
    now = time.time() if now is None else now
    points = list(efficiency_scalars(impl))
    last_ms = max((w for *_rest, w in points), default=0.0)
    data = _encode([(tag, s, v, (last_ms - w) / 1e3) for tag, s, v, w in points], now)
    return _write(logdir, EFFICIENCY_SUFFIX, data, now)
