"""Step statistics: pure functions from windows to figures.

Place in the pipeline: after capture, before the summary. No I/O, no printing.

Per-step figures divide a timed unit by ``WorkDecl.units_per_step`` (a call that runs k steps).
The steady state is the timed window; warm-up and the build are one-off costs, reported as their
own line (``one_off``) and excluded from every steady-state figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from profiler.model import (
    OUTLIER_FACTOR,
    Inflation,
    Window,
    WorkDecl,
    WorkloadTrace,
    median_ns,
    percentile_ns,
)
from profiler.model.records import ThreadCpu


@dataclass(frozen=True, slots=True)
class StepStats:
    """Figures for the steps of one window, per training step (ns)."""

    steps: int
    median_ns: int
    p10_ns: int
    p90_ns: int
    mean_ns: int
    total_ns: int


def per_step(durations: tuple[int, ...], work: WorkDecl) -> tuple[int, ...]:
    """Unit durations divided by the training steps per unit (integer ns)."""
    k = work.units_per_step
    return durations if k == 1 else tuple(d // k for d in durations)


def window_stats(window: Window, work: WorkDecl) -> StepStats | None:
    """Median, p10, p90, mean and total of a window's per-step times; None if it has no steps."""
    d = per_step(window.durations_ns(), work)
    if not d:
        return None
    return StepStats(
        steps=len(d) * work.units_per_step,
        median_ns=median_ns(d),
        p10_ns=percentile_ns(d, 10),
        p90_ns=percentile_ns(d, 90),
        mean_ns=sum(d) // len(d),
        total_ns=sum(window.durations_ns()),
    )


@dataclass(frozen=True, slots=True)
class OneOff:
    """One-off costs: building the model/graph, and the warm-up's excess over the steady state.

    ``warmup_excess_ns`` is the warm-up window's total minus its unit count times the timed
    median unit, floored at zero; first-step tracing, graph optimisation and cold caches land here.
    """

    build_ns: int
    warmup_total_ns: int
    warmup_excess_ns: int
    first_step_ns: int

    @property
    def total_ns(self) -> int:
        return self.build_ns + self.warmup_excess_ns


def one_off(trace: WorkloadTrace, steady_unit_ns: int) -> OneOff:
    d = trace.warmup.durations_ns()
    total = sum(d)
    return OneOff(
        build_ns=trace.build_ns,
        warmup_total_ns=total,
        warmup_excess_ns=max(0, total - len(d) * steady_unit_ns),
        first_step_ns=d[0] if d else 0,
    )


def inflation(trace: WorkloadTrace, run_drift: Drift | None = None) -> list[Inflation]:
    """Each instrumented phase's median unit time against the timed phase's, or against its
    own uninstrumented neighbours where the run has them (``drift``): the timed window ran at
    another moment of a drifting machine."""
    timed = trace.phase("timed")
    if timed is None or timed.window is None or timed.window.n_steps == 0:
        return []
    base = median_ns(timed.window.durations_ns())
    k = trace.work.units_per_step
    out = []
    for p in trace.phases:
        if p.name == "timed" or p.window is None or p.window.n_steps == 0:
            continue
        near = run_drift.neighbours.get(p.name) if run_drift is not None else None
        own = near.step_ns * k if near is not None and near.step_ns > 0 else base
        out.append(Inflation(p.name, own, median_ns(p.window.durations_ns())))
    return out


@dataclass(frozen=True, slots=True)
class Distribution:
    """How a window's step times spread: the tail and the outliers a median hides.

    ``outliers`` are steps longer than ``OUTLIER_FACTOR`` × the median (an epoch's first batch,
    a validation pass, a GC pause); ``outlier_share`` is their part of the window's time.
    """

    steps: int
    median_ns: int
    mean_ns: int
    p90_ns: int
    p99_ns: int
    max_ns: int
    outliers: int
    outlier_share: float
    trend_ns_per_step: float = 0.0
    #: The cores other processes kept busy during the window (the machine's busy time less
    #: this process's CPU, over the wall), and the machine's cores; None where not read. A
    #: step that waits for a core is a slow step too: beside one spinning process, a 20,000-step
    #: numpy loop's mean was 3.5x its median, its thread on a core 30% of the window.
    others_cores: float | None = None
    cores: int = 0
    #: The share of the window the script's thread spent runnable but waiting for a core
    #: (``ThreadCpu.main_wait_ns``); None where not read.
    wait_share: float | None = None


def trend(durations: tuple[int, ...] | list[int], points: int = 64) -> float:
    """How much a step grows per step across a window (ns per step): the Theil-Sen slope of
    the medians of ``points`` consecutive runs of steps (robust to outliers)."""
    xs, ys = trend_points(durations, points)
    return theil_sen(xs, ys)


def trend_points(
    durations: tuple[int, ...] | list[int], points: int = 64
) -> tuple[list[float], list[float]]:
    """(middle step, median ns) of ``points`` consecutive runs of steps (fewer for short
    windows: at least four steps a run)."""
    if len(durations) < 2 * points:
        points = max(len(durations) // 4, 1)
    if points < 2:
        return [], []
    per = len(durations) // points
    xs = [per * i + per / 2 for i in range(points)]
    ys = [float(median_ns(list(durations[per * i : per * (i + 1)]))) for i in range(points)]
    return xs, ys


#: A change of level: the later points at least this many times the earlier ones ...
SHIFT_RATIO = 1.5
#: ... and each side's own rise (its Theil-Sen slope across its span) under this share of the
#: jump between the two sides' medians.
SHIFT_FLAT = 0.25


@dataclass(frozen=True, slots=True)
class LevelShift:
    """Points that rise by one jump between two levels, not steadily: ``at`` is the index of
    the first point of the later level; ``before``/``after`` the two levels' medians."""

    at: int
    before: float
    after: float


def level_shift(xs: list[float], ys: list[float]) -> LevelShift | None:
    """The split of the points into an earlier and a later level, each at least two points and
    flat (its own rise under ``SHIFT_FLAT`` of the jump), the later ``SHIFT_RATIO`` times the
    earlier; None where no split is (a steady growth's halves rise as much as they jump).
    A DQN's steps before its replay memory fills and after: blocks of 69, 69, 70, 3,424,
    3,653, 3,541 µs, read as "+267 µs every 100 steps: something grows with every step"."""
    best: tuple[float, LevelShift] | None = None
    for k in range(2, len(ys) - 1):
        before, after = sorted(ys[:k]), sorted(ys[k:])
        lo, hi = before[len(before) // 2], after[len(after) // 2]
        if lo <= 0 or hi < SHIFT_RATIO * lo:
            continue
        jump = hi - lo
        rises = (
            theil_sen(xs[:k], ys[:k]) * (xs[k - 1] - xs[0]),
            theil_sen(xs[k:], ys[k:]) * (xs[-1] - xs[k]),
        )
        if max(abs(r) for r in rises) > SHIFT_FLAT * jump:
            continue
        spread = sum(abs(y - lo) for y in ys[:k]) + sum(abs(y - hi) for y in ys[k:])
        if best is None or spread < best[0]:
            best = (spread, LevelShift(k, lo, hi))
    return best[1] if best else None


def rising_share(xs: list[float], ys: list[float]) -> float:
    """The share of pairs of points whose later one is higher: ~1 for steady growth, ~0.5 for
    noise around a level."""
    pairs = [(i, j) for i in range(len(xs)) for j in range(i + 1, len(xs))]
    if not pairs:
        return 0.0
    return sum(ys[j] > ys[i] for i, j in pairs) / len(pairs)


def theil_sen(xs: list[float], ys: list[float]) -> float:
    """The median of the pairwise slopes of the points ``(xs, ys)`` (0 for fewer than two)."""
    slopes = sorted(
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if xs[j] != xs[i]
    )
    return slopes[len(slopes) // 2] if slopes else 0.0


def theil_sen_interval(xs: list[float], ys: list[float]) -> tuple[float, float] | None:
    """The 95% interval of ``theil_sen``'s slope (Sen 1968: the order statistics of the
    pairwise slopes at Kendall's S's normal interval), its variance widened for the points'
    lag-1 autocorrelation ((1 + r) / (1 - r): a loaded machine's drift makes neighbours alike,
    and fewer independent points); None for fewer than three points."""
    n = len(xs)
    if n < 3:
        return None
    slopes = sorted(
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(n)
        for j in range(i + 1, n)
        if xs[j] != xs[i]
    )
    big_n = len(slopes)
    if big_n < 2:
        return None
    b = slopes[big_n // 2]
    a = sorted(y - b * x for x, y in zip(xs, ys, strict=True))[n // 2]
    res = [y - (a + b * x) for x, y in zip(xs, ys, strict=True)]
    mean = sum(res) / n
    den = sum((r - mean) ** 2 for r in res)
    r1 = sum((res[i] - mean) * (res[i + 1] - mean) for i in range(n - 1)) / den if den else 0.0
    r1 = min(max(r1, 0.0), 0.9)
    var = n * (n - 1) * (2 * n + 5) / 18 * (1 + r1) / (1 - r1)
    c = 1.96 * var**0.5
    lo = max(int((big_n - c) / 2), 0)
    hi = min(int((big_n + c) / 2) + 1, big_n - 1)
    return slopes[lo], slopes[hi]


def drift_allowance(run_drift: Drift | None, step_ns: float, span: float) -> float:
    """How much of a slope (ns per step) across ``span`` steps the machine's measured drift
    explains: the run's speed ratio beyond its blocks' own noise, spread over the span (0
    without reference blocks). A trend's interval is widened by it on both sides: steps that
    got slower because the machine did are no growth."""
    if run_drift is None or span <= 0:
        return 0.0
    return (run_drift.interval[0] - 1.0) * step_ns / span


def distribution(
    window: Window, work: WorkDecl, cpu: ThreadCpu | None = None
) -> Distribution | None:
    """The spread of a window's per-step times, with the other processes' load on the
    machine from its CPU record (``cpu``) where read; None if it has no steps."""
    d = per_step(window.durations_ns(), work)
    if not d:
        return None
    med = median_ns(d)
    slow = [x for x in d if x > OUTLIER_FACTOR * med]
    total = sum(d)
    return Distribution(
        trend_ns_per_step=trend(d),
        steps=len(d),
        median_ns=med,
        mean_ns=total // len(d),
        p90_ns=percentile_ns(d, 90),
        p99_ns=percentile_ns(d, 99),
        max_ns=max(d),
        outliers=len(slow),
        outlier_share=sum(slow) / total if total else 0.0,
        others_cores=_others_cores(cpu),
        cores=cpu.cpu_count if cpu is not None else 0,
        wait_share=(
            min(cpu.main_wait_ns / cpu.wall_ns, 1.0)
            if cpu is not None and cpu.main_wait_ns is not None and cpu.wall_ns > 0
            else None
        ),
    )


def _others_cores(cpu: ThreadCpu | None) -> float | None:
    if cpu is None or cpu.machine_busy_ns is None or cpu.wall_ns <= 0:
        return None
    # The script's own child processes (a Pool's workers) are its work, not others' load.
    own = cpu.process_cpu_ns + cpu.children_cpu_ns
    return max(cpu.machine_busy_ns - own, 0) / cpu.wall_ns


@dataclass(frozen=True, slots=True)
class SlowSteps:
    """Steps much slower than the median, and whether they come at a period.

    Attributes:
        count: steps over ``OUTLIER_FACTOR`` times the median (with a period: those at it).
        period: every how many steps one is slow (None: not periodic).
        regular: the share of the steps at the period's offset that are slow (without a
            period: the best share any period reached).
        median_ns: the median step; ``slow_ns``: the slow steps' median.
        excess_share: the slow steps' time beyond the median, as a share of all the steps'.
        first: the first slow step's index in the window.
    """

    count: int
    period: int | None
    regular: float
    median_ns: int
    slow_ns: int
    excess_share: float
    first: int
    #: The mean step (the slow ones included) of the durations looked at.
    mean_ns: float = 0.0


#: The share of the steps at one offset modulo a period that must be slow for it to be periodic.
PERIODIC_SHARE = 0.8
#: Slow steps under ``OUTLIER_FACTOR`` count at a period from this multiple of the median,
#: with at least ``LOW_MIN_STEPS`` of them at it.
LOW_FACTOR = 1.6
LOW_MIN_STEPS = 5
#: The longest period looked for, in steps (longer ones are an epoch's: ``EpochCost``).
MAX_PERIOD = 1_000


#: Windows whose steps the instrument itself pauses at random moments: py-spy stops the
#: process for each stack it reads (100-300 a second), which made 1 step in 6 of a custom loop's
#: sampled window "slow" (105 against the timed window's 3).
PAUSED_WINDOWS = frozenset({"sampled"})


def slow_steps_across(trace: WorkloadTrace) -> SlowSteps | None:
    """``slow_steps`` over every window after the warm-up, in step order, each step taken as a
    multiple of its own window's median and put at the timed window's median (the windows ran
    at different speeds, instrumented or not). A slow step every epoch of 200 steps (a custom
    loop's validation) falls once or twice in one window; across the run's windows it repeats
    at its period. Indices are training steps; the steps no window measured are left out of
    the period's count. None without a timed window or 3 slow steps."""
    timed = trace.phase("timed")
    if timed is None or timed.window is None or not timed.window.n_steps:
        return None
    base = median_ns(list(per_step(timed.window.durations_ns(), trace.work)))
    steps: dict[int, int] = {}
    for p in trace.phases:
        if p.window is None or not p.window.n_steps or p.name in PAUSED_WINDOWS:
            continue
        med = median_ns(list(per_step(p.window.durations_ns(), trace.work)))
        if med <= 0:
            continue
        for seg in p.window.segments:
            for j, dur in enumerate(per_step(seg.durations_ns(), trace.work)):
                steps.setdefault(seg.first_step + j, round(dur * base / med))
    if not steps:
        return None
    order = sorted(steps)
    return slow_steps([steps[i] for i in order], order)


def slow_steps(durations: Sequence[int], indices: Sequence[int] | None = None) -> SlowSteps | None:
    """The slow steps of a window (``SlowSteps``); None with fewer than 3 of them.

    A period is the smallest ``p`` such that at least ``PERIODIC_SHARE`` of the steps at one
    offset modulo ``p`` are slow, at least 3 of them: beside a busy process, preempted steps
    fall anywhere (369 slow steps where an evaluation every 10th step made 285), so the gaps
    between slow steps are not regular, but almost every 10th step still is slow. With a
    period, ``slow_ns``, ``excess_share`` and ``first`` are the periodic steps' alone."""
    d = list(durations)
    if len(d) < 6:
        return None
    idx = list(indices) if indices is not None else list(range(len(d)))
    med = median_ns(d)
    slow = [j for j, x in enumerate(d) if x > OUTLIER_FACTOR * med]
    found, regular, picked = (
        period([idx[j] for j in slow], idx) if len(slow) >= 3 else (None, 0.0, [])
    )
    if found is None:
        # Work about a step long once every few steps (an eager loop's checkpoint every 10
        # steps, 12 ms against 12 ms steps: 2x, under the outlier factor) is periodic at a
        # lower factor, with more of its steps at the period to rule chance out.
        low = [j for j, x in enumerate(d) if x > LOW_FACTOR * med]
        lp, lr, lpicked = period([idx[j] for j in low], idx) if len(low) >= 3 else (None, 0.0, [])
        if lp is not None and len(lpicked) >= LOW_MIN_STEPS:
            slow, found, regular, picked = low, lp, lr, lpicked
    if len(slow) < 3:
        return None
    total = sum(d)
    chosen = set(picked)
    use = [j for j in slow if idx[j] in chosen] if found else slow
    excess = sum(d[j] - med for j in use)
    return SlowSteps(
        count=len(use),
        period=found,
        regular=regular,
        median_ns=med,
        slow_ns=median_ns([d[j] for j in use]),
        excess_share=excess / total if total else 0.0,
        first=idx[use[0]],
        mean_ns=total / len(d),
    )


def period(at: list[int], observed: list[int]) -> tuple[int | None, float, list[int]]:
    """(the smallest period at which one offset's steps are nearly all slow, the share of
    them that are, those slow steps); (None, the best share, []) without one. ``at`` are the
    slow steps' indices, ``observed`` every measured step's (sorted; gaps where no window
    measured).

    Chance is ruled out: the slow steps at the offset must be beyond what slow steps falling
    anywhere would give at one of the offsets tried (binomial tail at the share of slow
    steps, times the offsets tried, under 1%)."""
    n = len(observed)
    span = observed[-1] - observed[0] + 1
    # The observed steps as runs of consecutive ones (a what-if's steps left out): each
    # period's positions counted per run, not per step (300,000 steps x 1,000 periods).
    runs: list[tuple[int, int]] = []
    for i in observed:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    top = min(span // 3, MAX_PERIOD)
    tried = max(top * (top + 1) // 2 - 1, 1)
    q = len(at) / n
    best = 0.0
    for p in range(2, top + 1):
        offsets: dict[int, int] = {}
        for i in at:
            offsets[i % p] = offsets.get(i % p, 0) + 1
        r, hits = max(offsets.items(), key=lambda kv: kv[1])
        if hits < 3:
            continue
        positions = sum(len(range(a + (r - a) % p, b, p)) for a, b in runs)
        share = hits / positions
        best = max(best, share)
        if hits >= 3 and share >= PERIODIC_SHARE and _tail(positions, hits, q) * tried < 0.01:
            return p, share, [i for i in at if i % p == r]
    return None, best, []


def _tail(m: int, h: int, q: float) -> float:
    """P(X >= h) for X ~ Binomial(m, q)."""
    if h > m:
        return 0.0
    if q >= 1.0:
        return 1.0
    if q <= 0.0:
        return 0.0
    lq, lr = math.log(q), math.log1p(-q)
    terms = [
        math.lgamma(m + 1) - math.lgamma(k + 1) - math.lgamma(m - k + 1) + k * lq + (m - k) * lr
        for k in range(h, m + 1)
    ]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


@dataclass(frozen=True, slots=True)
class Series:
    """Step times across a run's windows, in step order, at most ``MAX_SERIES`` points: each
    point is the longest step of a run of consecutive steps (outliers stay visible)."""

    step: tuple[int, ...]
    dur_ns: tuple[int, ...]
    window: tuple[str, ...]


MAX_SERIES = 1_000


def series(trace: WorkloadTrace, max_points: int = MAX_SERIES) -> Series:
    """Every window's steps (warm-up first) as one series, thinned to ``max_points``."""
    k = trace.work.units_per_step
    rows: list[tuple[int, int, str]] = []
    for window in [trace.warmup, *(p.window for p in trace.phases if p.window is not None)]:
        for seg in window.segments:
            for j, dur in enumerate(seg.durations_ns()):
                rows.append(((seg.first_step + j) * k, dur // k, window.phase))
    rows.sort(key=lambda r: r[0])
    per = max(1, -(-len(rows) // max_points))
    picked = [max(rows[i : i + per], key=lambda r: r[1]) for i in range(0, len(rows), per)]
    return Series(
        step=tuple(r[0] for r in picked),
        dur_ns=tuple(r[1] for r in picked),
        window=tuple(r[2] for r in picked),
    )


@dataclass(frozen=True, slots=True)
class EpochCost:
    """What an epoch boundary costs beyond a batch, in a loop of ``steps_per_epoch`` batches.

    The first batch of every epoch carries the epoch's set-up (the data iterator) and, steps
    being back to back, the end of the epoch before (validation, epoch-end callbacks).

    Attributes:
        steps_per_epoch: batches in an epoch.
        boundaries: epoch boundaries inside the measured windows.
        excess_ns: the median boundary step's time beyond its window's median step, as a
            multiple of that median applied to the timed window's (the windows ran at
            different speeds); the first boundary is left out (it also pays one-offs: the
            first validation's trace).
        batch_ns: the timed window's median step.
        share: of an epoch's time, what the boundary's excess takes.
        low_share: the same with the smallest boundary's excess: a lower bound for the share
            (below the median boundary's with probability 1 - 2^-n for n boundaries, 87.5%
            for 3), which a finding's threshold is held to.
        clean: of the boundaries, those in the timed window (no phase instrumented them).
    """

    steps_per_epoch: int
    boundaries: int
    excess_ns: int
    batch_ns: int
    share: float
    low_share: float = 0.0
    clean: int = 0


#: The phase whose instrument pauses the process to read every thread's stack (py-spy): an
#: epoch boundary in its window is no measure of one (a transfer-learning fit's validation,
#: 0.16 s elsewhere, took 2.8 s there, its tf.data threads paused with the rest, and the
#: epochs read "77% of the training time" where ~20% was measured without the profiler).
PAUSING_PHASE = "sampled"


def epoch_cost(trace: WorkloadTrace, steps_per_epoch: int, first_step: int) -> EpochCost | None:
    """The cost of each epoch boundary, from every window after the warm-up; None if no
    boundary fell into one (or an epoch is one batch)."""
    if steps_per_epoch < 2:
        return None
    timed = trace.phase("timed")
    if timed is None or timed.window is None or not timed.window.n_steps:
        return None
    k = trace.work.units_per_step
    timed_med = median_ns(list(timed.window.durations_ns()))
    found: list[tuple[int, int]] = []
    clean = 0
    for p in trace.phases:
        if p.window is None or not p.window.n_steps or p.name == PAUSING_PHASE:
            continue
        med = median_ns(list(p.window.durations_ns()))
        if med <= 0:
            continue
        for seg in p.window.segments:
            for j, dur in enumerate(seg.durations_ns()):
                step = (seg.first_step + j) * k - first_step
                if step > 0 and step % steps_per_epoch == 0:
                    # In its window's own steps, then at the timed window's step: an
                    # instrumented window (hooks, lines) slows the validation at the boundary
                    # as it slows the batches, and its absolute excess was 2-4.5x the truth.
                    found.append((step, round(max(dur - med, 0) * timed_med / med)))
                    clean += p.name == "timed" and step != steps_per_epoch
    # The first boundary also pays one-offs (the first validation traces its function: 4.4 s
    # against 2.6 s later): only the later ones say what recurs. A run whose windows held only
    # first boundaries (each re-run of a 2-epoch script has one) has no recurring cost measured.
    excess = [e for s, e in found if s != steps_per_epoch]
    if not excess:
        return None
    batch = timed_med // k
    cost = median_ns(excess)
    epoch = steps_per_epoch * batch + cost
    low = min(excess)
    return EpochCost(
        steps_per_epoch,
        len(excess),
        cost,
        batch,
        cost / epoch if epoch else 0.0,
        low / (steps_per_epoch * batch + low) if batch or low else 0.0,
        clean,
    )


# --- drift: how much the machine's speed varied across a run ---------------------------------


def median_interval(values: Sequence[int]) -> tuple[int, int, int]:
    """(median, low, high) of ``values``: the median and its distribution-free 95% interval,
    the order statistics at ranks ⌊n/2 − 0.98·√n⌋ and ⌈n/2 + 0.98·√n⌉ (the binomial's
    normal interval; Conover 1999). Under 6 values no order statistics reach 95%: the
    interval is their whole range."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        raise ValueError("median of no values")
    med = median_ns(ordered)
    if n < 6:
        return med, ordered[0], ordered[-1]
    half = 0.98 * n**0.5
    low_rank = max(math.floor(n / 2 - half), 1)  # ranks count from 1
    high_rank = min(math.ceil(n / 2 + half), n)
    return med, ordered[low_rank - 1], ordered[high_rank - 1]


@dataclass(frozen=True, slots=True)
class Block:
    """One uninstrumented block of a run (a reference block, or the timed window), per
    training step: its median with the median's 95% interval."""

    label: str
    repeat: int
    first_step: int
    steps: int
    median_ns: int
    low_ns: int
    high_ns: int


@dataclass(frozen=True, slots=True)
class Neighbours:
    """An instrumented window's uninstrumented neighbours: the blocks just before and after
    it in the same run of the script (either may be missing).

    Attributes:
        step_ns: their step time (the mean of their medians), per training step.
        ratio: how far apart they are (the slower's median over the faster's; 1.0 for one).
        ratio_low: that ratio beyond the blocks' own noise (the lower end of its interval).
    """

    before: Block | None
    after: Block | None
    step_ns: int
    ratio: float
    ratio_low: float


@dataclass(frozen=True, slots=True)
class Drift:
    """How much the machine's speed varied across a script's run, from its uninstrumented
    blocks (``ReferenceBlock``s and the timed window) in step order.

    Blocks are compared within one run of the script only: a later run (``--repeat``, or a
    re-run for the phases the first missed) may mark its steps another way (a traced line
    instead of a detected call, ~7 µs a step more on a numpy loop here), which is no drift.

    Attributes:
        blocks: the blocks, by run of the script and step.
        ratio: the slowest block's median over the fastest's, in the run of the script
            (``repeat``) where that spread is surest (the largest lower end).
        interval: its 95% interval: the lower end is the spread the blocks' own step noise
            cannot explain (each median at its interval's edge), the upper the widest.
        neighbours: per instrumented phase with a window, its neighbours.
        repeat: the run of the script the ratio comes from.
    """

    blocks: tuple[Block, ...]
    ratio: float
    interval: tuple[float, float]
    neighbours: dict[str, Neighbours]
    repeat: int = 0

    def speed_ratio(self, phases: Sequence[str]) -> float:
        """The lower end of the speed ratio between the timed window and the neighbours of
        ``phases``' windows, within each run of the script (the largest): how far apart the
        moments their figures came from surely were (1.0 where nothing tells)."""
        chosen = [b for b in self.blocks if b.label == "timed"]
        for name in phases:
            n = self.neighbours.get(name)
            if n is not None:
                chosen += [b for b in (n.before, n.after) if b is not None]
        runs = {b.repeat for b in chosen}
        return max((_ratio([b for b in chosen if b.repeat == r])[1] for r in runs), default=1.0)


def _ratio(blocks: Sequence[Block]) -> tuple[float, float, float]:
    """(point, low, high) of the slowest median over the fastest among ``blocks``."""
    if len(blocks) < 2:
        return 1.0, 1.0, 1.0
    slow = max(blocks, key=lambda b: b.median_ns)
    fast = min(blocks, key=lambda b: b.median_ns)
    point = slow.median_ns / max(fast.median_ns, 1)
    low = max(b.low_ns for b in blocks) / max(min(b.high_ns for b in blocks), 1)
    high = max(b.high_ns for b in blocks) / max(min(b.low_ns for b in blocks), 1)
    return point, max(low, 1.0), max(high, point)


def _block(label: str, repeat: int, segments: Sequence[Any], k: int) -> Block | None:
    durations = [d // k for seg in segments for d in seg.durations_ns()]
    if not durations:
        return None
    med, lo, hi = median_interval(durations)
    first = segments[0].first_step
    return Block(label, repeat, first, len(durations) * k, med, lo, hi)


def drift(trace: WorkloadTrace) -> Drift | None:
    """The run's drift (``Drift``); None for a run without reference blocks."""
    if not trace.references:
        return None
    k = trace.work.units_per_step
    blocks: list[Block] = []
    timed = trace.phase("timed")
    if timed is not None and timed.window is not None and timed.window.n_steps:
        b = _block("timed", timed.repeat, timed.window.segments, k)
        if b is not None:
            blocks.append(b)
    for ref in trace.references:
        label = f"after {ref.after}" if ref.after else f"before {ref.before}"
        b = _block(label, ref.repeat, (ref.segment,), k)
        if b is not None:
            blocks.append(b)
    blocks.sort(key=lambda b: (b.repeat, b.first_step))
    neighbours: dict[str, Neighbours] = {}
    for p in trace.phases:
        if p.name in ("timed", "whatif") or p.window is None or not p.window.n_steps:
            continue
        start = p.window.segments[0].first_step
        end = p.window.segments[-1].first_step + p.window.segments[-1].n_steps
        same = [b for b in blocks if b.repeat == p.repeat]
        earlier = [b for b in same if b.first_step < start]
        later = [b for b in same if b.first_step >= end]
        before = max(earlier, key=lambda b: b.first_step) if earlier else None
        after = min(later, key=lambda b: b.first_step) if later else None
        # A block beyond another instrumented window is not this one's neighbour.
        windows = [
            q.window.segments[0].first_step
            for q in trace.phases
            if q.repeat == p.repeat
            and q.name not in (p.name, "timed")
            and q.window is not None
            and q.window.n_steps
        ]
        if before is not None and any(before.first_step < w < start for w in windows):
            before = None
        if after is not None and any(end <= w < after.first_step for w in windows):
            after = None
        near = [b for b in (before, after) if b is not None]
        if not near:
            continue
        point, low, _ = _ratio(near)
        step = sum(b.median_ns for b in near) // len(near)
        neighbours[p.name] = Neighbours(before, after, step, point, low)
    by_run = {r: _ratio([b for b in blocks if b.repeat == r]) for r in {b.repeat for b in blocks}}
    repeat = max(by_run, key=lambda r: (by_run[r][1], -r))
    point, low, high = by_run[repeat]
    return Drift(tuple(blocks), point, (low, high), neighbours, repeat)
