"""The cyclic garbage collector's diagnosis: a step whose time is the collector's pauses.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance`` calls ``gc_facts`` and includes ``RULES``). ``gc_facts``
reads the GC's pauses inside the timed steps (``profiler.analysis.gc``). The finding fires when
they are ``GC_SHARE`` of the timed window's step time or more; its fix is the one the
measurement supports: objects freed every step are per-step objects in reference cycles (break
the cycles); collections that free little spend their time scanning live objects (raise the
thresholds); full collections holding most of it while freeing little scan what set-up left
(``gc.freeze()``).
"""

from __future__ import annotations

from typing import Any

from profiler.analysis import gc
from profiler.diagnoses.engine import Rule

#: The GC's share of the timed steps worth a finding.
GC_SHARE = 0.20
#: Under this many collections in the timed window, the GC's share across the run must hold
#: ``GC_SHARE`` too.
MIN_WINDOW_COLLECTIONS = 3
#: Objects freed a step above which the steps make cyclic garbage of their own.
FREED_PER_STEP = 1000
#: Generation 2's share of the GC time above which what set-up left dominates the scans.
FULL_SHARE = 0.5


def _fix(s: gc.GcSteps) -> str:
    freed = s.freed / max(s.steps * s.units_per_step, 1)
    full = s.generation_share(2)
    fixes = []
    if freed >= FREED_PER_STEP:
        fixes.append(
            f"the collector freed {freed:,.0f} objects a step: each step's objects are in "
            "reference cycles (a closure or a back-reference to its own object, a node and its "
            "parents); break the cycles (weakref, or drop the references once the step is "
            "done) so reference counting frees them without a collection; or, keeping "
            f"them, gc.disable() and one gc.collect() a step instead of "
            f"{s.per_step_collections:,.1f} collections"
        )
    elif full >= FULL_SHARE:
        # Only where the full collections free little: they scan live objects, which
        # gc.freeze() takes out of the scans if set-up made them (a step's own garbage, no).
        fixes.append(
            f"{100 * full:.0f}% of the GC time is full (generation-2) collections scanning "
            "every live object: call gc.freeze() after set-up so the objects alive then are "
            "left out of the scans"
        )
    if not fixes:
        fixes.append(
            f"{s.per_step_collections:,.1f} collections a step free {freed:,.0f} objects: "
            "raise the thresholds (gc.set_threshold(50_000, 50, 100), say) so fewer "
            "collections scan the step's live objects"
        )
    return "; ".join(fixes) + "."


def gc_facts(f: dict[str, Any], trace: Any) -> None:
    """The GC's pauses inside the timed steps (``profiler.analysis.gc``)."""
    s = gc.analyse(trace)
    if s is None:
        return
    f["gc_share"] = s.share
    f["gc_pct"] = 100 * s.share
    f["gc_us"] = s.per_step_ns / 1e3
    f["gc_ms"] = s.per_step_ns / 1e6
    f["gc_collections"] = s.per_step_collections
    f["gc_full_pct"] = 100 * s.generation_share(2)
    f["gc_freed"] = s.freed / max(s.steps * s.units_per_step, 1)
    f["gc_fix"] = _fix(s)
    f["gc_window_collections"] = sum(s.collections.values())
    # A few collections in the timed window may be rare ones (a k-fold loop's model built
    # anew each fold: one collection of 0.27 s in a fold of 3 s, read as 46% of the timed
    # steps): their share across the run decides then.
    if f["gc_window_collections"] < MIN_WINDOW_COLLECTIONS or _few_hold_it(trace):
        run = gc.across_run(trace)
        if run is not None and run.step_ns:
            f["gc_run_share"] = run.share


#: The timed window's steps over this many times its median, holding ``SLOW_HOLD`` of its
#: time or more, make the window's GC share theirs: the run's decides.
SLOW_FACTOR = 3.0
SLOW_HOLD = 0.5


def _few_hold_it(trace: Any) -> bool:
    """Whether a few slow steps hold most of the timed window (a new model's first batch,
    tracing its train function among 12 fast ones: the collector "63% of the timed steps'
    time" in a loop where the script's own gc.collect() was ~10% of a trial)."""
    took = sorted(e - b for b, e in gc.timed_spans(trace))
    if len(took) < 3:
        return False
    mid = took[len(took) // 2]
    slow = sum(t for t in took if t > SLOW_FACTOR * mid)
    return slow >= SLOW_HOLD * sum(took)


RULES: tuple[Rule, ...] = (
    Rule(
        id="garbage_collection",
        subject="workload",
        needs=(
            "label",
            "gc_share",
            "gc_pct",
            "gc_us",
            "gc_ms",
            "gc_collections",
            "gc_full_pct",
            "gc_freed",
            "gc_fix",
        ),
        when=lambda f: f["gc_share"] >= GC_SHARE and f.get("gc_run_share", 1.0) >= GC_SHARE,
        message=(
            "{label}: the cyclic garbage collector is {gc_pct:.0f}% of the timed steps' time "
            "({gc_ms:,.2f} ms a step, {gc_collections:,.1f} collections a step, "
            "{gc_full_pct:.0f}% of it in full generation-2 collections; gc.callbacks timed "
            "every collection)."
        ),
        fix="{gc_fix}",
        cost="gc_us",
    ),
)
