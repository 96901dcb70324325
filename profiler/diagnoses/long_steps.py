"""Long steps across the whole run: what a custom loop does once in a while between two steps.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance`` calls ``long_facts`` after the slow-step facts and includes
``RULES``). ``long_facts`` reads the script record's ``long_steps``: every step the script ran
(the windows' and the rest, ``profiler.capture.script.driver.long_steps``) at least 5x its
tenth of the run's median and 20 ms more. The windows hold a few dozen steps each: an
evaluation at each 150-step epoch's end of a VAE's custom loop (1.2 s, 31% of the loop measured
without the profiler) fell outside all of them and no answer named it; over every step of the
run it recurs.

They count where they come at a period (``stats.period``: one offset's steps nearly all long,
beyond what long steps falling anywhere would give: beside a busy process, steps preempted for
30 ms came 70 times in a 3,000-step run), the instrumented windows' included (an evaluation
in the sampled window is one; py-spy's pauses and the preempted steps are not at the period).
At no period, a few very long ones still count (``MIN_FEW`` of 100 ms and 10x their tenth's
median, outside the sampled window: no preemption lasts that long), at their rate among the
steps looked at. Their share of the loop: the median excess of those no phase instrumented
(else of all of them) against a period (or that rate) of steps at the median of the steps
around them (their tenths' medians; the timed median where every one was instrumented). Their
cost per step, ``long_us``, is that share of the timed median step. The
finding fires where they hold ``LONG_PCT`` of the loop, and not where another finding names
the same steps: slow steps at a period inside the windows (``periodic_slow_steps``), a fit's
epoch boundaries (``per_epoch_cost``), a graph's new ops, the collector's pauses
(``garbage_collection``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from statistics import median
from typing import Any

from profiler.analysis import stats
from profiler.diagnoses.engine import Rule

#: Long steps needed for a finding at a period (``stats.period`` needs 3 at its offset) ...
MIN_LONG = 3
#: ... or, at no period, ``MIN_FEW`` to ``MAX_FEW`` of them each at least ``FEW_MIN_NS`` and
#: ``FEW_FACTOR`` times its tenth's median, in no paused window: a 4-epoch loop's evaluations,
#: one of three next to a phase's switch, left two; a busy machine's preempted steps read
#: 20-40 ms, and 110 ms and more beside the test suite (8 of them).
MIN_FEW = 2
MAX_FEW = 3
FEW_MIN_NS = 100_000_000
FEW_FACTOR = 10.0
#: ... or one alone, far beyond any preemption: ``ONE_MIN_NS`` and ``ONE_FACTOR`` times its
#: tenth's median (a VAE tutorial's eager test-set ELBO at each of 3 epochs' ends, 33% of an
#: epoch without the profiler: two fell in the windows' switches and after the last step, the
#: third took 5.1 s against 20 ms steps, and no answer named it).
ONE_MIN_NS = 1_000_000_000
ONE_FACTOR = 20.0
#: At no period, the few long ones count only this many times as long (to their tenths'
#: medians) as the longest of the other long steps, where those are as many or more.
APART = 1.5
#: The phase whose instrument pauses the process at random moments (py-spy reads a stack).
PAUSED = "sampled"
#: Their share of the loop's time worth a finding (%).
LONG_PCT = 5.0


#: A long step beside a trace is the trace's where the calls that traced took at least this
#: share of its time beyond the median.
TRACE_HOLDS = 0.5


def _less_traces(rows: Any, functions: Any, traced: set[int]) -> list[dict[str, Any]]:
    """The long steps that are not a trace's: those beside a trace (a step before or after it)
    whose traced calls, where timed (``traced_ms``), took under ``TRACE_HOLDS`` of their excess
    stay, less the traced calls' time. TensorFlow's distributed custom-training tutorial: 21.4 s
    between one epoch's last step and the next (its iterator's end, then the test loop), where
    its test function's first call traced in 1-3 s, was left out as a trace."""
    timed: dict[int, float] = {}
    for fn in functions:
        for at, ms in (fn.get("traced_ms") or {}).items():
            for k in (-1, 0, 1):
                timed[int(at) + k] = timed.get(int(at) + k, 0.0) + float(ms) * 1e3
    out = []
    for r in rows:
        step = int(r["step"])
        if step not in traced:
            out.append(dict(r))
            continue
        excess = float(r["us"]) - float(r["median_us"])
        took = timed.get(step)
        if took is None or took >= TRACE_HOLDS * excess:
            continue
        out.append({**r, "us": float(r["us"]) - took})
    return out


def long_facts(f: dict[str, Any], trace: Any) -> None:
    """``long_*`` facts from ``script.long_steps``."""
    script = trace.script or {}
    record = script.get("long_steps") or {}
    # A step in which a tf.function traced is a trace's (the retracing findings' and the
    # one-off tracing's), not work between two steps: a last partial batch's new shape; and
    # the step of a function's first call, its first trace (Keras's PPO example: its
    # train_policy and train_value_function first called after 4,000 steps, 2.0 s and 0.8 s of
    # tracing, read as "work the loop does between two steps once in a while ... run it less
    # often").
    traced = {
        int(s) + k
        for fn in script.get("functions") or ()
        for s in [
            *(fn.get("trace_steps") or ()),
            *([fn["first_step"]] if fn.get("first_step", -1) >= 0 else []),
        ]
        for k in (-1, 0, 1)
    }
    rows = _less_traces(record.get("steps") or (), script.get("functions") or (), traced)
    step_us = f.get("step_us")
    if not rows or not step_us or (script.get("fit") or {}).get("steps_per_epoch"):
        return
    warm = trace.warmup.n_steps if trace.warmup is not None else 0
    steps = int(script.get("steps") or 0)
    at = [int(r["step"]) for r in rows]
    p, picked = None, set()
    # Most of them the first step of a pass over the steps' loop: the work between two passes
    # (a custom loop's evaluation and checkpoint at each epoch's end), at the passes' length
    # (a distributed loop's 4 epoch ends, two in the what-ifs' and the trace's steps, read "2
    # steps at no period").
    length = int((record.get("passes") or {}).get("length") or 0)
    starts = [r for r in rows if r.get("after_pass_end")]
    passes = length > 1 and len(starts) >= MIN_FEW and 2 * len(starts) > len(rows)
    if passes:
        p, picked = length, {int(r["step"]) for r in starts}
    elif len(rows) >= MIN_LONG:
        # The what-ifs' steps were not looked at (their variants run another loop): counted
        # as looked at, a long step every 100 read "every 200", the 12 in the what-ifs' 1,200
        # steps taken as steps at the period that were not long.
        # The steps the record left out (next to a phase's switch, the runner's work, the
        # what-ifs' variants) are no positions of a period either; a record without them
        # leaves out the what-ifs' span.
        skipped = [(int(a), int(e)) for a, e in record.get("left") or ()] or [
            (int(sp["from"]), int(sp["to"]))
            for sp in record.get("spans") or ()
            if sp.get("phase") == "whatif"
        ]
        out = {i for a, e in skipped for i in range(a, e)}
        # Nor the steps that traced (left out of the rows above): the custom loop guide's
        # last partial batch retraced at its first epoch's end, where its validation ran.
        observed = [i for i in range(warm, steps) if i not in out and i not in traced]
        seen = set(observed)
        p, _, at_period = stats.period([i for i in at if i in seen], observed or [warm])
        if p is None:
            paused = frozenset(
                i
                for sp in record.get("spans") or ()
                if sp.get("phase") == PAUSED
                for i in range(int(sp["from"]), int(sp["to"]) + 1)
            )
            p, at_period = _few_at_period(rows, observed, paused)
        picked = _pass_ends_before(rows, set(at_period))
    if p is not None:
        kept = [r for r in rows if int(r["step"]) in picked]
        every = float(p)
        f["long_how"] = (
            f"the first step of each pass over the steps' loop (every {p:,} steps) took"
            if passes
            else f"one step in every {p:,} of the run took"
        )
    else:
        kept = [r for r in rows if _few(r)]
        looked = steps - warm - int(record.get("left_out") or 0)
        one = len(kept) == 1 and (
            kept[0]["us"] - kept[0]["median_us"] >= ONE_MIN_NS / 1e3
            and kept[0]["us"] >= ONE_FACTOR * kept[0]["median_us"]
        )
        # Few, or they are a busy machine's: beside the test suite a numpy loop's 2 ms steps
        # had 8 long ones of 110 ms and more at no period, and its evaluations among them.
        if not (one or MIN_FEW <= len(kept) <= MAX_FEW) or looked <= len(kept):
            return
        # Nor where they are the tail of many long steps, not apart from them: a numpy net's
        # two BLAS threads beside a busy process had 14 steps of 5-12x, three of them past
        # 10x, and read "work the loop does between two steps once in a while"; nothing ran
        # there (without the profiler: dozens of 3x steps on two threads, one on one thread).
        rest = [r["us"] / r["median_us"] for r in rows if not _few(r) and r["median_us"]]
        least = min(r["us"] / r["median_us"] for r in kept if r["median_us"]) if kept else 0.0
        if len(rest) >= len(kept) and least < APART * max(rest, default=0.0):
            return
        every = looked / len(kept)
        # Two or three show no period (a distributed loop's epoch ends, 63 steps apart, two of
        # them looked at, read "at no period").
        f["long_how"] = (
            f"one step of the {looked:,} looked at took"
            if one
            else f"{len(kept)} steps of the run, too few to show a period, each took"
        )
    # Each one's excess from those no phase instrumented (timed is uninstrumented), else all.
    quiet_rows = [r for r in kept if r["phase"] in QUIET]
    # Every one instrumented: the least of them, the least inflated (an epoch's evaluation
    # read 1,371 ms under the framework phase's tracer and 244 ms under the line profiler,
    # 125-180 ms without the profiler).
    excess = [r["us"] - r["median_us"] for r in quiet_rows or kept]
    each = median(excess) if quiet_rows else min(excess)
    # Against the steps around them (their tenths' medians), not the timed window's median
    # taken minutes away: beside a busy process an epoch's evaluation read 172 ms in CI
    # against a 642 µs timed step, "47% of the loop" where 15-18% was measured quiet.
    base = median(float(r["median_us"]) for r in quiet_rows) if quiet_rows else float(step_us)
    f["long_count"] = len(kept)
    f["long_period"] = p or 0
    f["long_each_ms"] = each / 1e3
    f["long_base_us"] = base
    f["long_factor"] = (each + base) / base
    f["long_pct"] = 100 * each / (every * base + each)
    f["long_us"] = each * step_us / (every * base)
    # Counted as the script's loop counts its iterations: those watched to find the loop came
    # first (an evaluation after each 300-step epoch read "steps 250, 550, ..." with 50
    # watched).
    offset = int(((script.get("auto_step") or {}).get("watched_iterations")) or 0)
    f["long_where"] = _where([int(r["step"]) + offset for r in kept])
    f["long_instrumented"] = not quiet_rows
    # tf.function advice only where the steps are TensorFlow 2's (a TF1 session loop's epoch-end
    # reshuffle was told to compile its evaluation with tf.function).
    # Nor where the script's evaluation step is a tf.function already (Keras's custom loop
    # guide's test_step: "compiled with tf.function" could not help).
    compiled = any(
        fn.get("own") and EVAL_FUNCTION.search(str(fn.get("name") or "").lower())
        for fn in script.get("functions") or ()
    )
    f["long_cheaper"] = (
        " (an evaluation's step compiled with tf.function as the training step is)"
        if f.get("framework") in ("tf2", "keras") and not compiled
        else ""
    )
    if passes and script.get("pipelines"):
        # The steps iterate a tf.data pipeline: a pass's first step makes its iterator anew
        # (TF's data performance guide: its generator "opens a file" at each 3-sample epoch's
        # start, read "an evaluation, a checkpoint, logging at an epoch's end").
        what, fix = BETWEEN_PASSES_DATA, BETWEEN_FIX_DATA
    elif passes:
        what, fix = BETWEEN_PASSES, BETWEEN_FIX
    else:
        what, fix = _what_and_fix(kept, script)
    f["long_what"], f["long_fix"] = what, fix.format(long_cheaper=f["long_cheaper"])


def _pass_ends_before(rows: list[dict[str, Any]], picked: set[int]) -> set[int]:
    """The steps just before the picked ones where those end a pass over the steps' loop (half
    of them or more) and hold more time beyond the steps around them: the boundary's larger
    part is the pass's end. d2l's softmax regression (a shuffle buffer of the whole data set)
    spent 0.4-3.4 s in each epoch's last iteration without the profiler, and its next epoch's
    first step ~0.4 s (its evaluation, the new pass's first batch); one run named the latter,
    "391 ms more ... an evaluation, a checkpoint", another the former, "Iterate one stream
    across the epochs" (epochs 5.1-10.3 s as written, 2.1-4.1 s with one stream)."""
    by_step = {int(r["step"]): r for r in rows}
    ends = [by_step[s - 1] for s in picked if by_step.get(s - 1, {}).get("pass_end")]
    chosen = [by_step[s] for s in picked if s in by_step]
    if not chosen or 2 * len(ends) < len(chosen):
        return picked

    def excess(rs: list[dict[str, Any]]) -> float:
        return median(float(r["us"]) - float(r["median_us"]) for r in rs)

    return {int(r["step"]) for r in ends} if excess(ends) > excess(chosen) else picked


def _few(r: Mapping[str, Any]) -> bool:
    """A long step no busy machine makes: ``FEW_MIN_NS`` more than its tenth's median and
    ``FEW_FACTOR`` times it, outside the paused window."""
    return (
        r["phase"] != PAUSED
        and r["us"] - r["median_us"] >= FEW_MIN_NS / 1e3
        and r["us"] >= FEW_FACTOR * r["median_us"]
    )


def _few_at_period(
    rows: list[dict[str, Any]], observed: list[int], paused: frozenset[int] = frozenset()
) -> tuple[int | None, list[int]]:
    """(the smallest period, its steps) at which ``MIN_LONG`` or more of the very long steps
    (``_few``) fall and every step looked at in that progression is one of them; (None, [])
    without one. A short run's chance test asks too much of them: a TF1 loop's checkpoint every
    110 steps, 0.85 s against 30 ms steps, three of three at the period in 401 steps looked at,
    read as chance at the 1% level across the 10,584 periods and offsets tried. A position in
    the paused window (``paused``: py-spy's pauses lengthen steps at random there) is neither
    a hit nor a miss: Keras's custom training loop guide's validation each 1,563-step epoch
    had its first in the sampled window, and read "too few to show a period"."""
    big = sorted(int(r["step"]) for r in rows if _few(r))
    if len(big) < MIN_LONG or not observed:
        return None, []
    seen, lo, hi = set(observed), observed[0], observed[-1]
    found: tuple[int | None, list[int]] = (None, [])
    for i, a in enumerate(big):
        for b in big[i + 1 :]:
            p = b - a
            if p < 2 or (found[0] is not None and p >= found[0]):
                continue
            hits = [x for x in big if (x - a) % p == 0]
            first = lo + (a - lo) % p
            positions = [x for x in range(first, hi + 1, p) if x in seen and x not in paused]
            # Most of the very long steps at it: a busy machine's preemptions of 100 ms and
            # more (8 beside the test suite) fall anywhere, and three of them can line up.
            if len(hits) >= MIN_LONG and set(positions) <= set(hits) and 2 * len(hits) > len(big):
                found = (p, hits)
    return found


#: A tf.function of the script's named as an evaluation step (``test_step``, ``val_step``,
#: ``evaluate``, ``compute_loss`` is not).
EVAL_FUNCTION = re.compile(r"(^|_)(test|val|valid|validation|eval|evaluate|evaluation)(_|$)")
#: The phases whose steps run as the script's own (the timed window is uninstrumented).
QUIET = ("", "timed")

#: Where the long steps are not the ends of the loop's passes: work between two steps.
BETWEEN = (
    "in work the loop does between two steps once in a while (an evaluation, a checkpoint, "
    "logging, an epoch's data set-up), not in the steps"
)
BETWEEN_FIX = (
    "Find what the loop runs at those steps (at an epoch's end, every N steps): run it less "
    "often or on fewer samples, and make it cheaper{long_cheaper}; a faster training step does "
    "not change it."
)
#: Where they are the first steps of the passes: what runs between two passes.
BETWEEN_PASSES = (
    "in work the script runs between two passes over the loop (an evaluation, a checkpoint, "
    "logging at an epoch's end), not in the steps"
)
#: ... where the steps iterate a tf.data pipeline: its iterator made anew at each pass too.
BETWEEN_PASSES_DATA = (
    "between two passes over the loop: the next pass's iterator made anew (the tf.data "
    "pipeline set up again: a generator started over, its files opened, its first batch "
    "waited for) and whatever the script runs at an epoch's end (an evaluation, a checkpoint, "
    "logging), not in the steps"
)
BETWEEN_FIX_DATA = (
    "Iterate one stream across the passes so none is set up again: it = iter(ds.repeat()) "
    "once, then itertools.islice(it, batches_per_epoch) each pass (or .cache() the pipeline "
    "where its set-up is the data's reading); what the script runs at an epoch's end, run less "
    "often or on fewer samples{long_cheaper}; a faster training step does not change it."
)
#: Where every one ended a pass over the steps' loop: the loop's own end.
PASS_END = (
    "each the last step of a pass over the steps' loop: it holds the loop's end, the time its "
    "iterable takes to run out ({ends}), or what the loop's body does at a pass's last "
    "iteration only, not work between the passes"
)
PASS_END_DATA = "a tf.data iterator's last next() at the epoch's end, which waits for the pipeline"
PASS_END_OTHER = "a generator's or a loader's end"
PASS_END_FIX_DATA = (
    "Iterate one stream across the epochs instead of a new pass each epoch: "
    "it = iter(ds.repeat()) once, then itertools.islice(it, batches_per_epoch) (or next(it)) "
    "each epoch, so no pass has to run out; if the loop's body does more at a pass's last batch "
    "(an evaluation there), run that less often; a faster training step does not change it."
)
PASS_END_FIX_OTHER = (
    "Find what the loop's iterable does when it runs out (a loader's workers stopping, a file "
    "closing, a generator's clean-up) and make it cheaper, or iterate one stream across the "
    "passes; if the loop's body does more at a pass's last iteration (an evaluation there), "
    "run that less often; a faster training step does not change it."
)


def _what_and_fix(kept: list[dict[str, Any]], script: Mapping[str, Any]) -> tuple[str, str]:
    """What the long steps hold and the fix: the loop's end where every one ended a pass over
    it (``pass_end``), else work between two steps."""
    if not kept or not all(r.get("pass_end") for r in kept):
        return BETWEEN, BETWEEN_FIX
    if script.get("pipelines"):
        return PASS_END.format(ends=PASS_END_DATA), PASS_END_FIX_DATA
    return PASS_END.format(ends=PASS_END_OTHER), PASS_END_FIX_OTHER


def _where(at: list[int]) -> str:
    """ "steps 150, 300 and 450", the first six."""
    shown = [f"{i:,}" for i in at[:6]]
    more = f" and {len(at) - 6:,} more" if len(at) > 6 else ""
    if len(shown) == 1:
        return f"step {shown[0]}"
    return f"steps {', '.join(shown[:-1])} and {shown[-1]}{more}"


def _other_finding(f: Mapping[str, Any]) -> bool:
    """Another finding names these steps (see the module's docstring)."""
    periodic = (f.get("slow_period") or 0) > 1 and (f.get("slow_excess_pct") or 0) >= 5
    named = f.get("slow_by_graph") or f.get("recreated_fn")
    return bool(periodic or named or (f.get("gc_share") or 0) >= 0.2)


RULES: tuple[Rule, ...] = (
    Rule(
        id="long_steps",
        subject="workload",
        needs=(
            "label",
            "long_base_us",
            "long_count",
            "long_how",
            "long_each_ms",
            "long_factor",
            "long_pct",
            "long_us",
            "long_where",
            "long_cheaper",
            "long_what",
            "long_fix",
        ),
        when=lambda f: f["long_pct"] >= LONG_PCT and not _other_finding(f),
        message="{label}: {long_how} {long_each_ms:,.0f} ms more than a {long_base_us:,.0f} µs "
        "step around it "
        "({long_factor:,.0f}× it; {long_where}): "
        "{long_pct:.0f}% of the loop's time, {long_what}.",
        fix="{long_fix}",
        cost="long_us",
    ),
)
