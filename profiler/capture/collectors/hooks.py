"""Hook timers -> a per-step split of each step: the collector side of the hooks phase.

Place in the pipeline: ``profiler.capture.phases.hooks`` times TensorFlow's own Python internals
inside the workload process and hands this module the raw per-step accumulators; ``split`` turns
them into the phase's record (``HooksData``). Pure: no I/O, no TensorFlow.

Each hook records *self* time: a call's duration minus that of the hooked calls nested inside it
(``BaseSession.run`` minus ``_run``; a second argument binding inside the function lookup counts
once, as binding). So the self times of one step never double count, and with the time outside
every hooked call they add up to the step's wall time exactly. Inclusive times are kept too.

A ``Target`` declares, as data, which hook points exist (``measured``), how the parts that no
hook times directly are derived from them (``derived``: a base minus some parts; ``wall`` is the
step's wall time), the ``partition`` of a step into parts that add up to its wall time exactly,
and a category hint per part (profiler/docs/measuring.md, "Categories"; ``native`` is the native
call
that the framework trace's kernel time splits into ``compute`` and ``dispatch``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from profiler.model import central_bounds, median_ns
from profiler.model.records import HookDoc, HooksCost, HooksData
from profiler.model.records import HookParts as P

#: Per-step rows kept in ``data["per_step"]`` (medians and means use every step).
PER_STEP_KEPT = 200


@dataclass(frozen=True)
class HookPoint:
    """One function the hooks phase times.

    Attributes:
        key: the measured part's name.
        module: the module that holds it.
        attr: ``function`` or ``Class.method`` in that module.
        what: what its time is, in words.
        required: whether the phase needs it. A TensorFlow without an optional point is timed
            without it: its accumulator stays at zero, and its time is the self time of the
            hooked call around it (the phase's record says so).
    """

    key: str
    module: str
    attr: str
    what: str
    required: bool = True


@dataclass(frozen=True)
class Target:
    """What the hooks phase times for one kind of loop, and how a step is split.

    Attributes:
        name: ``tf1_session`` or ``tf_function``.
        points: the hooked functions (plus ``intervals``' keys, measured between two hooks).
        intervals: measured parts that are intervals, not calls: key -> what it is (an
            interval's time is inclusive of the hooked calls inside it).
        derived: part -> (base, parts subtracted); ``wall`` is the step's wall time.
        partition: parts that add up to the step's wall time exactly.
        categories: part -> category hint.
        outside: the part outside the framework call (the user's loop around it).
    """

    name: str
    points: tuple[HookPoint, ...]
    intervals: dict[str, str]
    derived: dict[str, tuple[str, tuple[str, ...]]]
    partition: tuple[str, ...]
    categories: dict[str, str]
    outside: str

    @property
    def measured(self) -> tuple[str, ...]:
        """Accumulator keys, in accumulator order: the hook points, then the intervals."""
        return tuple(p.key for p in self.points) + tuple(self.intervals)


def derive(target: Target, wall_ns: int, measured: dict[str, int]) -> dict[str, int]:
    """Every part of one step: the measured ones and the derived ones (floored at zero)."""
    parts = dict(measured)
    values = {"wall": wall_ns, **measured}
    for name, (base, minus) in target.derived.items():
        v = values[base] - sum(values[m] for m in minus)
        parts[name] = max(0, v)
        values[name] = parts[name]
    return parts


#: Steps without a trace needed to know the native call's own time (for ``instantiate``).
MIN_BASELINE_STEPS = 5


def _native_without_traces(
    target: Target,
    rows: Sequence[tuple[int, Sequence[int], Sequence[int], Sequence[int]]],
    walls: dict[int, int],
) -> int | None:
    """The median native call of the window's steps that traced nothing (None if too few)."""
    keys = target.measured
    if P.TRACING not in keys or P.NATIVE not in keys:
        return None
    t, nat = keys.index(P.TRACING), keys.index(P.NATIVE)
    quiet = [own[nat] for step, own, _total, cnt in rows if step in walls and not cnt[t]]
    return median_ns(quiet) if len(quiet) >= MIN_BASELINE_STEPS else None


def _instantiation(
    keys: tuple[str, ...], parts: dict[str, int], cnt: Sequence[int], baseline: int | None
) -> int:
    """In a step that traced, the native call's time beyond a step that did not: instantiating
    the new concrete function (graph optimisation, the executor) happens inside the call."""
    if baseline is None or not cnt[keys.index(P.TRACING)]:
        return 0
    return max(parts[P.NATIVE] - baseline, 0)


#: A step whose measured parts exceed its wall by this factor holds work from outside it.
OVERFULL = 1.2


def _central(walls: Sequence[int], measured: Sequence[int] = ()) -> list[int]:
    """Indices of the steps whose wall lies in the typical range (``central_bounds``), less those
    whose measured parts (``measured``: the sum of each step's own times) exceed their wall by
    ``OVERFULL``: a step's timers stay open until the next step's call, so work between two
    steps (a Keras epoch's validation, built at its last batch: 530 ms of tracing in a 3.6 ms
    step) lands in one step's parts and the next step's wall; kept, that one row made a
    quarter of the typical step "tracing"."""
    if not walls:
        return []
    lo, hi = central_bounds(walls)
    central = [i for i, w in enumerate(walls) if lo <= w <= hi]
    if measured:
        whole = [i for i in central if measured[i] <= OVERFULL * walls[i]]
        central = whole or central
    return central


def split(
    target: Target,
    rows: Sequence[tuple[int, Sequence[int], Sequence[int], Sequence[int]]],
    walls: dict[int, int],
    cost: HooksCost,
) -> HooksData:
    """The hooks phase's record from its per-step accumulators.

    Args:
        target: what was hooked.
        rows: ``(global step, self ns, inclusive ns, calls)``, each per measured key.
        walls: global step -> wall time of that step (from the window's boundaries); rows of
            steps outside it (re-warm steps) are ignored.
        cost: the hooks' own measured cost: ``per_call_ns`` and ``step_wrapper_ns``
            (``profiler.capture.phases.hooks.measure_cost``) and, if measured, ``on_off_ns``,
            the step-level difference with the hooks on and off; the rest is filled in here
            (``per_step_ns``: the larger of ``on_off_ns`` and the micro-benchmark's cost).

    Returns:
        A ``HooksData``: medians and means per part, the central mean (a typical step's
        composition: the mean over the steps whose wall lies between the window's 10th and
        90th percentiles, so the parts sum to its mean wall without the slow outliers a plain
        mean carries; attribution reads it), calls per step, per-step columns (the first
        ``PER_STEP_KEPT`` steps) and the cost.
    """
    keys = target.measured
    steps: list[int] = []
    columns: dict[str, list[int]] = {"wall": []}
    measured: list[int] = []
    calls: dict[str, int] = dict.fromkeys(keys, 0)
    inclusive: dict[str, list[int]] = {k: [] for k in keys}
    baseline = _native_without_traces(target, rows, walls)
    for step, own, total, cnt in rows:
        if step not in walls:
            continue
        parts = derive(target, walls[step], dict(zip(keys, own, strict=True)))
        if P.INSTANTIATE in target.partition:
            parts[P.INSTANTIATE] = _instantiation(keys, parts, cnt, baseline)
            parts[P.NATIVE] -= parts[P.INSTANTIATE]
        for k, v in zip(keys, total, strict=True):
            inclusive[k].append(v)
        steps.append(step)
        columns["wall"].append(walls[step])
        measured.append(sum(own))
        for name, v in parts.items():
            columns.setdefault(name, []).append(v)
        for k, c in zip(keys, cnt, strict=True):
            calls[k] += c
    n = len(steps)
    names = [
        "wall",
        *keys,
        *target.derived,
        *([P.INSTANTIATE] if P.INSTANTIATE in target.partition else []),
    ]
    median = {k: median_ns(columns[k]) for k in names if columns.get(k)}
    mean = {k: sum(columns[k]) // n for k in names if columns.get(k)}
    central_rows = _central(columns["wall"], measured)
    central = {
        k: sum(columns[k][i] for i in central_rows) // max(len(central_rows), 1)
        for k in names
        if columns.get(k)
    }
    total_calls = sum(c for k, c in calls.items() if k not in target.intervals)
    calls_per_step = total_calls / n if n else 0.0
    micro = round(cost.per_call_ns * calls_per_step) + cost.step_wrapper_ns
    # The on/off difference is the whole cost; the micro-benchmark (a hot no-op) bounds it from
    # below, so noise that makes the difference smaller than that is not believed.
    per_step_cost = max(cost.on_off_ns, micro) if cost.on_off_ns is not None else micro
    kept = min(n, PER_STEP_KEPT)
    per_step: dict[str, tuple[int, ...]] = {
        "step": tuple(steps[:kept]),
        "wall_ns": tuple(columns["wall"][:kept]),
    }
    for k in names[1:]:
        per_step[k] = tuple(columns.get(k, [])[:kept])
    hooks = {p.key: HookDoc(f"{p.module}.{p.attr}", p.what) for p in target.points}
    hooks.update({k: HookDoc("interval", w) for k, w in target.intervals.items()})
    share = round(per_step_cost / median["wall"], 5) if median.get("wall") else None
    return HooksData(
        target=target.name,
        hooks=hooks,
        steps=n,
        partition=tuple(target.partition),
        categories=dict(target.categories),
        outside=target.outside,
        median_ns=median,
        mean_ns=mean,
        central_mean_ns=central,
        inclusive_median_ns={k: median_ns(v) for k, v in inclusive.items() if v},
        calls_per_step={k: round(c / n, 3) if n else 0.0 for k, c in calls.items()},
        per_step=per_step,
        per_step_steps=kept,
        self_cost=dataclasses.replace(
            cost,
            calls_per_step=round(calls_per_step, 3),
            per_step_ns_microbench=micro,
            per_step_ns=per_step_cost,
            share_of_step=share,
        ),
    )
