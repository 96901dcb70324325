"""A numpy step that makes arrays out of Python lists at its calls: numpy reads a list element
by element into a new array every time it is given one, a cost that grows with the list's
length, not a fixed per-call cost.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance`` calls ``conversion_facts`` and includes ``RULES``). It reads
the sampled phase's native frames (py-spy's ``--native``, taken for a numpy script): the
samples of the script's thread inside its steps whose stack is in numpy's conversion of a
Python sequence, and the script's own line above them.

Measured on this machine (a numpy skip-gram from scratch, its one-hot vectors kept as Python
lists of 2,000 numbers, ``np.dot(x, w1)`` on them per word pair): 497 µs a pair as written,
126 µs with the lists made arrays once, 49 µs indexing the weights' row instead, the same
results, without the profiler; the profiler read "dispatch 74% ... the arrays are too small
for numpy to pay off: give each numpy call more data".
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from profiler.analysis import stacks
from profiler.capture.collectors.pyspy import MAIN_THREAD
from profiler.diagnoses.engine import Rule
from profiler.model.trace import is_own_frame

#: numpy's C functions that read a Python sequence into a new array.
CONVERT = re.compile(
    r"^(PyArray_DiscoverDTypeAndShape\w*|PyArray_AssignFromCache\w*|PyArray_Pack|"
    r"discover_descriptor_from_py\w*|PyArray_FromAny\w*|PyArray_FromSequence\w*|"
    r"setArrayFromSequence|[A-Z]+_setitem)$"
)
#: The share of the step (%) in them from which it is the finding.
CONVERT_PCT = 20.0
#: Samples of the script's thread in the steps needed to say it.
MIN_SAMPLES = 30


def conversion_facts(f: dict[str, Any], trace: Any) -> None:
    """``convert_pct``, ``convert_us`` and ``convert_where`` where the sampled phase read
    native frames and enough samples of the script's thread in its steps."""
    rec = trace.phase("sampled")
    if rec is None or not rec.samples or not f.get("step_us"):
        return
    main = [s for s in rec.samples if s.thread in (MAIN_THREAD, "")]
    if not any(fr.native for s in main for fr in s.frames):
        return  # no native frames read: nothing to tell a conversion by
    if any(stacks.in_steps(s.frames) for s in main):
        main = [s for s in main if stacks.in_steps(s.frames)]
    total = sum(s.count for s in main)
    if total < MIN_SAMPLES:
        return
    lines: Counter[tuple[str, int, str]] = Counter()
    hit = 0
    for s in main:
        at = next(
            (i for i, fr in enumerate(s.frames) if fr.native and CONVERT.match(fr.function)), None
        )
        if at is None:
            continue
        hit += s.count
        own = [fr for fr in s.frames[:at] if is_own_frame(fr)]
        if own:
            lines[(own[-1].file, own[-1].line, own[-1].function)] += s.count
    share = hit / total
    f["convert_pct"] = 100 * share
    f["convert_us"] = share * float(f["step_us"])
    top = [f"line {ln} ({fn}) {100 * n / hit:.0f}%" for (_, ln, fn), n in lines.most_common(3)]
    f["convert_where"] = (
        f"{hit:,} of {total:,} samples in the steps; at " + ", ".join(top)
        if top
        else f"{hit:,} of {total:,} samples in the steps"
    )


RULES: tuple[Rule, ...] = (
    Rule(
        id="numpy_list_conversion",
        subject="workload",
        needs=("label", "step_us", "convert_pct", "convert_us", "convert_where"),
        when=lambda f: f["convert_pct"] >= CONVERT_PCT,
        message="{label}: {convert_pct:.0f}% of each {step_us:,.0f} µs step is numpy making "
        "arrays out of Python lists (or tuples) given to its calls, {convert_us:,.0f} µs "
        "({convert_where}).",
        fix="Make them arrays once, before the loop (np.asarray on the data, or one array whose "
        "rows the loop indexes): numpy reads a list element by element into a new array at every "
        "call, a cost that grows with its length; a one-hot vector kept as a list is better kept "
        "as its index, taking the weights' row (w[i], not np.dot(one_hot, w)).",
        cost="convert_us",
    ),
)
