"""The trace model: what capture produces and everything after it reads.

Place in the pipeline: workloads and phases *produce* these objects inside the workload
process; collectors convert foreign artefacts (py-spy stacks, xplane, line_profiler stats) *into*
them; attribution, experiments and reports only *read* them.

Rules of the model:

* every class is a frozen, slotted dataclass; collections are tuples;
* every time is an ``int`` of nanoseconds and says so in its name (``start_ns``, ``dur_ns``);
* a step is one iteration of the training loop as the code defines it. Steps are stored as
  back-to-back boundaries (``Segment.boundaries_ns``): step ``i`` runs from boundary ``i`` to
  boundary ``i + 1``, so nothing between two steps is lost;
* work counters are declared once per workload (``WorkDecl``) and derived per step, so the hot
  path records one timestamp and nothing else.

The model imports nothing else of the project's. ``to_jsonable``/``from_jsonable`` convert any
model object to plain JSON types and back, driven by the type hints; ``WorkloadTrace.save`` and
``WorkloadTrace.load`` are the one way a trace is written and read (``model.json.gz``).
"""

from __future__ import annotations

import array
import base64
import dataclasses
import functools
import gzip
import itertools
import json
import statistics
import sys
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler.model.records import PHASE_DATA, PhaseData
from profiler.model.text import shown

#: Every step's wall time is split into these causes (profiler/docs/measuring.md, "Categories").
CATEGORIES: tuple[str, ...] = (
    "compute",
    "dispatch",
    "feed_fetch",
    "python",
    "tracing",
    "communication",
    "other",
)

#: Phase names, in the fixed order a workload process runs them.
PHASE_ORDER: tuple[str, ...] = ("timed", "sampled", "lines", "framework", "hooks", "whatif")

#: Status of a phase or of a workload.
OK, FAILED, UNAVAILABLE, SKIPPED, TIMEOUT, PARTIAL = (
    "ok",
    "failed",
    "unavailable",
    "skipped",
    "timeout",
    "partial",
)


class ModelError(ValueError):
    """A model object violates one of the model's invariants."""


@dataclass(frozen=True, slots=True)
class WorkDecl:
    """Work done per timed unit (one recorded step), declared once by the workload.

    Attributes:
        samples_per_step: training samples processed per timed unit (a full-batch step: n).
        updates_per_step: parameter updates per timed unit.
        steps_per_epoch: training steps that make one epoch *as that implementation defines
            it* (a full-batch loop: 1; a loop of 32 single-sample updates per "epoch": 32).
        flops_per_step: floating-point operations of the arithmetic itself, per step.
        bytes_per_step: bytes the arithmetic reads and writes, per step (a lower bound).
        units_per_step: training steps executed by one timed unit (``k`` for loops that run k
            steps in one call); per-step figures are the unit's time divided by this.
    """

    samples_per_step: int
    updates_per_step: int
    steps_per_epoch: int
    flops_per_step: int
    bytes_per_step: int
    units_per_step: int = 1

    def __post_init__(self) -> None:
        for name in ("samples_per_step", "updates_per_step", "steps_per_epoch", "units_per_step"):
            if getattr(self, name) < 1:
                raise ModelError(f"WorkDecl.{name} must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True, slots=True)
class Step:
    """One step, derived from a segment: its wall time and cumulative work counters."""

    index: int
    start_ns: int
    end_ns: int
    samples: int
    updates: int
    epoch: int

    @property
    def dur_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of back-to-back steps: ``first_step`` .. ``first_step + n_steps - 1``.

    ``boundaries_ns[0]`` is the start of the first step; every later boundary ends one step and
    starts the next. A window is cut into segments only where the runner deliberately stepped
    outside the loop (to record a metric); that time is a ``Gap``, measured, never a step's.
    """

    first_step: int
    boundaries_ns: tuple[int, ...]

    def __post_init__(self) -> None:
        b = self.boundaries_ns
        if len(b) < 1:
            raise ModelError("a segment needs at least its start boundary")
        for i in range(1, len(b)):
            if b[i] < b[i - 1]:
                raise ModelError(f"segment boundaries go backwards at {i}: {b[i - 1]} > {b[i]}")

    @property
    def n_steps(self) -> int:
        return len(self.boundaries_ns) - 1

    @property
    def start_ns(self) -> int:
        return self.boundaries_ns[0]

    @property
    def end_ns(self) -> int:
        return self.boundaries_ns[-1]

    def durations_ns(self) -> tuple[int, ...]:
        b = self.boundaries_ns
        return tuple(b[i + 1] - b[i] for i in range(len(b) - 1))


@dataclass(frozen=True, slots=True)
class Gap:
    """Time the runner spent outside the loop between two segments, and why."""

    start_ns: int
    dur_ns: int
    reason: str


@dataclass(frozen=True, slots=True)
class ReferenceBlock:
    """A few uninstrumented steps of a script run between two phases' windows.

    Each instrumented window so has an uninstrumented neighbour taken at nearly the same moment
    (A B A B): its figures are scaled against that neighbour's step time, never against a
    window measured a minute earlier, and the blocks' medians across the run say how much the
    machine's speed varied (``profiler.analysis.stats.drift``).

    Attributes:
        segment: the block's back-to-back steps.
        after: the phase whose window (and its own extra steps) ended just before it.
        before: the phase whose window comes next ("" when none followed: the script ended,
            or only the what-ifs, which alternate their own blocks, came after).
        repeat: which run of a script took it (0: the first).
    """

    segment: Segment
    after: str = ""
    before: str = ""
    repeat: int = 0


@dataclass(frozen=True, slots=True)
class Window:
    """The steps one phase measured: its segments, plus the re-warm steps run before them."""

    phase: str
    segments: tuple[Segment, ...]
    gaps: tuple[Gap, ...] = ()
    rewarm_steps: int = 0

    @property
    def n_steps(self) -> int:
        return sum(s.n_steps for s in self.segments)

    def durations_ns(self) -> tuple[int, ...]:
        out: list[int] = []
        for s in self.segments:
            out.extend(s.durations_ns())
        return tuple(out)

    def steps(self, work: WorkDecl) -> Iterator[Step]:
        """The window's steps with cumulative counters derived from ``work``."""
        for seg in self.segments:
            b = seg.boundaries_ns
            for j in range(seg.n_steps):
                index = seg.first_step + j
                done = index + 1
                yield Step(
                    index=index,
                    start_ns=b[j],
                    end_ns=b[j + 1],
                    samples=done * work.samples_per_step,
                    updates=done * work.updates_per_step,
                    epoch=(index * work.units_per_step) // work.steps_per_epoch,
                )

    @property
    def gap_ns(self) -> int:
        return sum(g.dur_ns for g in self.gaps)


@dataclass(frozen=True, slots=True)
class Span:
    """A named interval on one track (a thread, or a line of a framework trace)."""

    name: str
    start_ns: int
    dur_ns: int
    track: str = "main"
    step: int | None = None
    category: str | None = None


@dataclass(frozen=True, slots=True)
class Frame:
    """One stack frame of a sample. ``native`` frames come from compiled code."""

    function: str
    file: str = ""
    line: int = 0
    native: bool = False


#: This toolkit's own source folder: its frames are not the user's.
_TOOLKIT_DIR = str(Path(__file__).resolve().parents[1]) + "/"


#: The files AutoGraph writes for a tf.function's Python as it traces it (a temporary folder's
#: ``__autograph_generated_file<id>.py``): TensorFlow's code, run while it traces.
AUTOGRAPH_FILE = "__autograph_generated_file"


def is_own_frame(f: Frame) -> bool:
    """A frame of the user's own code: not native, not an installed package's, not the
    standard library's, not this toolkit's (its loop marks run in the script's loops), not
    AutoGraph's conversion of it (TensorFlow's distributed training tutorial's start read
    "tf__distributed_train_step (__autograph_generated_filejgpoesja.py line 10) in its own
    code")."""
    if f.native or not f.file or f.file.startswith("<"):
        return False
    return not (
        "-packages/" in f.file
        or "/lib/python3." in f.file
        or f.file.startswith(_TOOLKIT_DIR)
        or AUTOGRAPH_FILE in f.file
    )


@dataclass(frozen=True, slots=True)
class Sample:
    """A distinct stack (root first, leaf last) and how many times it was sampled."""

    frames: tuple[Frame, ...]
    count: int
    thread: str = ""


@dataclass(frozen=True, slots=True)
class LineStat:
    """line_profiler's figures for one source line."""

    file: str
    line: int
    function: str
    hits: int
    total_ns: int
    source: str = ""


@dataclass(frozen=True, slots=True)
class MetricPoint:
    """A metric (e.g. loss on the evaluation set) recorded after ``step`` (its last step done).

    ``cost_ns`` is what recording it cost; that time sits in a ``Gap``, never inside a step.
    """

    step: int
    name: str
    value: float
    cost_ns: int = 0


@dataclass(frozen=True, slots=True)
class Inflation:
    """How much a phase's instrumentation slowed the steps: median step time, phase vs timed."""

    phase: str
    baseline_ns: int
    phase_ns: int

    @property
    def ratio(self) -> float:
        return self.phase_ns / self.baseline_ns if self.baseline_ns > 0 else float("nan")


@dataclass(frozen=True, slots=True)
class PhaseRecord:
    """What one phase produced inside the workload process.

    Attributes:
        name: phase name (``PHASE_ORDER``).
        status: ``ok``, ``unavailable`` (cannot run here; ``reason`` says why and how to fix),
            ``skipped`` (does not apply to this workload), ``failed`` or ``partial``.
        window: the steps measured while the phase was installed.
        reason: for any status but ok, one line saying why.
        artefacts: files the phase wrote, relative to the workload's folder.
        spans, samples, lines: what the phase's collector turned into model objects.
        data: the phase's own record (``profiler.model.records``: ``PHASE_DATA[name]``), or
            None (the timed phase, a phase that did not run).
        missed: the phase applies to the loop but got no steps (a script ended first).
        repeat: which run of a script measured it (0: the first; ``--repeat``).
    """

    name: str
    status: str
    window: Window | None = None
    reason: str = ""
    artefacts: tuple[str, ...] = ()
    spans: tuple[Span, ...] = ()
    samples: tuple[Sample, ...] = ()
    lines: tuple[LineStat, ...] = ()
    data: PhaseData | None = None
    missed: bool = False
    repeat: int = 0


@dataclass(frozen=True, slots=True)
class WorkloadTrace:
    """Everything one workload process measured.

    Attributes:
        workload: registered name.
        params: the parameters it ran with (steps, n, seed, ...).
        work: declared work per step.
        build_ns: time to build the model/graph before the first step (a one-off cost).
        warmup: the warm-up window (its excess over the steady state is one-off cost too).
        phases: one record per phase that was asked for, in run order.
        metrics: metrics recorded between segments, in step order.
        marker_cost_ns: measured cost of one step marker in this process.
        final: the final parameters (e.g. ``W``, ``b``) and anything else the loop reports.
        status: ``ok``, ``failed``, ``timeout`` or ``partial``.
        error: for a failed workload, the tail of the error.
        script: for a user's script (``profiler.capture.script``): how it ran, how its steps were
            detected and how it ended (plain JSON types); empty for a registered workload.
        references: a script's uninstrumented reference blocks between the phases' windows,
            in step order (``ReferenceBlock``); none for a registered workload.
        before_steps: a script's main-thread stack samples from its start to its first step
            (the start-up capture's; ``profiler.analysis.before_steps``).
    """

    workload: str
    params: dict[str, Any]
    work: WorkDecl
    build_ns: int
    warmup: Window
    phases: tuple[PhaseRecord, ...]
    metrics: tuple[MetricPoint, ...] = ()
    marker_cost_ns: int = 0
    final: dict[str, float] = field(default_factory=dict, hash=False, compare=False)
    status: str = OK
    error: str = ""
    script: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    references: tuple[ReferenceBlock, ...] = ()
    before_steps: tuple[Sample, ...] = ()

    def phase(self, name: str) -> PhaseRecord | None:
        for p in self.phases:
            if p.name == name:
                return p
        return None

    def data(self, name: str) -> Any:
        """The record of phase ``name`` if that phase ran to completion, else None."""
        rec = self.phase(name)
        return rec.data if rec is not None and rec.status == OK else None

    def save(self, path: Path) -> None:
        """Write the trace as gzipped JSON, atomically (``model.json.gz``)."""
        from profiler.model.atomic import atomic_write_bytes

        data = json.dumps(to_jsonable(self), separators=(",", ":")).encode()
        atomic_write_bytes(path, gzip.compress(data, compresslevel=5))

    @classmethod
    def load(cls, path: Path) -> WorkloadTrace:
        """Read a trace written by ``save``."""
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            return typing.cast(WorkloadTrace, from_jsonable(cls, json.load(fh)))


def median_ns(values: tuple[int, ...] | list[int]) -> int:
    """Median of integer nanoseconds, as an integer (lower median for even counts)."""
    if not values:
        raise ModelError("median of no values")
    return int(statistics.median_low(values))


#: A step this many times the median is an outlier (an epoch's first batch, a validation pass).
OUTLIER_FACTOR = 3.0


def central_bounds(values: Sequence[int]) -> tuple[int, int]:
    """The typical step's range (inclusive): between the 10th and 90th percentiles, and no
    higher than ``OUTLIER_FACTOR`` times the median where that keeps over half the steps.
    Epochs of 8 batches have one slow first step in 8, more than the tenth the trim leaves out:
    a tabular fit's 2 ms batches read a typical step of 25 ms, and "a batch is 25,326 µs"."""
    if not values:
        raise ModelError("range of no values")
    ordered = sorted(values)
    n = len(ordered)
    lo, hi = ordered[n // 10], ordered[max(n - n // 10 - 1, 0)]
    cap = OUTLIER_FACTOR * ordered[(n - 1) // 2]
    if hi > cap and 2 * sum(lo <= v <= cap for v in ordered) > n:
        hi = int(cap)
    return lo, hi


def percentile_ns(values: tuple[int, ...] | list[int], q: float) -> int:
    """Nearest-rank percentile (0 < q <= 100) of integer nanoseconds."""
    if not values:
        raise ModelError("percentile of no values")
    ordered = sorted(values)
    rank = max(1, -(-int(q * len(ordered)) // 100))
    return ordered[min(rank, len(ordered)) - 1]


# --- JSON conversion -------------------------------------------------------------------------


def _pack_segment(seg: Segment) -> dict[str, Any]:
    # A 2 s window of a 3 µs loop is 600,000 boundaries: as JSON numbers that is ~9 MB and
    # seconds to parse. Step durations as base64 little-endian int64 are ~6x smaller and fast.
    b = seg.boundaries_ns
    deltas = array.array("q", (b[i + 1] - b[i] for i in range(len(b) - 1)))
    if sys.byteorder != "little":
        deltas.byteswap()
    return {
        "first_step": seg.first_step,
        "start_ns": b[0],
        "durations_ns_b64": base64.b64encode(deltas.tobytes()).decode("ascii"),
    }


def _unpack_segment(data: dict[str, Any]) -> Segment:
    if "boundaries_ns" in data:
        return Segment(data["first_step"], tuple(data["boundaries_ns"]))
    deltas = array.array("q")
    deltas.frombytes(base64.b64decode(data["durations_ns_b64"]))
    if sys.byteorder != "little":
        deltas.byteswap()
    bounds = tuple(itertools.accumulate(deltas, initial=data["start_ns"]))
    return Segment(data["first_step"], bounds)


def to_jsonable(obj: Any) -> Any:
    """Convert a model object (recursively) to dicts, lists and scalars.

    Strings (keys too) pass through ``text.shown``: a script's undecodable file name or
    exception message leaves the process as text any writer can encode.
    """
    if isinstance(obj, str):
        return shown(obj)
    if isinstance(obj, Segment):
        return _pack_segment(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, dict):
        return {shown(str(k)): to_jsonable(v) for k, v in obj.items()}
    return obj


def from_jsonable(cls: type, data: Any) -> Any:
    """Rebuild an object of type ``cls`` from ``to_jsonable`` output."""
    return _convert(cls, data)


def _convert(tp: Any, data: Any) -> Any:
    if data is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(args[0], data) if len(args) == 1 else data
    if origin is tuple:
        targs = typing.get_args(tp)
        inner = targs[0] if targs else Any
        return tuple(_convert(inner, v) for v in data)
    if origin is dict:
        vtype = typing.get_args(tp)[1] if typing.get_args(tp) else Any
        return {k: _convert(vtype, v) for k, v in data.items()}
    if tp is Segment:
        return _unpack_segment(data)
    if tp is PhaseRecord and isinstance(data, dict) and data.get("data") is not None:
        record = PHASE_DATA.get(str(data.get("name")))
        body = _convert(record, data["data"]) if record is not None else None
        return dataclasses.replace(_convert(tp, {**data, "data": None}), data=body)
    if dataclasses.is_dataclass(tp):
        kwargs = {}
        for name, hint in _field_types(typing.cast(type, tp)):
            if name in data:
                kwargs[name] = _convert(hint, data[name])
        return typing.cast(Any, tp)(**kwargs)
    return data


@functools.cache
def _field_types(tp: type) -> tuple[tuple[str, Any], ...]:
    """A dataclass's fields and their resolved types (resolving them is most of a trace's
    load time when done per object: ~1.2 s of a script's run)."""
    hints = typing.get_type_hints(tp, vars(sys.modules[tp.__module__]))
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(tp))
