"""xplane -> trace model: a TensorFlow profiler capture as steps, spans and per-step figures.

Place in the pipeline: the collector edge of the framework phase.
``profiler.capture.phases.framework`` calls ``parse`` inside the workload process (TensorFlow is
imported there already) on the ``<logdir>/plugins/profile/<ts>/<host>.xplane.pb`` that
``tf.profiler.experimental.stop`` wrote, and keeps what this module returns: ``step_table``
(per-step aggregates), ``op_table`` and ``spans`` (``profiler.model.Span``). Nothing downstream
reads the protobuf.

The protobuf is TensorFlow's own ``xplane_pb2`` (``tensorflow.tsl.profiler.protobuf``); an
unreadable, truncated or marker-less file raises ``XPlaneError`` whose one-line message starts
with the file's path.

What a capture holds on CPU (TF 2.21, ``host_tracer_level=3``), and how names are normalised so
TF1 sessions, ``tf.function`` and eager steps read alike (``kind`` below; ``KIND_CATEGORY`` gives
the category of each kind's self time):

============== ======================================= =========================================
kind           TF1 ``session.run``                     TF2
============== ======================================= =========================================
step           ``train`` (our ``Trace("train", step_num=i, _r=1)``), the Python thread
function_call  —                                       ``<python name>`` event carrying the
                                                       ``tf_function_call`` stat
run_call       ``SessionRun`` (the native call)        ``EagerExecute`` with ``is_func=1``
eager_op       —                                       ``EagerExecute`` with ``is_func=0``
executor       ``ExecutorState::Process`` on ``tf_Compute/*`` threads
executor_done  ``ExecutorDoneCallback``
kernel         ``<node>:<OpType>`` events (any thread)  the same; for eager ops the
                                                       ``KernelAndDeviceFunc::Run`` inside an
                                                       ``eager_op``
============== ======================================= =========================================

Span names are the kind for structural events (``step``, ``function_call``, ``run_call``,
``executor``, ``executor_done``) and the normalised op type for kernels and eager ops (``MatMul``
for ``_MklMatMul``, ``FusedMatMul`` for ``_MklNativeFusedMatMul``): kernels carry category
``compute``, eager ops ``dispatch``. Tracks are ``tf/python``, ``tf/compute/0``, ... (thread ids
replaced by their order of appearance). At TensorFlow's default level 2 only "expensive" kernels
are traced, as its cost model judges them from how fast they ran (a small function on a quiet
machine showed none); the framework phase asks for level 3, every kernel.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler.capture.collectors import op_table as op_table_mod
from profiler.model import Span, median_ns
from profiler.model.records import OpTable, StepColumns, StepMedians

HOST_PLANE = "/host:CPU"
#: What the TF profiler names its capture files (``<host>.xplane.pb``).
XPLANE_SUFFIX = ".xplane.pb"
#: The step marker's event name (``Trace("train", step_num=i, _r=1)``: XProf's step convention).
STEP_EVENT = "train"
#: Spans kept per capture at most; steps are included whole, in order, until the cap.
MAX_SPANS = 20_000

#: Raw event name -> kind, for the events that are not ``<node>:<OpType>`` kernels.
EVENT_KINDS: dict[str, str] = {
    STEP_EVENT: "step",
    "SessionRun": "run_call",
    "EagerExecute": "eager_execute",  # run_call for a function, eager_op otherwise (is_func)
    "KernelAndDeviceFunc::Run": "eager_kernel",  # a kernel only when inside an eager op
    "ExecutorState::Process": "executor",
    "ExecutorDoneCallback": "executor_done",
}

#: Kind -> the category its span's self time belongs to (profiler/docs/measuring.md, "Categories").
KIND_CATEGORY: dict[str, str | None] = {
    "step": None,
    "function_call": "python",
    "run_call": "dispatch",
    "eager_op": "dispatch",
    "executor": "dispatch",
    "executor_done": "dispatch",
    "kernel": "compute",
}

#: Kernel type prefixes that name an implementation, not an op (oneDNN rewrites on CPU).
KERNEL_PREFIXES: tuple[str, ...] = ("_MklNative", "_Mkl")

#: Per-step columns of ``step_table``, in order.
STEP_COLUMNS: tuple[str, ...] = (
    "step",
    "wall_ns",
    "function_call_ns",
    "run_call_ns",
    "executor_ns",
    "kernel_union_ns",
    "kernel_sum_ns",
    "kernels",
    "eager_ops",
    "eager_op_ns",
    "data_op_ns",
    "compute_union_ns",
    "collective_ns",
    "collective_overlap_ns",
)

#: Kernels of the input pipeline (tf.data iterators): their time is feeding data, not
#: arithmetic. ``data_op_ns`` is their union per step (an epoch's ``MakeIterator`` lands in the
#: step that sets the epoch up, and the median step does not carry it).
DATA_OPS = re.compile(r"Iterator|Optional(HasValue|GetValue|None|FromValue)|Prefetch|Shuffle")
#: Threads of the input pipeline: a kernel there (a map's py_function, its ops) is input work.
DATA_TRACK = "tf_data"


_THREAD_ID = re.compile(r"^(?P<base>.*?)/-?\d+$")


class XPlaneError(ValueError):
    """A profile capture cannot be used; the message names the file and says why."""


@dataclass(frozen=True, slots=True)
class XEvent:
    """One classified event of a capture, inside one step (times on the capture's clock).

    Attributes:
        kind: normalised kind (module docstring).
        name: span name: the kind, or the normalised op type for kernels and eager ops.
        start_ns, dur_ns: on the capture's clock (nanoseconds).
        track: ``python``, ``compute/0``, ... (normalised thread name).
        step: the step whose marker contains the event's start.
        op: node name (graph kernels) or op type (eager ops and their kernels).
        kernel: the kernel as TensorFlow names it (``_MklMatMul``); empty for structural kinds.
    """

    kind: str
    name: str
    start_ns: int
    dur_ns: int
    track: str
    step: int
    op: str = ""
    kernel: str = ""

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns


#: Collective ops of ``tf.distribute`` (all-reduce, all-gather, broadcast, all-to-all; NCCL on a
#: GPU): an async kernel whose event lasts until the collective is done, so it holds the wait
#: for the slower workers as well as the transfer.
COLLECTIVE_OPS = re.compile(r"^(Collective\w*|Nccl\w*)$")


def is_collective(e: XEvent) -> bool:
    """Whether a kernel event is a collective op (communication between workers)."""
    return bool(COLLECTIVE_OPS.match(e.kernel))


def is_data(e: XEvent) -> bool:
    """Whether a kernel event is the input pipeline's (by op, or by the thread it ran on)."""
    return bool(DATA_OPS.search(e.kernel)) or e.track.startswith(DATA_TRACK)


@dataclass(frozen=True)
class Capture:
    """The steps of one capture and their classified events.

    Attributes:
        path: the ``.xplane.pb`` read.
        steps: step index -> (start_ns, end_ns) of its ``train`` marker, capture clock.
        events: classified events whose start lies in one of those steps, by start time.
        missing: requested steps that have no marker in the capture.
        inferred: without markers, the function whose calls are the steps (``parse(infer=)``).
    """

    path: Path
    steps: dict[int, tuple[int, int]]
    events: tuple[XEvent, ...]
    missing: tuple[int, ...] = ()
    inferred: str = ""


def normalise_kernel(kernel: str) -> str:
    """The op type a kernel implements: ``_MklNativeFusedMatMul`` -> ``FusedMatMul``."""
    for prefix in KERNEL_PREFIXES:
        if kernel.startswith(prefix) and len(kernel) > len(prefix):
            return kernel[len(prefix) :]
    return kernel


def normalise_track(line_name: str, seen: dict[str, str]) -> str:
    """``tf_Compute/-3845…`` -> ``compute/0`` (ordinal per base name, in order of appearance)."""
    if line_name in seen:
        return seen[line_name]
    m = _THREAD_ID.match(line_name)
    base = m.group("base") if m else line_name
    base = {"tf_Compute": "compute"}.get(base, base)
    if m:
        n = sum(1 for v in seen.values() if v.rsplit("/", 1)[0] == base)
        track = f"{base}/{n}"
    else:
        track = base
    seen[line_name] = track
    return track


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Total length covered by ``(start, end)`` intervals (overlaps counted once)."""
    total = 0
    cur_start = cur_end = None
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if cur_end is None or start > cur_end:
            if cur_end is not None and cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
    if cur_end is not None and cur_start is not None:
        total += cur_end - cur_start
    return total


# --- reading ---------------------------------------------------------------------------------


def read_xspace(path: Path) -> Any:
    """The ``XSpace`` protobuf in ``path``; ``XPlaneError`` naming the file if unusable."""
    from google.protobuf.message import DecodeError
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise XPlaneError(f"{path}: cannot read the profile capture ({exc.strerror})") from None
    if not data:
        raise XPlaneError(f"{path}: the profile capture is empty")
    space = xplane_pb2.XSpace()
    try:
        space.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise XPlaneError(f"{path}: corrupt or truncated profile capture ({exc})") from None
    return space


def _host_plane(space: Any, path: Path) -> Any:
    for plane in space.planes:
        if plane.name == HOST_PLANE:
            return plane
    names = ", ".join(repr(p.name) for p in space.planes) or "none"
    raise XPlaneError(f"{path}: no {HOST_PLANE} plane (planes: {names}); truncated capture?")


def _stat_reader(plane: Any) -> Any:
    names = {k: v.name for k, v in plane.stat_metadata.items()}

    def read(stats: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for st in stats:
            which = st.WhichOneof("value")
            if which is None:
                continue
            value = getattr(st, which)
            if which == "ref_value":
                value = names.get(value, "")
            out[names.get(st.metadata_id, "")] = value
        return out

    return read


def inferred_steps(plane: Any, stats_of: Any) -> tuple[dict[int, tuple[int, int]], str]:
    """Steps of a capture without ``train`` markers (a job profiled from outside): each call of
    the ``tf.function`` called most often (at least ``MIN_INFERRED`` times) is a step, from its
    start to the next call's start (the last call, with no next, is left out). Returns the
    steps and the function's name (empty: none found)."""
    metadata = plane.event_metadata
    calls: dict[str, list[int]] = {}
    for line in plane.lines:
        base_ns = line.timestamp_ns
        for ev in line.events:
            if "tf_function_call" not in stats_of(ev.stats):
                continue
            name = metadata[ev.metadata_id].name
            calls.setdefault(name, []).append(base_ns + ev.offset_ps // 1000)
    if not calls:
        return {}, ""
    name, starts = max(calls.items(), key=lambda kv: len(kv[1]))
    if len(starts) < MIN_INFERRED:
        return {}, ""
    starts.sort()
    return {i: (starts[i], starts[i + 1]) for i in range(len(starts) - 1)}, name


#: Calls of one tf.function a capture needs for its steps to be inferred from them.
MIN_INFERRED = 3


def parse(path: Path, steps: Iterable[int] | None = None, infer: bool = False) -> Capture:
    """Read ``path`` and classify the events of ``steps`` (all marked steps if None).

    ``infer``: a capture without ``train`` markers gets its steps from its most-called
    ``tf.function`` (``inferred_steps``; ``Capture.inferred`` names it).

    Raises:
        XPlaneError: the file is unreadable, corrupt or truncated, has no host plane, or none
            of the requested steps has a ``train`` marker (nor, with ``infer``, a function
            called often enough to be the step).
    """
    path = Path(path)
    space = read_xspace(path)
    plane = _host_plane(space, path)
    stats_of = _stat_reader(plane)
    metadata = plane.event_metadata
    wanted = set(steps) if steps is not None else None

    # Pass 1: the step markers, so every other event can be assigned to a step.
    marks: dict[int, tuple[int, int]] = {}
    for line in plane.lines:
        base_ns = line.timestamp_ns
        for ev in line.events:
            if metadata[ev.metadata_id].name != STEP_EVENT:
                continue
            step = stats_of(ev.stats).get("step_num")
            if step is None or (wanted is not None and int(step) not in wanted):
                continue
            start = base_ns + ev.offset_ps // 1000
            marks[int(step)] = (start, start + ev.duration_ps // 1000)
    inferred = ""
    if not marks and infer:
        marks, inferred = inferred_steps(plane, stats_of)
        if wanted is not None:
            marks = {k: v for k, v in marks.items() if k in wanted}
    if not marks:
        which = "any step" if wanted is None else f"steps {_span_text(wanted)}"
        raise XPlaneError(
            f"{path}: no '{STEP_EVENT}' step marker for {which} (truncated or foreign capture?)"
        )
    ordered = sorted((start, end, step) for step, (start, end) in marks.items())
    starts = [s for s, _e, _i in ordered]

    def step_of(t: int) -> int | None:
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and t < ordered[i][1]:
            return ordered[i][2]
        return None

    events: list[XEvent] = []
    tracks: dict[str, str] = {}
    for line in plane.lines:
        track = normalise_track(line.name, tracks)
        events.extend(_classify_line(line, track, metadata, stats_of, step_of))
    events.sort(key=lambda e: (e.start_ns, -e.dur_ns))
    missing = tuple(sorted(wanted - set(marks))) if wanted is not None else ()
    return Capture(path=path, steps=marks, events=tuple(events), missing=missing, inferred=inferred)


def _span_text(steps: set[int]) -> str:
    return f"{min(steps)}..{max(steps)}" if steps else "(none)"


def _classify_line(
    line: Any, track: str, metadata: Any, stats_of: Any, step_of: Any
) -> list[XEvent]:
    """Classified events of one line; nesting (for eager kernels) from a stack of open events."""
    base_ns = line.timestamp_ns
    raw = sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps))
    out: list[XEvent] = []
    # Open EagerExecute events: (end_ns, is_func, op name).
    open_eager: list[tuple[int, bool, str]] = []
    for ev in raw:
        md = metadata[ev.metadata_id]
        name = md.name
        start = base_ns + ev.offset_ps // 1000
        dur = ev.duration_ps // 1000
        while open_eager and open_eager[-1][0] <= start:
            open_eager.pop()
        kind = EVENT_KINDS.get(name)
        display = md.display_name
        if kind is None and display and name.endswith(":" + display):
            kind = "kernel"
        if kind is None or kind == "step":
            if kind is None and "tf_function_call" in stats_of(ev.stats):
                kind = "function_call"
            else:
                continue
        step = step_of(start)
        if kind == "eager_execute":
            stats = stats_of(ev.stats)
            op = str(stats.get("eager_op", ""))
            is_func = bool(stats.get("is_func", 0))
            open_eager.append((start + dur, is_func, op))
            if step is None:
                continue
            if is_func:
                out.append(XEvent("run_call", "run_call", start, dur, track, step, op=op))
            else:
                out.append(XEvent("eager_op", op, start, dur, track, step, op=op, kernel=op))
            continue
        if step is None:
            continue
        if kind == "eager_kernel":
            if not open_eager or open_eager[-1][1]:
                continue  # a function's run: its kernels are separate events
            op = open_eager[-1][2]
            out.append(XEvent("kernel", op, start, dur, track, step, op=op, kernel=op))
        elif kind == "kernel":
            node = name[: -len(display) - 1]
            out.append(
                XEvent("kernel", normalise_kernel(display), start, dur, track, step, node, display)
            )
        elif kind == "function_call":
            out.append(XEvent("function_call", "function_call", start, dur, track, step, op=name))
        else:
            out.append(XEvent(kind, kind, start, dur, track, step))
    return out


# --- analysis --------------------------------------------------------------------------------


def step_table(capture: Capture) -> StepColumns:
    """Per-step aggregates as columns (``STEP_COLUMNS``), one entry per marked step in order.

    ``kernel_union_ns`` counts time when at least one kernel ran (parallel kernels once);
    ``executor_ns`` likewise for executor work; both are clipped to the step's marker (an
    ``ExecutorDoneCallback`` of an in-graph loop can outlast the call that started it).
    ``*_call_ns`` and ``eager_op_ns`` are sums.
    """
    by_step: dict[int, list[XEvent]] = {s: [] for s in capture.steps}
    for ev in capture.events:
        by_step[ev.step].append(ev)
    cols: dict[str, list[int]] = {c: [] for c in STEP_COLUMNS}
    for step in sorted(capture.steps):
        start, end = capture.steps[step]
        evs = by_step[step]
        kernels = [e for e in evs if e.kind == "kernel"]
        eager = [e for e in evs if e.kind == "eager_op"]
        row = {
            "step": step,
            "wall_ns": end - start,
            "function_call_ns": sum(e.dur_ns for e in evs if e.kind == "function_call"),
            "run_call_ns": sum(e.dur_ns for e in evs if e.kind == "run_call"),
            "executor_ns": union_ns(
                (e.start_ns, min(e.end_ns, end))
                for e in evs
                if e.kind in ("executor", "executor_done")
            ),
            "kernel_union_ns": union_ns((e.start_ns, min(e.end_ns, end)) for e in kernels),
            "kernel_sum_ns": sum(e.dur_ns for e in kernels),
            "kernels": len(kernels),
            "eager_ops": len(eager),
            "eager_op_ns": sum(e.dur_ns for e in eager),
            "data_op_ns": union_ns((e.start_ns, min(e.end_ns, end)) for e in kernels if is_data(e)),
            "compute_union_ns": union_ns(
                (e.start_ns, min(e.end_ns, end))
                for e in kernels
                if not is_data(e) and not is_collective(e)
            ),
        }
        coll = [(e.start_ns, min(e.end_ns, end)) for e in kernels if is_collective(e)]
        row["collective_ns"] = union_ns(coll)
        if coll:
            compute = [
                (e.start_ns, min(e.end_ns, end))
                for e in kernels
                if not is_data(e) and not is_collective(e)
            ]
            both = union_ns([*coll, *compute])
            row["collective_overlap_ns"] = row["collective_ns"] + row["compute_union_ns"] - both
        else:
            row["collective_overlap_ns"] = 0
        for c in STEP_COLUMNS:
            cols[c].append(row[c])
    return StepColumns(**{c: tuple(v) for c, v in cols.items()})


def medians(columns: StepColumns) -> StepMedians:
    """Median of every column but ``step`` (0 for an empty one)."""
    return StepMedians(
        **{
            c: median_ns(getattr(columns, c)) if getattr(columns, c) else 0
            for c in STEP_COLUMNS
            if c != "step"
        }
    )


def op_table(capture: Capture) -> OpTable:
    """The per-op table of the capture's kernel events (``collectors.op_table``)."""
    return op_table_mod.build(
        (
            (e.op, e.kernel, e.dur_ns, e.track.startswith(DATA_TRACK))
            for e in capture.events
            if e.kind == "kernel"
        ),
        source="xplane",
        steps=len(capture.steps),
    )


def clock_offset(capture: Capture, bounds_ns: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """Offset from the capture's clock to ours, from the step markers, and its uncertainty.

    ``bounds_ns`` maps a step to its (start, end) boundaries on our clock. The marker of a step
    is entered after its start boundary and left before its end boundary, so the true offset
    lies in ``[lo, hi]``: ``lo`` the largest ``start - marker start``, ``hi`` the smallest
    ``end - marker end``. The offset returned is ``lo`` (markers never before their step);
    ``hi - lo`` bounds the alignment error (negative only if the two clocks disagree).
    """
    lo = hi = None
    for step, (m_start, m_end) in capture.steps.items():
        if step not in bounds_ns:
            continue
        start, end = bounds_ns[step]
        lo = start - m_start if lo is None else max(lo, start - m_start)
        hi = end - m_end if hi is None else min(hi, end - m_end)
    if lo is None or hi is None:
        return 0, 0
    return lo, hi - lo


def spans(capture: Capture, offset_ns: int = 0, max_spans: int = MAX_SPANS) -> tuple[Span, ...]:
    """Step markers and classified events as model spans on our clock (``+ offset_ns``).

    Steps are included whole and in order until ``max_spans`` would be exceeded.
    """
    by_step: dict[int, list[XEvent]] = {s: [] for s in capture.steps}
    for ev in capture.events:
        by_step[ev.step].append(ev)
    out: list[Span] = []
    for step in sorted(capture.steps):
        start, end = capture.steps[step]
        evs = by_step[step]
        if len(out) + 1 + len(evs) > max_spans:
            break
        out.append(Span("step", start + offset_ns, end - start, "tf/python", step, None))
        out.extend(
            Span(
                e.name,
                e.start_ns + offset_ns,
                e.dur_ns,
                f"tf/{e.track}",
                step,
                KIND_CATEGORY.get(e.kind),
            )
            for e in evs
        )
    return tuple(out)
