"""Long steps across the whole run: what a custom loop does once in a while between two steps.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance`` calls ``long_facts`` after the slow-step facts and includes
``RULES``). ``long_facts`` reads the script record's ``long_steps``: every step the script ran
(the windows' and the rest, ``profiler.capture.script.driver.long_steps``) at least 5x its
tenth of the run's median and 20 ms more. The windows hold a few dozen steps each: an
evaluation at each 150-step epoch's end of a VAE's custom loop (1.2 s, 31% of the loop measured
without the profiler) fell outside all of them and no answer named it; over every step of the
run it recurs.

The loop's time as the script runs it is the steps after the warm-up at the timed median plus
the long steps' excess (the median excess of the long steps no phase instrumented, else of all
of them) at the rate they came among the steps looked at (those next to a phase's switch and the
what-ifs' are not); the finding fires where the long steps recur (``MIN_LONG`` of them) and hold
``LONG_PCT`` of that, and not where another finding names the same steps: slow steps at a period
inside the windows (``periodic_slow_steps``), a fit's epoch boundaries (``per_epoch_cost``),
the collector's pauses (``garbage_collection``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from statistics import median
from typing import Any

from profiler.diagnoses.engine import Rule

#: Long steps needed for a finding (one is a one-off: a trace, a first evaluation).
MIN_LONG = 2
#: Their share of the loop's time worth a finding (%).
LONG_PCT = 5.0


def long_facts(f: dict[str, Any], trace: Any) -> None:
    """``long_*`` facts from ``script.long_steps``."""
    script = trace.script or {}
    record = script.get("long_steps") or {}
    step_us = f.get("step_us")
    if not step_us or (script.get("fit") or {}).get("steps_per_epoch"):
        return
    warm = trace.warmup.n_steps if trace.warmup is not None else 0
    steps = int(script.get("steps") or 0) - warm
    rows, looked = _kept(record, steps - int(record.get("left_out") or 0))
    if len(rows) < MIN_LONG or looked <= len(rows):
        return
    # Each one's excess from those no phase instrumented (timed is uninstrumented), else all.
    quiet = [r["us"] - r["median_us"] for r in rows if r["phase"] in QUIET]
    each = median(quiet or [r["us"] - r["median_us"] for r in rows])
    # At the rate seen among the steps looked at, over every step after the warm-up.
    count = len(rows) * steps / looked
    extra = each * count
    normal = step_us * (steps - count)
    f["long_count"] = len(rows)
    f["long_each_ms"] = each / 1e3
    f["long_factor"] = (each + step_us) / step_us
    f["long_pct"] = 100 * extra / (normal + extra)
    f["long_us"] = extra / steps
    f["long_where"] = _where([int(r["step"]) for r in rows])
    f["long_instrumented"] = not quiet


#: The phases whose steps run as the script's own (the timed window is uninstrumented).
QUIET = ("", "timed")
#: The phase whose instrument pauses the process at random moments (py-spy reads a stack):
#: beside a busy process some of its steps read 20-30 ms long.
PAUSED = "sampled"


def _kept(record: dict[str, Any], looked: int) -> tuple[list[dict[str, Any]], int]:
    """The long steps that are the loop's own, and the steps looked at for them. Where the
    quiet ones come at a spacing, the instrumented ones count at that spacing only (one at
    each position, within a step of it); without one, the sampled window's do not count and
    its steps are not looked at."""
    rows = record.get("steps") or []
    quiet = [r for r in rows if r["phase"] in QUIET]
    at = [int(r["step"]) for r in quiet]
    p = _spacing(at)
    if p:
        seen = {round((s - at[0]) / p) for s in at}
        kept = list(quiet)
        for r in rows:
            k = round((int(r["step"]) - at[0]) / p)
            aligned = abs(int(r["step"]) - at[0] - k * p) <= 1
            if r["phase"] not in QUIET and aligned and k not in seen:
                seen.add(k)
                kept.append(r)
        return sorted(kept, key=lambda r: int(r["step"])), looked
    paused = sum(
        max(int(s["to"]) - int(s["from"]), 0)
        for s in record.get("spans") or ()
        if s["phase"] == PAUSED
    )
    return [r for r in rows if r["phase"] != PAUSED], looked - paused


def _where(at: list[int]) -> str:
    """ "about every 150 steps (steps 150, 300 and 450)", or the steps alone when irregular."""
    shown = [f"{i:,}" for i in at[:6]]
    more = f" and {len(at) - 6:,} more" if len(at) > 6 else ""
    steps = (
        f"steps {', '.join(shown[:-1])} and {shown[-1]}{more}"
        if len(shown) > 1
        else f"step {shown[0]}"
    )
    p = _spacing(at)
    return f"one about every {p:,} steps ({steps})" if p else steps


def _spacing(at: list[int]) -> int:
    """The steps between long steps where every interval is a multiple of the shortest (within
    a step: an epoch's end whose step was left out leaves a double one), from three of them at
    least; 0 where they are not."""
    gaps = [b - a for a, b in itertools.pairwise(at)]
    p = min(gaps) if len(gaps) >= 2 else 0
    if p >= 2 and all(abs(g - p * round(g / p)) <= 1 for g in gaps):
        return p
    return 0


def _other_finding(f: Mapping[str, Any]) -> bool:
    """Another finding names these steps (see the module's docstring)."""
    periodic = (f.get("slow_period") or 0) > 1 and (f.get("slow_excess_pct") or 0) >= 5
    return bool(periodic or f.get("slow_by_graph") or (f.get("gc_share") or 0) >= 0.2)


RULES: tuple[Rule, ...] = (
    Rule(
        id="long_steps",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "long_count",
            "long_each_ms",
            "long_factor",
            "long_pct",
            "long_us",
            "long_where",
        ),
        when=lambda f: f["long_pct"] >= LONG_PCT and not _other_finding(f),
        message="{label}: {long_count} steps of the run each took {long_each_ms:,.0f} ms more "
        "than a {step_us:,.0f} µs step ({long_factor:,.0f}× it), {long_where}: "
        "{long_pct:.0f}% of the loop's time, in work the loop does between two steps once in a "
        "while (an evaluation, a checkpoint, logging, an epoch's data set-up), not in the "
        "steps.",
        fix="Find what the loop runs at those steps (at an epoch's end, every N steps): run it "
        "less often or on fewer samples, and make it cheaper (an evaluation's step compiled "
        "with tf.function as the training step is); a faster training step does not change "
        "it.",
        cost="long_us",
    ),
)
