"""Step statistics: pure functions from windows to figures.

Place in the pipeline: after capture, before the summary. No I/O, no printing.

Per-step figures divide a timed unit by ``WorkDecl.units_per_step`` (a call that runs k steps).
The steady state is the timed window; warm-up and the build are one-off costs, reported as their
own line (``one_off``) and excluded from every steady-state figure.
"""

from __future__ import annotations

from dataclasses import dataclass

from profiler.model import Inflation, Window, WorkDecl, WorkloadTrace, median_ns, percentile_ns


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


def inflation(trace: WorkloadTrace) -> list[Inflation]:
    """Each instrumented phase's median unit time against the timed phase's."""
    timed = trace.phase("timed")
    if timed is None or timed.window is None or timed.window.n_steps == 0:
        return []
    base = median_ns(timed.window.durations_ns())
    out = []
    for p in trace.phases:
        if p.name == "timed" or p.window is None or p.window.n_steps == 0:
            continue
        out.append(Inflation(p.name, base, median_ns(p.window.durations_ns())))
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


#: A step this many times the median is an outlier.
OUTLIER_FACTOR = 3.0


def distribution(window: Window, work: WorkDecl) -> Distribution | None:
    """The spread of a window's per-step times; None if it has no steps."""
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
    )


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
        excess_ns: the median boundary step's time beyond its window's median step.
        batch_ns: the timed window's median step.
        share: of an epoch's time, what the boundary's excess takes.
    """

    steps_per_epoch: int
    boundaries: int
    excess_ns: int
    batch_ns: int
    share: float


def epoch_cost(trace: WorkloadTrace, steps_per_epoch: int, first_step: int) -> EpochCost | None:
    """The cost of each epoch boundary, from every window after the warm-up; None if no
    boundary fell into one (or an epoch is one batch)."""
    if steps_per_epoch < 2:
        return None
    timed = trace.phase("timed")
    if timed is None or timed.window is None or not timed.window.n_steps:
        return None
    k = trace.work.units_per_step
    excess: list[int] = []
    for p in trace.phases:
        if p.window is None or not p.window.n_steps:
            continue
        med = median_ns(list(p.window.durations_ns()))
        for seg in p.window.segments:
            for j, dur in enumerate(seg.durations_ns()):
                step = (seg.first_step + j) * k - first_step
                if step > 0 and step % steps_per_epoch == 0:
                    excess.append(max(dur - med, 0))
    if not excess:
        return None
    batch = median_ns(list(timed.window.durations_ns())) // k
    cost = median_ns(excess)
    epoch = steps_per_epoch * batch + cost
    return EpochCost(steps_per_epoch, len(excess), cost, batch, cost / epoch if epoch else 0.0)
