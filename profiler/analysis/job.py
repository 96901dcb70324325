"""A multi-worker job across its workers: who waits for whom, and why.

Place in the pipeline: pure analysis after every worker's own (``profiler.analysis.run``), on
the workers of one ``run --workers N`` job (or one ``capture`` of several hosts). Each worker's
attribution already has a ``communication`` category (its collective ops, less their overlap
with compute). Across workers:

* **per step** (the steps every worker's framework window captured): each worker's *busy* time,
  the step's wall time less its communication. In a synchronous all-reduce every worker leaves
  the collective together, so the one with the most busy time is the one the others waited for:
  the step's **straggler**; the **spread** is its busy time less the least busy worker's.
* **the job's straggler**: the worker that was the straggler in most steps; its **excess** is the
  median over steps of its busy time less the median busy time of the others.
* **the reason**: the category in which the straggler's typical step exceeds the other workers'
  mean by the most (communication and other left out: waiting is what the others do); input
  (``feed_fetch``), compute, or the Python around the step.
* **overlap**: per worker, the share of its collective time that ran while compute kernels ran.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from profiler.analysis.attribution import Attribution
from profiler.model import CATEGORIES, WorkloadTrace
from profiler.model.records import FrameworkData

OTHER = "other"

#: Categories a straggler's reason is chosen from (waiting is what the others do).
REASONS = ("compute", "dispatch", "feed_fetch", "python", "tracing")
#: What a reason means in words.
REASON_WORDS = {
    "compute": "its compute (kernels)",
    "dispatch": "its dispatch (the framework's per-call and per-op work)",
    "feed_fetch": "its input (feed/fetch and the input pipeline)",
    "python": "its Python (the code around the step)",
    "tracing": "its tracing",
    "other": "time no phase of this run measured (a capture: the Python and input around the "
    "framework's calls)",
}
#: A job with a straggler: its excess is at least this share of the typical step.
STRAGGLER_SHARE = 0.05


@dataclass(frozen=True)
class StepAcross:
    """One step as every worker ran it (index order of ``JobAnalysis.workers``)."""

    step: int
    busy_ns: tuple[int, ...]
    communication_ns: tuple[int, ...]
    straggler: int
    spread_ns: int


@dataclass(frozen=True)
class WorkerFigures:
    """One worker's figures in the job."""

    index: int
    workload: str
    step_ns: int | None
    typical: dict[str, int] = field(default_factory=dict)
    communication_ns: int | None = None
    overlap_share: float | None = None
    straggler_steps: int = 0


@dataclass(frozen=True)
class JobAnalysis:
    """The job across its workers (see the module docstring)."""

    workers: tuple[WorkerFigures, ...]
    steps: tuple[StepAcross, ...]
    straggler: int | None = None
    excess_ns: int | None = None
    spread_ns: int | None = None
    reason: str | None = None
    reason_ns: int | None = None
    isolation: str = ""
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        def us(ns: int | None) -> float | None:
            return None if ns is None else round(ns / 1e3, 3)

        return {
            "workers": [
                {
                    "index": w.index,
                    "workload": w.workload,
                    "step_us": us(w.step_ns),
                    "categories_us": {c: us(v) for c, v in w.typical.items()},
                    "communication_us": us(w.communication_ns),
                    "overlap_share": None if w.overlap_share is None else round(w.overlap_share, 4),
                    "straggler_steps": w.straggler_steps,
                }
                for w in self.workers
            ],
            "steps": [
                {
                    "step": s.step,
                    "busy_us": [us(b) for b in s.busy_ns],
                    "communication_us": [us(c) for c in s.communication_ns],
                    "straggler": s.straggler,
                    "spread_us": us(s.spread_ns),
                }
                for s in self.steps
            ],
            "straggler": self.straggler,
            "excess_us": us(self.excess_ns),
            "spread_us": us(self.spread_ns),
            "reason": self.reason,
            "reason_us": us(self.reason_ns),
            "isolation": self.isolation,
            "notes": list(self.notes),
        }


def worker_of(trace: WorkloadTrace | None) -> dict[str, Any] | None:
    """A trace's ``script["worker"]`` record (None: not a job's worker)."""
    if trace is None or not trace.script:
        return None
    w = trace.script.get("worker")
    return w if isinstance(w, dict) else None


def _per_step(fw: FrameworkData | None) -> dict[int, tuple[int, int]]:
    """step -> (busy ns, communication ns) from a framework capture's step table."""
    if fw is None or fw.steps is None or not fw.steps.collective_ns:
        return {}
    cols = fw.steps
    out = {}
    for step, wall, coll, over in zip(
        cols.step, cols.wall_ns, cols.collective_ns, cols.collective_overlap_ns, strict=True
    ):
        comm = max(coll - over, 0)
        out[step] = (max(wall - comm, 0), comm)
    return out


def analyse(
    workers: Sequence[tuple[int, str, WorkloadTrace | None, Attribution | None]],
) -> JobAnalysis | None:
    """The job of ``workers`` (task index, workload name, trace, attribution); None for fewer
    than two."""
    if len(workers) < 2:
        return None
    ordered = sorted(workers, key=lambda w: w[0])
    notes: list[str] = []
    per_step = []
    figures = []
    for index, name, trace, att in ordered:
        fw: FrameworkData | None = trace.data("framework") if trace is not None else None
        steps = _per_step(fw)
        per_step.append(steps)
        comm = overlap = None
        if fw is not None and fw.median_ns is not None and fw.steps is not None:
            coll = fw.median_ns.collective_ns
            comm = max(coll - fw.median_ns.collective_overlap_ns, 0)
            overlap = fw.median_ns.collective_overlap_ns / coll if coll else None
        figures.append(
            WorkerFigures(
                index=index,
                workload=name,
                step_ns=att.reference_ns if att is not None else None,
                typical=dict(att.typical) if att is not None else {},
                communication_ns=comm,
                overlap_share=overlap,
            )
        )
    common = sorted(set.intersection(*(set(s) for s in per_step))) if all(per_step) else []
    if not all(per_step):
        missing = [f.index for f, s in zip(figures, per_step, strict=True) if not s]
        notes.append(
            "per-step stragglers not measured: the framework phase captured no collective op "
            f"on worker{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}"
        )
    elif not common:
        notes.append(
            "per-step stragglers not measured: the workers' framework windows captured "
            "different steps"
        )
    across = []
    for step in common:
        busy = tuple(s[step][0] for s in per_step)
        comm_ns = tuple(s[step][1] for s in per_step)
        slow = max(range(len(busy)), key=lambda i: busy[i])
        across.append(StepAcross(step, busy, comm_ns, slow, busy[slow] - min(busy)))
    counts = [sum(1 for s in across if s.straggler == i) for i in range(len(figures))]
    figures = [
        WorkerFigures(**{**f.__dict__, "straggler_steps": n})
        for f, n in zip(figures, counts, strict=True)
    ]
    job = JobAnalysis(
        workers=tuple(figures),
        steps=tuple(across),
        isolation=str((worker_of(ordered[0][2]) or {}).get("isolation") or ""),
        notes=tuple(notes),
    )
    return _straggler(job, counts)


def _straggler(job: JobAnalysis, counts: list[int]) -> JobAnalysis:
    """The job's straggler, its excess and its reason (unchanged without per-step figures)."""
    from dataclasses import replace

    if not job.steps:
        return job
    slot = max(range(len(counts)), key=lambda i: counts[i])
    excess = []
    for s in job.steps:
        others = [b for i, b in enumerate(s.busy_ns) if i != slot]
        excess.append(s.busy_ns[slot] - int(statistics.median(others)))
    ex = int(statistics.median(excess))
    spread = int(statistics.median(s.spread_ns for s in job.steps))
    w = job.workers[slot]
    step = w.step_ns or 0
    if ex <= 0 or not step or ex < STRAGGLER_SHARE * step or not w.typical:
        return replace(job, excess_ns=max(ex, 0), spread_ns=spread)
    rest = [o for o in job.workers if o.index != w.index and o.typical]
    diff = {
        c: w.typical.get(c, 0) - statistics.mean(o.typical.get(c, 0) for o in rest)
        for c in REASONS
        if c in CATEGORIES
    }
    reason = max(diff, key=lambda c: diff[c]) if rest else None
    # Time no source measured (a capture has no Python side): named as such when it is most
    # of the difference, never given to a measured category.
    unknown = w.typical.get(OTHER, 0) - statistics.mean(o.typical.get(OTHER, 0) for o in rest)
    if rest and unknown > max(diff.values(), default=0):
        diff[OTHER] = unknown
        reason = OTHER
    return replace(
        job,
        straggler=w.index,
        excess_ns=ex,
        spread_ns=spread,
        reason=reason if reason and diff[reason] > 0 else None,
        reason_ns=int(diff[reason]) if reason and diff[reason] > 0 else None,
    )
