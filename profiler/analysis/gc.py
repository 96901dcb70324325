"""The cyclic garbage collector's time inside the timed steps.

Place in the pipeline: pure analysis of a script's GC record (``profiler.capture.gc_pauses``,
``trace.script["gc"]``) against the timed window's step spans (its segments' boundaries). Each
step's GC time is the overlap of the collections' pauses with its span; the window's figure is
their sum over the sum of its steps' wall time (``share``), so a rare long generation-2
collection counts at its weight instead of being trimmed as an outlier. ``python.gc`` in the
attribution (``profiler.analysis.attribution``) is that share of the typical step.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from profiler.model import WorkloadTrace
from profiler.model.gc import GcPauses

GENERATIONS = (0, 1, 2)


@dataclass(frozen=True)
class GcSteps:
    """The GC inside the timed window's steps.

    Attributes:
        steps: timed steps looked at (units of ``units_per_step`` training steps each).
        units_per_step: training steps per timed unit.
        step_ns: the steps' summed wall time.
        gc_ns: per step, the GC pause time inside it.
        collections: collections that started inside the steps, per generation.
        by_generation_ns: GC time inside the steps, per generation.
        freed: objects the collections that started inside the steps freed.
        cost_ns: what recording one collection cost (None: not measured).
    """

    steps: int
    units_per_step: int
    step_ns: int
    gc_ns: tuple[int, ...]
    collections: dict[int, int]
    by_generation_ns: dict[int, int]
    freed: int = 0
    cost_ns: int | None = None

    @property
    def total_ns(self) -> int:
        return sum(self.gc_ns)

    @property
    def share(self) -> float:
        """The GC's share of the window's step time."""
        return self.total_ns / self.step_ns if self.step_ns else 0.0

    @property
    def per_step_collections(self) -> float:
        """Collections per training step."""
        n = self.steps * self.units_per_step
        return sum(self.collections.values()) / n if n else 0.0

    @property
    def per_step_ns(self) -> float:
        """GC ns per training step."""
        n = self.steps * self.units_per_step
        return self.total_ns / n if n else 0.0

    def generation_share(self, generation: int) -> float:
        """One generation's share of the GC time."""
        total = self.total_ns
        return self.by_generation_ns.get(generation, 0) / total if total else 0.0


def in_steps(
    pauses: GcPauses, spans: list[tuple[int, int]], units_per_step: int = 1
) -> GcSteps | None:
    """The GC time inside each span (start_ns, end_ns), spans sorted and not overlapping.

    None when the record misses pauses inside the spans (its buffer filled before their end).
    """
    if not spans:
        return None
    if pauses.complete_until_ns is not None and pauses.complete_until_ns < spans[-1][1]:
        return None
    starts, ends = pauses.start_ns, pauses.end_ns
    gc_ns: list[int] = []
    counts = dict.fromkeys(GENERATIONS, 0)
    by_gen = dict.fromkeys(GENERATIONS, 0)
    freed = 0
    for s0, s1 in spans:
        total = 0
        # Pauses are recorded in order and never overlap: the first that may end inside.
        i = max(bisect_left(ends, s0), 0)
        while i < len(starts) and starts[i] < s1:
            overlap = min(ends[i], s1) - max(starts[i], s0)
            if overlap > 0:
                total += overlap
                gen = pauses.generation[i]
                by_gen[gen] = by_gen.get(gen, 0) + overlap
            if s0 <= starts[i]:
                gen = pauses.generation[i]
                counts[gen] = counts.get(gen, 0) + 1
                freed += pauses.collected[i]
            i += 1
        gc_ns.append(total)
    return GcSteps(
        steps=len(spans),
        units_per_step=units_per_step,
        step_ns=sum(s1 - s0 for s0, s1 in spans),
        gc_ns=tuple(gc_ns),
        collections=counts,
        by_generation_ns=by_gen,
        freed=freed,
        cost_ns=pauses.cost_ns,
    )


def timed_spans(trace: WorkloadTrace) -> list[tuple[int, int]]:
    """The timed window's steps as (start_ns, end_ns), in order."""
    timed = trace.phase("timed")
    if timed is None or timed.window is None:
        return []
    out: list[tuple[int, int]] = []
    for seg in timed.window.segments:
        b = seg.boundaries_ns
        out.extend((b[j], b[j + 1]) for j in range(seg.n_steps))
    return out


def analyse(trace: WorkloadTrace) -> GcSteps | None:
    """The GC inside ``trace``'s timed steps; None when it was not recorded (a registered
    workload, an old trace) or the window has no steps."""
    pauses = GcPauses.from_json(trace.script.get("gc") if trace.script else None)
    if pauses is None:
        return None
    return in_steps(pauses, timed_spans(trace), trace.work.units_per_step)


#: The attribution's named part holding the GC's time.
PART = "python.gc"


def place(
    gc: GcSteps | None,
    typical: dict[str, int],
    parts: dict[str, int],
    notes: list[str],
    reference_ns: int,
    python_sampled: bool,
) -> None:
    """Name the GC's part of the typical step (``PART``), in place.

    Its ns (the window's GC share of ``reference_ns``) are taken from ``python`` first when the
    sampled phase measured it (py-spy shows the Python frame that triggered a collection, so
    its samples are there), then from ``other`` (a step not explained), whose ns then move to
    ``python``. More GC time than those two hold is capped at them, with a note.
    """
    if gc is None or gc.total_ns == 0 or reference_ns <= 0:
        return
    want = round(gc.share * reference_ns)
    from_python = min(want, typical.get("python", 0)) if python_sampled else 0
    from_other = min(want - from_python, typical.get("other", 0))
    typical["python"] = typical.get("python", 0) + from_other
    typical["other"] = typical.get("other", 0) - from_other
    held = from_python + from_other
    if held <= 0:
        return
    parts[PART] = held
    notes.append(
        f"the garbage collector: {100 * gc.share:.0f}% of the timed steps' time "
        f"({gc.per_step_collections:.1f} collections a step, gc.callbacks), in python.gc"
        + (" (from other: the sampled phase did not explain it)" if from_other else "")
    )
    if held < want:
        notes.append(
            f"the garbage collector's {want / 1e6:.2f} ms a step exceed what python and other "
            f"hold; python.gc is capped at {held / 1e6:.2f} ms"
        )


def to_json(gc: GcSteps) -> dict[str, object]:
    """The summary's ``gc`` object: per training step of the timed window, and by generation."""
    n = gc.steps * gc.units_per_step
    return {
        "steps": n,
        "collections_per_step": round(gc.per_step_collections, 3),
        "ms_per_step": round(gc.per_step_ns / 1e6, 4),
        "share": round(gc.share, 4),
        "by_generation": {
            str(g): {
                "collections_per_step": round(gc.collections.get(g, 0) / n, 3) if n else 0.0,
                "ms_per_step": round(gc.by_generation_ns.get(g, 0) / n / 1e6, 4) if n else 0.0,
                "share": round(gc.generation_share(g), 4),
            }
            for g in GENERATIONS
        },
        "freed_per_step": round(gc.freed / n, 1) if n else 0.0,
        "cost_us_per_collection": None if gc.cost_ns is None else round(gc.cost_ns / 1e3, 2),
    }


def record_totals(record: object) -> object:
    """The script record's ``gc`` as the summary keeps it: the run's totals, not each pause."""
    pauses = GcPauses.from_json(record)
    if pauses is None:
        return record
    return {
        "count": pauses.count,
        "total_ms": round(pauses.total_ns / 1e6, 3),
        "complete": pauses.complete_until_ns is None,
        "cost_us_per_collection": (
            None if pauses.cost_ns is None else round(pauses.cost_ns / 1e3, 2)
        ),
    }


def run_span(trace: WorkloadTrace) -> list[tuple[int, int]]:
    """One span from the first to the last step any phase's window measured: the steps of
    most of the run, whichever phase ran them (a collection that fell in the timed window
    may be rare)."""
    bounds = [
        (seg.boundaries_ns[0], seg.boundaries_ns[-1])
        for rec in trace.phases
        if rec.window is not None
        for seg in rec.window.segments
        if len(seg.boundaries_ns) > 1
    ]
    if not bounds:
        return []
    return [(min(b[0] for b in bounds), max(b[1] for b in bounds))]


def across_run(trace: WorkloadTrace) -> GcSteps | None:
    """The GC inside ``run_span``; None where not recorded."""
    pauses = GcPauses.from_json(trace.script.get("gc") if trace.script else None)
    if pauses is None:
        return None
    return in_steps(pauses, run_span(trace), trace.work.units_per_step)
