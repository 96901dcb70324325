"""What-ifs, analysed: each fix applied to the user's loop, its measured saving against the one
the attribution predicted before anything ran.

Place in the pipeline: analysis (pure), called by ``profiler.analysis.run`` for a workload whose
trace holds a what-if phase (``WhatIfData``, ``profiler.capture.phases.whatif``). Baseline and
variant blocks alternate (A B, B A ...), so each pair's difference (baseline block median -
variant block median) is measured beside its neighbour, not against a window taken a minute
earlier. The measured saving is the mean of those differences, with its 95% interval (Student's
t over the pairs: ``saving_interval``); its resolution is half their range. The prediction is the
share of the step the attribution gives the variant's declared categories and parts
(``attribution.removal_ns``), applied to the blocks' baseline step.

The verdict follows the interval: ``slower`` when the whole interval is below zero (a fix
measured slower is not a fix), or when every pair's variant block is ``SLOWER_RATIO`` times its
baseline block or more (``SLOWER_PAIRS`` pairs at least), ``inconclusive`` when it spans zero
(or only one pair was measured: no interval), else ``holds`` when it reaches the prediction's
tolerance band ``max(TOLERANCE x |predicted|, TOLERANCE_FLOOR_US)`` and ``misses`` when it does
not; a miss is reported as it is, never tuned away.

Each block also records the resident bytes the process gained over it: a fix for a loop that
grows (a tf.function retraced on a Python number keeps every trace) shows its growth stop, per
step in each side's median block (``WhatIf.grew_per_step``), quoted by the memory finding.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from profiler.analysis import attribution as attr
from profiler.analysis.attribution import Attribution
from profiler.model import median_ns
from profiler.model.intervals import saving_interval
from profiler.model.records import WhatIfData, WhatIfResult

#: A prediction holds within this share of itself, or this many µs, whichever is larger.
TOLERANCE = 0.25
TOLERANCE_FLOOR_US = 3.0

HOLDS, MISSES, NOT_PREDICTED, FAILED = "holds", "misses", "not predicted", "failed"
INCONCLUSIVE, SLOWER = "inconclusive", "slower"
#: Verdicts of a what-if that measured a saving (its interval above zero): a fix.
SAVES = (HOLDS, MISSES, NOT_PREDICTED)


def verdict_for(
    interval: tuple[float, float] | None, predicted: float | None, tolerance: float | None
) -> str:
    """The verdict a measured saving's interval supports (the module docstring)."""
    if interval is None:
        return INCONCLUSIVE
    low, high = interval
    if high < 0:
        return SLOWER
    if low <= 0:
        return INCONCLUSIVE
    if predicted is None or tolerance is None:
        return NOT_PREDICTED
    reaches = low <= predicted + tolerance and high >= predicted - tolerance
    return HOLDS if reaches else MISSES


def verdict_words(
    verdict: str, measured: float | None, predicted: float | None, lower_bound: bool = False
) -> str:
    """A verdict as said: "misses" with the side it missed on (XLA on word2vec's fit saved
    4,949 µs a step where 308 were predicted from the executor's per-op cost: "misses" read
    as a failed fix). A what-if that measures a lower bound of its fix (``lower_bound``:
    fit's steps_per_execution emulated with the callbacks still called every batch) is not
    said to miss by falling short (a CSV tutorial's 16 batches a call read "misses: less than
    predicted", where the fix itself saved more than predicted without the profiler)."""
    if verdict != MISSES or measured is None or predicted is None:
        return verdict
    if lower_bound and measured < predicted:
        return "below the prediction, as this measurement is a lower bound of the fix"
    return f"{verdict}: {'more' if measured > predicted else 'less'} than predicted"


#: The what-ifs whose measurement is a lower bound of their fix.
LOWER_BOUND = frozenset({"keras_steps_4", "keras_steps_16"})


@dataclass(frozen=True)
class WhatIf:
    """One what-if's outcome (µs per step; see the module docstring)."""

    id: str
    title: str
    removes: tuple[str, ...]
    removes_share: float
    group: int
    keeps_results: bool
    results_note: str
    results_check: str
    status: str
    error: str
    block_steps: int
    pairs: int
    baseline_us: float | None
    variant_us: float | None
    measured_us: float | None
    resolution_us: float | None
    predicted_us: float | None
    predicted_share: float | None
    tolerance_us: float | None
    verdict: str
    interval_us: tuple[float, float] | None = None
    #: Resident bytes the process gained per training step in the baseline blocks and in the
    #: variant blocks (the median block's), and each side's range over its blocks; None where
    #: memory was not read. A fix for a growing loop shows its growth stop here.
    grew_per_step: tuple[float, float] | None = None
    grew_range: tuple[tuple[float, float], tuple[float, float]] | None = None
    grew_blocks: int = 0
    #: Its blocks' figures are their mean steps (``WhatIfResult.block_mean``).
    block_mean: bool = False

    @property
    def saves(self) -> bool:
        """Whether the fix measured a saving (its interval above zero): a fix on this loop."""
        return self.verdict in SAVES

    @property
    def speedup(self) -> float | None:
        if self.baseline_us and self.variant_us:
            return self.baseline_us / self.variant_us
        return None


def analyse(data: WhatIfData | None, att: Attribution | None, units: int = 1) -> list[WhatIf]:
    """The what-ifs of one workload (``units``: training steps per timed unit)."""
    if data is None:
        return []
    out = []
    for r in data.results:
        pairs = min(len(r.baseline_ns), len(r.variant_ns))
        diffs = [(r.baseline_ns[i] - r.variant_ns[i]) / units / 1e3 for i in range(pairs)]
        measured = float(median_ns([round(d * 1e3) for d in diffs])) / 1e3 if diffs else None
        stats = saving_interval(diffs)
        interval = (stats[1], stats[2]) if stats is not None else None
        if stats is not None:
            measured = stats[0]
        if r.status == "failed":
            # The fix could not be applied: its blocks ran the step as written.
            measured = interval = None
        resolution = (max(diffs) - min(diffs)) / 2 if len(diffs) > 1 else None
        predicted = share = None
        baseline = _median_us(r.baseline_ns, units)
        # A fix that removes no category of the attribution's (predict's per-call set-up
        # spans Python, tracing and feeds) is measured, not predicted.
        if att is not None and r.removes and all(att.measured(k.split(".")[0]) for k in r.removes):
            # The attribution's share of the step, at the blocks' own speed: the machine's
            # speed drifts between the timed window and the what-if's blocks.
            share = attr.removal_ns(att, r.removes) / att.reference_ns if att.reference_ns else 0
            share *= r.removes_share
            predicted = share * baseline if baseline is not None else None
        tolerance = (
            max(TOLERANCE * abs(predicted), TOLERANCE_FLOOR_US) if predicted is not None else None
        )
        if r.status == "failed" or measured is None:
            verdict = FAILED
        else:
            verdict = verdict_for(interval, predicted, tolerance)
            if verdict == INCONCLUSIVE and _every_pair_slower(r):
                verdict = SLOWER
        out.append(
            WhatIf(
                id=r.id,
                title=r.title,
                removes=r.removes,
                removes_share=r.removes_share,
                group=r.group,
                block_mean=r.block_mean,
                keeps_results=r.keeps_results,
                results_note=r.results_note,
                results_check=r.results_check,
                status=r.status,
                error=r.error,
                block_steps=r.block_steps,
                pairs=pairs,
                baseline_us=baseline,
                variant_us=_median_us(r.variant_ns, units),
                measured_us=measured,
                resolution_us=resolution,
                predicted_us=predicted,
                predicted_share=share,
                tolerance_us=tolerance,
                verdict=verdict,
                interval_us=interval,
                **_growth(r, units),
            )
        )
    return out


#: A variant whose block is at least this many times its neighbour baseline's in every pair,
#: over at least ``SLOWER_PAIRS`` pairs, is slower whatever the interval of the differences:
#: one pair's block of seconds (a compile) stretches Student's interval over zero. The Keras
#: anomaly-detection autoencoder compiled with XLA: its blocks 53 against 412 ms a step (45
#: against 540 ms beside a busy process) read "inconclusive: -7.96 s to +4.16 s"; 15x slower
#: in every block without the profiler.
SLOWER_RATIO = 1.5
SLOWER_PAIRS = 3


def _every_pair_slower(r: WhatIfResult) -> bool:
    pairs = list(zip(r.baseline_ns, r.variant_ns, strict=False))
    return len(pairs) >= SLOWER_PAIRS and all(b > 0 and v >= SLOWER_RATIO * b for b, v in pairs)


def _growth(r: WhatIfResult, units: int) -> dict[str, Any]:
    """The resident bytes gained per training step in each side's blocks (``WhatIf``)."""
    if not r.baseline_grew or not r.variant_grew or r.block_steps <= 0 or r.status == "failed":
        return {}
    per = r.block_steps * units

    def side(grew: tuple[int, ...]) -> tuple[float, tuple[float, float]]:
        values = [g / per for g in grew]
        return statistics.median(values), (min(values), max(values))

    base, base_range = side(r.baseline_grew)
    var, var_range = side(r.variant_grew)
    return {
        "grew_per_step": (base, var),
        "grew_range": (base_range, var_range),
        "grew_blocks": min(len(r.baseline_grew), len(r.variant_grew)),
    }


def _median_us(values: tuple[int, ...], units: int) -> float | None:
    return median_ns(list(values)) / units / 1e3 if values else None
