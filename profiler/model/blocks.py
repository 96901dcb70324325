"""Timing in alternating blocks, and the saving it measures: what the case study's experiments
process (``profiler.capture.experiments``) runs and the analysis (``profiler.analysis.experiments``)
reads.

Place in the pipeline: pure helpers below both, so the measured process imports no analysis.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from profiler.clock import Clock
from profiler.model.intervals import saving_interval
from profiler.model.trace import median_ns

Runner = Callable[[int, list[int], Clock], None]


def block_medians(
    runners: Sequence[Runner],
    units_per_step: Sequence[int],
    *,
    blocks: int,
    steps_per_block: Sequence[int],
    clock: Clock,
) -> list[list[int]]:
    """Time each runner in alternating blocks (A B A B ... ; A B C A B C ... for more).

    Returns, per runner, every step's duration in ns per *training* step (a unit's time divided
    by its units per step). The order alternates so slow drift of the machine lands on all sides.
    """
    out: list[list[int]] = [[] for _ in runners]
    for b in range(blocks):
        order = range(len(runners)) if b % 2 == 0 else reversed(range(len(runners)))
        for i in order:
            marks = [clock()]
            runners[i](steps_per_block[i], marks, clock)
            k = units_per_step[i]
            out[i].extend((marks[j + 1] - marks[j]) // k for j in range(len(marks) - 1))
    return out


#: Block pairs (A B, then B A) at least; more follow while the saving's 95% interval is wider
#: than ``NOISE_SHARE`` of the saving and ``NOISE_STEP`` of the baseline step, up to
#: ``MAX_PAIRS`` pairs and ``MAX_S`` seconds of blocks (issue "Trust under noise", item 4: a
#: what-if or a pair is sized to its noise, within a stated budget).
MIN_PAIRS = 3
MAX_PAIRS = 10
MAX_S = 3.0
NOISE_SHARE = 0.15
NOISE_STEP = 0.05


def settled(base: Sequence[int], var: Sequence[int], spent_ns: int, max_s: float = MAX_S) -> bool:
    """Whether alternating blocks have pairs enough: the saving's interval (over the pairs'
    block-median differences) is within ``NOISE_SHARE`` of the saving or ``NOISE_STEP`` of the
    step, or the blocks took ``max_s`` already."""
    if spent_ns >= max_s * 1e9:
        return True
    n = min(len(base), len(var))
    stats = saving_interval([float(base[i] - var[i]) for i in range(n)])
    if stats is None:
        return False
    mean, low, high = stats
    half = (high - low) / 2
    step = median_ns(list(base[:n])) if n else 0
    return half <= max(NOISE_SHARE * abs(mean), NOISE_STEP * step)


@dataclass(frozen=True)
class Sized:
    """Two runners timed in alternating block pairs until ``settled``: every step of each side
    (ns per training step) and each block's median, in order (pair i is ``(base[i], var[i])``)."""

    base_steps: list[int]
    var_steps: list[int]
    base_blocks: list[int]
    var_blocks: list[int]

    @property
    def pairs(self) -> int:
        return min(len(self.base_blocks), len(self.var_blocks))

    def interval_ns(self) -> tuple[float, float, float] | None:
        """(mean, low, high) of the pairs' block-median differences; None under two pairs."""
        n = self.pairs
        return saving_interval([float(self.base_blocks[i] - self.var_blocks[i]) for i in range(n)])


def sized_pairs(
    runners: tuple[Runner, Runner],
    units_per_step: tuple[int, int],
    steps_per_block: tuple[int, int],
    clock: Clock,
    max_s: float = MAX_S,
) -> Sized:
    """Time two runners in block pairs (A B, B A, ...): ``MIN_PAIRS`` pairs, then more until
    ``settled`` or ``MAX_PAIRS``."""
    steps: tuple[list[int], list[int]] = ([], [])
    blocks: tuple[list[int], list[int]] = ([], [])
    started = clock()
    for pair in range(MAX_PAIRS):
        if pair >= MIN_PAIRS and settled(blocks[0], blocks[1], clock() - started, max_s):
            break
        for i in (0, 1) if pair % 2 == 0 else (1, 0):
            marks = [clock()]
            runners[i](steps_per_block[i], marks, clock)
            k = units_per_step[i]
            durs = [(marks[j + 1] - marks[j]) // k for j in range(len(marks) - 1)]
            steps[i].extend(durs)
            if durs:
                blocks[i].append(median_ns(durs))
    return Sized(steps[0], steps[1], blocks[0], blocks[1])


@dataclass(frozen=True)
class Measured:
    """A measured saving: baseline and variant medians per training step, and the resolution."""

    baseline_ns: int
    variant_ns: int
    resolution_ns: int

    @property
    def saving_ns(self) -> int:
        return self.baseline_ns - self.variant_ns


def resolution_ns(a: Sequence[int], b: Sequence[int], blocks: int = 1) -> int:
    """The smallest saving this measurement can tell from noise.

    Twice the median absolute deviation of each side's steps, scaled by 1.4826 to a standard
    deviation and divided by the square root of the step count (the medians' standard error),
    combined in quadrature: a difference below it is not resolved.
    """

    def se(xs: Sequence[int]) -> float:
        m = statistics.median(xs)
        mad = statistics.median(abs(x - m) for x in xs) * 1.4826
        return 1.2533 * mad / max(len(xs), 1) ** 0.5  # SE of a median ~ 1.2533 sigma / sqrt(n)

    return int(2 * (se(a) ** 2 + se(b) ** 2) ** 0.5) + 1


def measured(a_steps: Sequence[int], b_steps: Sequence[int]) -> Measured:
    return Measured(
        median_ns(list(a_steps)), median_ns(list(b_steps)), resolution_ns(a_steps, b_steps)
    )
