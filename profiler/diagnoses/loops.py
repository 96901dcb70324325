"""A step that runs a Python loop over its samples: numpy (or eager) calls on one sample at a
time, where the per-call cost outweighs the arithmetic.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance``). ``loop_facts`` reads the loops the automatic step
detection watched (``script.auto_step``, ``profiler.capture.script.detect.LoopMarks``): the
loop chosen as the step and the loops inside it, with their iterations and mean iteration time
over the same stretch of the run.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis import auto_step, sampling
from profiler.diagnoses.conversion import CONVERT_PCT
from profiler.diagnoses.engine import Rule

#: An inner loop that runs at least this many times a step ...
MIN_PER_STEP = 4
#: ... and holds at least this share of the step's time.
MIN_SHARE = 0.5
#: Per-call overhead (dispatch and Python) at least this share of the step.
MIN_OVERHEAD_PCT = 40
#: numpy's own per-call cost at least this share of a step, and ``NUMPY_DISPATCH_X`` times its
#: arithmetic: the arrays are too small. (A 256-row gradient-descent step whose time grows 2.3x
#: for 10x the rows measured dispatch 54-67% over ten runs, ±6 points each, its Python 21-36%:
#: a 60% floor fired on half of them. Its arithmetic is ~15% by that growth, so dispatch is
#: 3.5-5x it; beside a busy process its compute read 21% ±12 and dispatch 60%: 2.9x, under a 3x
#: floor. The sampled compute also holds the BLAS library's entry cost of each matrix product:
#: beside the test suite it read 23% compute and 55% dispatch, 2.4x, under a 2.5x floor; in
#: CI once 30% compute, 45% dispatch, 25% Python: 1.5x. So the overhead as a whole, dispatch and
#: the interpreter's share around the calls, is what must be ``NUMPY_DISPATCH_X`` times the
#: arithmetic, numpy's own part at least the arithmetic.)
NUMPY_DISPATCH_PCT = 40
NUMPY_DISPATCH_X = 2.0


#: A loop grouped with others of its function (``loop_facts``) holds at least this share.
MIN_GROUPED_SHARE = 0.1
#: An inner loop's share of the step above this is no inner loop of it (both loops' timings
#: are noisy: Nielsen's per-sample loop read 1.11 of its step, 10 iterations of 446 µs in a
#: 4,013 µs step, and at 1.05 the finding went to a loop holding 34%: "no fix found").
MAX_SHARE = 1.25
#: The watched steps' median under this share of their mean: a typical step is the median's.
TYPICAL_FACTOR = 0.5


def _line(lp: Any) -> str:
    """A watched loop's line, with its file where that is not the script (``45 of layers.py``)."""
    return f"{lp['line']} of {lp['file']}" if lp.get("file") else str(lp["line"])


def loop_facts(f: dict[str, Any], trace: Any) -> None:
    """The inner loop that holds most of an automatic step's time, if one runs per sample."""
    auto = (trace.script or {}).get("auto_step") or {}
    line = auto.get("chosen_line")
    loops = auto.get("loops") or []
    step = auto_step.chosen_loop(auto)
    if step is None or not step.get("iterations") or not step.get("mean_us"):
        return
    # The step loop's iterations that ended while watched: the one the choice began in is a
    # step, and its inner iterations were not counted (CS231n's per-example loop read 190
    # iterations a step, 3,800 over 20 begun, for its 200 samples a batch).
    steps = step.get("timed") or step["iterations"]
    # The typical step's count and time where the watcher kept them and the watched steps'
    # mean is far above their median (a step running something once in a while: min-char-
    # rnn's gradient check every 100th, its mean 62 ms against a median of 2.3 ms, read 145
    # iterations a step of a 25-character loop); else the means, as the inner loops' times are
    # (a median step against the inner loops' means put Nielsen's per-sample loop above the
    # whole step).
    median_us = auto.get("step_median_us")
    typical = bool(median_us) and median_us < TYPICAL_FACTOR * step["mean_us"]
    step_us = median_us if typical else step["mean_us"]
    found: list[tuple[dict[str, Any], float, float]] = []
    for lp in loops:
        if lp is step or not lp.get("mean_us") or not lp.get("iterations"):
            continue
        same = lp["function"] == step["function"] and lp.get("file") == step.get("file")
        if same and not (step["line"] < lp["line"] <= (step.get("end_line") or lp["line"])):
            continue  # beside the step's loop, not inside it (a loop before or after it)
        if typical and "per_step_us" in lp:
            # Both from the same typical steps (the loops' means hold the slow first ones).
            per_step = lp["per_step"]
            share = lp["per_step_us"] / step_us
        else:
            per_step = lp["iterations"] / steps
            share = per_step * lp["mean_us"] / step_us
        if per_step >= MIN_PER_STEP and share <= MAX_SHARE:
            found.append((lp, share, per_step))
    if not found:
        return
    best = max(found, key=lambda x: x[1])
    # Loops one after the other in the same function, none inside another, that hold the
    # step together (min-char-rnn's forward and backward loops over its 25 characters,
    # 37% and 47% of its step: neither was named, "no finding fired"; where the backward
    # loop read 50%, the forward one was left out, and named beside a busy process).
    group = _outermost(x for x in found if x[0]["function"] == best[0]["function"])
    # ... and of other functions the step calls one after the other (cs231n's naive
    # convolution: its forward and backward loops, 45% and 53% of a step, in two functions;
    # the backward one alone was named), where no sampled stack holds two of the functions
    # (a loop calling the other's function nests them) and their shares fit in the step.
    beside = _outermost(x for x in found if x[0]["function"] != best[0]["function"])
    stacks = _stacks(trace)
    for x in sorted(beside, key=lambda x: -x[1]):
        if (
            group
            and stacks is not None
            and not any(_nests(stacks, g[0], x[0]) or _nests(stacks, x[0], g[0]) for g in group)
            and sum(g[1] for g in group) + x[1] <= 1.0
        ):
            group.append(x)
    group = sorted(group, key=lambda x: x[0]["line"]) or [best]
    lp, _, per_step = group[0]
    share = min(sum(x[1] for x in group), 1.0)
    f["inner_line"] = lp["line"]
    f["inner_function"] = lp["function"]
    f["inner_per_step"] = per_step
    f["inner_share_pct"] = 100 * share
    f["inner_step_us"] = f["step_us"] * share
    # An iteration at the timed step's speed: the loops were timed while the watcher chose
    # the steps, beside the start-up capture (a numpy loop read 683 µs an iteration quiet and
    # 107 µs busy, 10 a 1,020 µs step; ~74 µs measured without the profiler). Their share
    # holds, both timed at that moment; their absolute time does not.
    f["inner_us"] = f["step_us"] * min(group[0][1], 1.0) / per_step
    f["step_line"] = f"{line} of {step['file']}" if step.get("file") else line
    if len(group) == 1:
        f["inner_where"] = (
            f"the loop at line {_line(lp)} ({lp['function']}) {per_step:.0f} times, "
            f"{f['inner_us']:,.1f} µs an iteration"
        )
    elif len({x[0]["function"] for x in group}) == 1:
        lines = ", ".join(str(x[0]["line"]) for x in group[:-1]) + f" and {_line(group[-1][0])}"
        times = ", ".join(f"{x[2]:.0f}" for x in group)
        f["inner_where"] = f"the loops at lines {lines} ({lp['function']}) {times} times each"
    else:
        each = [f"{_line(x[0])} ({x[0]['function']})" for x in group]
        lines = ", ".join(each[:-1]) + f" and {each[-1]}"
        times = ", ".join(f"{x[2]:.0f}" for x in group)
        f["inner_where"] = f"the loops at lines {lines} {times} times each"
    # No kernel and no per-call cost sampled in the steps: the loop is the interpreter's own
    # arithmetic on Python numbers (lists, no numpy).
    pure = f.get("compute_us") == 0 and f.get("dispatch_us") == 0
    f["inner_fix"] = _fix([x[0] for x in group], per_step, pure)
    overhead = (f.get("python_dispatch_pct") or 0.0) - (f.get("gc_pct") or 0.0)
    if not pure and overhead > 0 and per_step > 1 and not any(x[0].get("carried") for x in group):
        # The per-call overhead vectorising removes, all but one call's worth per operation:
        # a lower bound (Nielsen's network.py: 64% overhead read, its mini-batch as one
        # matrix 79% faster without the profiler, the arithmetic itself faster on 10x the data).
        least = overhead / 100 * f["step_us"] * min(share, 1.0) * (1 - 1 / per_step)
        f["inner_fix"] = f["inner_fix"].rstrip(".") + (
            f": at least {least:,.0f} µs less per step, predicted from this run's figures (the "
            "per-call overhead it removes; the arithmetic on more data a call is often faster "
            "too); not measured on this loop."
        )


Found = tuple[dict[str, Any], float, float]


def _outermost(found: Any) -> list[Found]:
    """The loops holding a tenth of the step or more, less those inside another of them in the
    same function (by their lines)."""
    group = [x for x in found if x[1] >= MIN_GROUPED_SHARE]
    return [
        x
        for x in group
        if not any(
            o is not x
            and o[0]["function"] == x[0]["function"]
            and o[0]["line"] < x[0]["line"] <= (o[0].get("end_line") or 0)
            for o in group
        )
    ]


def _stacks(trace: Any) -> list[list[tuple[str, int]]] | None:
    """The sampled stacks as (function, line) frames, root first; None where no phase sampled
    stacks (nothing says which loops nest)."""
    out = [
        [(fr.function, fr.line) for fr in sample.frames if not fr.native]
        for p in getattr(trace, "phases", ()) or ()
        for sample in getattr(p, "samples", ()) or ()
    ]
    return out or None


def _nests(
    stacks: list[list[tuple[str, int]]], outer: dict[str, Any], inner: dict[str, Any]
) -> bool:
    """Whether a sampled stack has ``inner``'s function called from inside ``outer``'s lines
    (a loop calling the other loop's function: one loop inside the other)."""
    lo, hi = outer["line"], outer.get("end_line") or outer["line"]
    for frames in stacks:
        for k, (fn, line) in enumerate(frames):
            inside = fn == outer["function"] and lo <= line <= hi
            if inside and any(g == inner["function"] for g, _ in frames[k + 1 :]):
                return True
    return False


def _fix(group: list[dict[str, Any]], per_step: float, pure: bool = False) -> str:
    """Vectorising the loops, or, where their iterations carry state (a recurrence: min-char-
    rnn's backward loop hands ``dhnext`` on, its forward loop reads ``hs[t - 1]``), what of
    them can be. A ``pure`` Python loop carrying state (Brownlee's logistic regression on
    lists: per-row SGD) was told of "dW += a @ b.T ... as one product of the stacked arrays",
    in a script without numpy; without the profiler, its update's common factor computed once
    per row ran it 1.34x faster, numpy per row 1.44x slower (8 coefficients)."""
    where = " and ".join(
        [", ".join(str(lp["line"]) for lp in group[:-1]), str(group[-1]["line"])]
        if len(group) > 1
        else [str(group[0]["line"])]
    )
    loops = f"the loop at line {where}" if len(group) == 1 else f"the loops at lines {where}"
    carried = [
        f"line {lp['line']} hands " + ", ".join(f"`{c}`" for c in lp["carried"]) + " on"
        for lp in group
        if lp.get("carried")
    ]
    if not carried:
        return (
            f"Vectorise {loops} over its items: stack them into one array (a column or row per "
            "sample) and do each operation once per step, so each call works on "
            f"{per_step:.0f}× the data for one call's overhead."
        )
    if pure:
        one = len(group) == 1
        return (
            f"{loops[0].upper()}{loops[1:]} {'runs' if one else 'run'} on Python numbers, and "
            f"{'its' if one else 'their'} iterations depend on the one before "
            f"({'; '.join(carried)}): compute once what {'its' if one else 'their'} inner lines "
            "repeat (a factor of the update that does not change with the inner index, once "
            "per item rather than once per coefficient); numpy pays off only on many items a "
            "call, so per-item updates of shared parameters (stochastic gradient descent over "
            "the rows) become one update per minibatch of rows as array operations, a change "
            "of the algorithm to check on its loss."
        )
    return (
        f"Keep only the recurrence inside {loops}, whose iterations depend on the one before "
        f"({'; '.join(carried)}), so it cannot become one call: take out what does not depend "
        "on it (the sums over the iterations, such as dW += a @ b.T, as one product of the "
        "stacked arrays after the loop; the per-item work before the recurrence as one call on "
        "all items). Or run several independent sequences at once (a batch dimension), so "
        "each call works on all of them; per-sample updates of shared parameters (stochastic "
        "gradient descent over the samples) become one update per minibatch, a change of the "
        "algorithm to check on its loss."
    )


def _per_sample(f: Any) -> bool:
    # The collector's pauses fall inside the loop's iterations but are not its per-call cost
    # (a scalar autograd loop: GC 84% of the step, its bytecode ~15%): garbage_collection
    # names them.
    overhead = (f.get("python_dispatch_pct") or 0) - (f.get("gc_pct") or 0)
    return (
        f["inner_per_step"] >= MIN_PER_STEP
        and f["inner_share_pct"] >= 100 * MIN_SHARE
        and overhead >= MIN_OVERHEAD_PCT
    )


#: A script line holding this share of the step (%) explains the step's per-call figures.
HOT_LINE_PCT = 50.0


def where_facts(f: dict[str, Any], trace: Any) -> None:
    """The user's own function most of the sampled steps ran in, where it is not the step's
    own loop (a numpy CNN from scratch: 67% of its steps in Conv3x3.backprop's loop over the
    image's regions, in conv.py, which the per-call finding did not name)."""
    f["numpy_where"] = ""
    rec = trace.phase("sampled")
    # A script's only: a built-in workload's step function is its step, and whether its frames
    # read as the user's depends on where the toolkit was installed when they were recorded.
    if rec is None or not rec.samples or not (trace.script or {}).get("path"):
        return
    auto = (trace.script or {}).get("auto_step") or {}
    chosen = auto_step.chosen_loop(auto)
    step_fn = chosen["function"] if chosen is not None else None
    for name, share in sampling.own_functions(rec.samples)[:3]:
        if step_fn is not None and name.startswith(f"{step_fn} ("):
            continue
        if share >= WHERE_SHARE:
            f["numpy_where"] = (
                f"; most of them run in {name}, {100 * share:.0f}% of the sampled steps' time"
            )
            f["numpy_where_fn"] = name
        return


#: The share of the sampled steps an own function holds to be named as where the calls run.
WHERE_SHARE = 0.3


def _numpy_per_call(f: Any) -> bool:
    return (
        f["framework"] == "numpy"
        # Lists made arrays at each call: their cost grows with the lists, the conversion's
        # finding says it (a skip-gram's one-hot lists of 2,000: "the arrays are too small").
        and (f.get("convert_pct") or 0.0) < CONVERT_PCT
        and f.get("inner_line") is None
        and f.get("a_us") is None  # the size sweep's finding says it with measured figures
        # A line of the script's holding half the step or more (step_line's): its per-call
        # figure is that line's native work (a 20,000-sample list made into an array each
        # batch: 9.8 ms of "dispatch" in ~20 numpy calls a step, "the arrays are too small").
        and (f.get("hot_line_share_pct") or 0.0) < HOT_LINE_PCT
        and 100 * f["dispatch_us"] / f["step_us"] >= NUMPY_DISPATCH_PCT
        and f["dispatch_us"] >= f["compute_us"]
        and f["dispatch_us"] + f["python_us"] >= NUMPY_DISPATCH_X * f["compute_us"]
    )


RULES: tuple[Rule, ...] = (
    Rule(
        id="per_sample_loop",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "step_line",
            "inner_line",
            "inner_function",
            "inner_per_step",
            "inner_us",
            "inner_share_pct",
            "inner_step_us",
            "python_dispatch_pct",
            "inner_fix",
            "inner_where",
        ),
        when=_per_sample,
        message="{label}: each step (an iteration of the loop at line {step_line}) runs "
        "{inner_where}: {inner_share_pct:.0f}% of the {step_us:,.0f} µs step, and "
        "{python_dispatch_pct:.0f}% of the step is Python and per-call overhead, not arithmetic.",
        fix="{inner_fix}",
        cost="inner_step_us",
    ),
    Rule(
        id="numpy_per_call",
        subject="workload",
        needs=("label", "step_us", "dispatch_us", "compute_us", "python_us", "numpy_where"),
        when=_numpy_per_call,
        message="{label}: numpy's per-call cost (argument checks, dispatch, temporaries) is "
        "{dispatch_us:,.1f} µs of each {step_us:,.1f} µs step, around {compute_us:,.1f} µs of "
        "arithmetic and {python_us:,.1f} µs of Python: the arrays are too small for numpy to "
        "pay off{numpy_where}.",
        fix="Give each numpy call more data: process several samples, batches or steps per "
        "call (stack them into one array), and where a loop makes one call per part of a "
        "sample (a convolution's regions, a sequence's items), one whole-array call over all "
        "its parts (np.lib.stride_tricks.sliding_window_view with np.einsum or tensordot); or "
        "keep scalars as Python floats; the per-call cost is paid once per call, whatever its "
        "size.",
        cost="dispatch_us",
    ),
)
