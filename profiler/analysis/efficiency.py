"""Training efficiency: loss against the work done (samples, updates), not against "epochs".

Place in the pipeline: analysis (pure). The efficiency process (``profiler.capture.efficiency``)
trains each implementation of a ``Study`` (the case study's: seed 004's) for a sample budget over
several seeds and writes ``efficiency.json``: checkpoints of work done (samples, updates, epochs as
each implementation defines them, the optimizer's own step counter, distinct samples seen), training
wall time with the logging excluded, and the loss on a fixed evaluation set. ``summarize`` turns
that into the summary's ``efficiency`` section: curves (median and range over seeds), the noise
floor and the excess loss over it, when a target excess is first reached and when it stays below,
each cause's contribution at equal samples and at equal updates, and the facts the diagnosis rules
(``profiler.diagnoses.efficiency``) read (those last in ``profiler.analysis.efficiency_pairs``).
Nothing here does I/O, imports numpy or prints.

Why by work: "100 epochs vs 3" compares units that differ by two orders of magnitude. One
Keras epoch is n samples in n/32 mini-batch updates; one epoch of the asker's loop is 32
single-sample updates on a reused batch. The comparison that means something is at equal
samples (data cost) or equal updates (optimizer steps), with wall time alongside.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The declarations and the checkpoint schedule live in profiler.model.studies (the case study and
# its efficiency process read them too); Cause and schedule stay importable from here.
from profiler.model.studies import COLUMNS, DEFAULT_TARGET_EXCESS
from profiler.model.studies import Cause as Cause
from profiler.model.studies import schedule as schedule

#: Adam's moment decay rates, the same in every implementation (the seed's and Keras's).
BETA1 = 0.9
BETA2 = 0.999

# --- the bias correction ----------------------------------------------------------------------


def lr_factor(t: int, beta1: float = BETA1, beta2: float = BETA2) -> float:
    """Adam's bias correction as a factor on the learning rate at counter ``t``.

    ``m_hat / sqrt(v_hat) = (m / sqrt(v)) * sqrt(1 - beta2**t) / (1 - beta1**t)``: the step is
    the learning rate times this factor times ``m / sqrt(v)`` (Keras writes it as ``alpha_t``).
    """
    if t < 1:
        raise ValueError(f"Adam's counter starts at 1, got {t}")
    return math.sqrt(1 - beta2**t) / (1 - beta1**t)


def bias_multiplier(
    counter: int, updates: int, beta1: float = BETA1, beta2: float = BETA2
) -> float:
    """How much the bias correction at ``counter`` scales the step against the true ``updates``.

    ``lr_factor(counter) / lr_factor(updates)``: 1 when the counter is the update count; the
    seed's epoch counter (``t + 1`` after ``32 t`` updates) gives 0.53 at counter 4 and 0.23 at
    counter 31.
    """
    return lr_factor(counter, beta1, beta2) / lr_factor(updates, beta1, beta2)


# --- one run ----------------------------------------------------------------------------------


class EfficiencyError(ValueError):
    """A run's checkpoints break an invariant (ragged columns, an axis going backwards)."""


#: The x axes a curve may be read against.
AXES = ("samples", "updates", "epochs", "wall_ms")


def _finite(v: Any) -> float:
    """A loss as a float, a diverged one (None, NaN, inf) as +inf: it never reaches a target."""
    if v is None:
        return math.inf
    f = float(v)
    return f if math.isfinite(f) else math.inf


@dataclass(frozen=True)
class Run:
    """One implementation trained with one seed: its checkpoints, in schedule order."""

    seed: int
    floor: float
    samples: tuple[int, ...]
    updates: tuple[int, ...]
    epochs: tuple[float, ...]
    counter: tuple[int, ...]
    distinct: tuple[int, ...]
    distinct_epoch: tuple[int, ...]
    wall_ns: tuple[int, ...]
    loss: tuple[float, ...]
    first_update_ns: int = 0
    log_ns: int = 0
    observe_ns: int = 0
    reuse: tuple[tuple[int, int], ...] = ()
    printed: tuple[float, ...] | None = None
    run_s: float = 0.0

    @classmethod
    def from_raw(cls, raw: Mapping[str, Any]) -> Run:
        """From one ``seeds`` entry of ``efficiency.json``; raises ``EfficiencyError``."""
        cols = raw["checkpoints"]
        lengths = {c: len(cols[c]) for c in COLUMNS}
        if len(set(lengths.values())) != 1 or not lengths["samples"]:
            raise EfficiencyError(f"seed {raw.get('seed')}: ragged or empty columns {lengths}")
        for axis in ("samples", "updates", "epochs", "wall_ns", "distinct"):
            xs = cols[axis]
            for i in range(1, len(xs)):
                if xs[i] < xs[i - 1]:
                    raise EfficiencyError(f"seed {raw.get('seed')}: {axis} goes backwards at {i}")
        printed = raw.get("printed")
        return cls(
            seed=int(raw["seed"]),
            floor=float(raw["floor"]),
            samples=tuple(int(v) for v in cols["samples"]),
            updates=tuple(int(v) for v in cols["updates"]),
            epochs=tuple(float(v) for v in cols["epochs"]),
            counter=tuple(int(v) for v in cols["counter"]),
            distinct=tuple(int(v) for v in cols["distinct"]),
            distinct_epoch=tuple(int(v) for v in cols["distinct_epoch"]),
            wall_ns=tuple(int(v) for v in cols["wall_ns"]),
            loss=tuple(_finite(v) for v in cols["loss"]),
            first_update_ns=int(raw.get("first_update_ns", 0)),
            log_ns=int(raw.get("log_ns", 0)),
            observe_ns=int(raw.get("observe_ns", 0)),
            reuse=tuple(sorted((int(k), int(v)) for k, v in (raw.get("reuse") or {}).items())),
            printed=tuple(float(v) for v in printed["per_epoch"]) if printed else None,
            run_s=float(raw.get("run_s", 0.0)),
        )

    @property
    def excess(self) -> tuple[float, ...]:
        """Loss above the noise floor at each checkpoint."""
        return tuple(v - self.floor for v in self.loss)

    def axis(self, name: str) -> tuple[float, ...]:
        """An x axis: ``samples``, ``updates``, ``epochs`` or ``wall_ms`` (logging excluded)."""
        if name == "wall_ms":
            return tuple(v / 1e6 for v in self.wall_ns)
        return tuple(float(v) for v in getattr(self, name))

    @property
    def time_per_update_ns(self) -> float | None:
        """Training time per update, from the axis (which starts after the first update)."""
        later = self.updates[-1] - 1
        return self.wall_ns[-1] / later if later > 0 else None


def first_reached(values: Sequence[float], target: float) -> int | None:
    """Index of the first checkpoint at or below ``target``; None if none is."""
    for i, v in enumerate(values):
        if v <= target:
            return i
    return None


def stays_below(values: Sequence[float], target: float) -> int | None:
    """Index of the first checkpoint from which every later one is at or below ``target``.

    None when the last checkpoint is above it: within the budget it never stays below.
    """
    i = len(values)
    while i > 0 and values[i - 1] <= target:
        i -= 1
    return i if i < len(values) else None


def value_at(xs: Sequence[float], ys: Sequence[float], x: float) -> float | None:
    """``ys`` at the last checkpoint with ``xs <= x``; None beyond the run or before it starts.

    The schedule contains the reference points, so at those this is exact, not interpolated.
    """
    if not xs or x > xs[-1] or x < xs[0]:
        return None
    lo, hi = 0, len(xs)
    while lo < hi:  # bisect_right
        mid = (lo + hi) // 2
        if xs[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return ys[lo - 1]


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """Median and range over seeds; a None (not reached, beyond the budget) counts as +inf.

    So a median that is None means "not reached by most seeds", a max that is None "not by
    every seed"; ``reached`` says how many seeds had a value.
    """
    vals = [math.inf if v is None else float(v) for v in values]
    if not vals:
        return {"median": None, "min": None, "max": None, "reached": 0, "of": 0}

    def fin(v: float) -> float | None:
        return v if math.isfinite(v) else None

    return {
        "median": fin(statistics.median(vals)),
        "min": fin(min(vals)),
        "max": fin(max(vals)),
        "reached": sum(math.isfinite(v) for v in vals),
        "of": len(vals),
    }


def _med(values: Iterable[float | None]) -> float | None:
    return spread(list(values))["median"]


# --- one implementation over its seeds --------------------------------------------------------


@dataclass(frozen=True)
class Targets:
    """The comparison points and the target (from the process's spec)."""

    n: int
    ref_samples: int
    ref_updates: int
    target_excess: float = DEFAULT_TARGET_EXCESS


@dataclass(frozen=True)
class Impl:
    """One implementation's successful runs, with its declared work per step."""

    name: str
    framework: str
    runs: tuple[Run, ...]
    work: Mapping[str, int]
    initializer: str
    printed: str
    budget_samples: int
    role: str = ""

    @property
    def samples_per_epoch(self) -> int:
        return self.work["samples_per_step"] * self.work["steps_per_epoch"]

    @property
    def updates_per_epoch(self) -> int:
        return self.work["updates_per_step"] * self.work["steps_per_epoch"]

    @property
    def flops_per_update(self) -> float:
        return self.work["flops_per_step"] / self.work["updates_per_step"]

    def by_seed(self) -> dict[int, Run]:
        return {r.seed: r for r in self.runs}

    def at(self, axis: str, x: float, column: str = "excess") -> list[float | None]:
        """Per seed, ``column`` at the last checkpoint with ``axis <= x``."""
        out = []
        for r in self.runs:
            ys = r.excess if column == "excess" else getattr(r, column)
            out.append(value_at(r.axis(axis), ys, x))
        return out

    def crossing(self, target: float, how: str = "first") -> dict[str, dict[str, Any]]:
        """When the excess is first at/below ``target`` (``first``) or stays there (``stays``),
        on every axis: per-seed values summarised by ``spread``."""
        find = first_reached if how == "first" else stays_below
        idx = [find(r.excess, target) for r in self.runs]
        return {
            axis: spread(
                [
                    None if i is None else r.axis(axis)[i]
                    for r, i in zip(self.runs, idx, strict=True)
                ]
            )
            for axis in AXES
        }

    def time_per_update_ns(self) -> float | None:
        return _med(r.time_per_update_ns for r in self.runs)

    def reuse_passes(self) -> float | None:
        """Median passes over one batch before the next is drawn (completed batches only)."""
        counts: dict[int, int] = {}
        for r in self.runs:
            for passes, k in r.reuse:
                counts[passes] = counts.get(passes, 0) + k
        if not counts:
            return None
        flat = sorted(counts.items())
        half, acc = sum(counts.values()) / 2, 0
        for passes, k in flat:
            acc += k
            if acc >= half:
                return float(passes)
        return float(flat[-1][0])

    def batch_draws(self) -> float | None:
        return _med(sum(k for _, k in r.reuse) for r in self.runs) if self.runs else None

    def printed_gaps(self, n: int) -> list[tuple[int, float, float, float]]:
        """(epoch, printed loss, evaluation loss at that epoch's end, relative gap), all seeds.

        Only epochs whose end is a checkpoint (the process adds every epoch end of ``fit``).
        """
        out = []
        for r in self.runs:
            at_end = dict(zip(r.samples, r.loss, strict=True))
            for e, printed in enumerate(r.printed or (), start=1):
                ev = at_end.get(e * n)
                if ev is not None and math.isfinite(ev) and ev > 0:
                    out.append((e, printed, ev, printed / ev - 1))
        return out


def _sig(v: float | None, digits: int = 5) -> float | None:
    """``v`` to ``digits`` significant digits: curves are for plotting, and they go into the
    summary and the report's page, so they should not carry 17 digits per point."""
    if v is None or v == 0 or not math.isfinite(v):
        return v
    return round(v, digits - 1 - math.floor(math.log10(abs(v))))


def _curve(impl: Impl) -> dict[str, list[Any]]:
    """Median and range over seeds at each checkpoint of the (seed-independent) schedule.

    Counters are deterministic functions of the schedule, so they come from the first run;
    distinct samples and wall time differ by seed and are medians. Values are rounded to five
    significant digits (``_sig``).
    """
    base = impl.runs[0]
    xs = base.samples
    per_seed_loss = [[value_at(r.axis("samples"), r.loss, x) for x in xs] for r in impl.runs]
    per_seed_excess = [[value_at(r.axis("samples"), r.excess, x) for x in xs] for r in impl.runs]
    walls = [[value_at(r.axis("samples"), r.axis("wall_ms"), x) for x in xs] for r in impl.runs]
    distinct = [
        [value_at(r.axis("samples"), [float(d) for d in r.distinct], x) for x in xs]
        for r in impl.runs
    ]

    def col(rows: list[list[float | None]], key: str) -> list[float | None]:
        return [_sig(spread([row[i] for row in rows])[key]) for i in range(len(xs))]

    return {
        "samples": list(base.samples),
        "updates": list(base.updates),
        "epochs": [_sig(e, 7) for e in base.epochs],
        "counter": list(base.counter),
        "bias_multiplier": [
            _sig(bias_multiplier(c, u)) if c > 0 and u > 0 else None
            for c, u in zip(base.counter, base.updates, strict=True)
        ],
        "distinct": col(distinct, "median"),
        "wall_ms": col(walls, "median"),
        "loss_median": col(per_seed_loss, "median"),
        "loss_min": col(per_seed_loss, "min"),
        "loss_max": col(per_seed_loss, "max"),
        "excess_median": col(per_seed_excess, "median"),
        "excess_min": col(per_seed_excess, "min"),
        "excess_max": col(per_seed_excess, "max"),
    }


def _step_size(run: Run, index: int) -> dict[str, Any]:
    c, u = run.counter[index], run.updates[index]
    ok = c > 0 and u > 0
    return {
        "samples": run.samples[index],
        "updates": u,
        "counter": c,
        "lr_factor": lr_factor(c) if ok else None,
        "multiplier": bias_multiplier(c, u) if ok else None,
    }


def implementation_summary(impl: Impl, t: Targets) -> dict[str, Any]:
    """The summary entry of one implementation: work accounting, target crossings, curves."""
    base = impl.runs[0]
    last = len(base.samples) - 1
    ends = [len(r.samples) - 1 for r in impl.runs]
    distinct_end = [float(r.distinct[i]) for r, i in zip(impl.runs, ends, strict=True)]
    # The smallest bias-correction multiplier over the run (counters are seed-independent).
    mults = [
        (bias_multiplier(c, u), i)
        for i, (c, u) in enumerate(zip(base.counter, base.updates, strict=True))
        if c > 0 and u > 0
    ]
    ref_i = next((i for i, u in enumerate(base.updates) if u >= t.ref_updates), None)
    gaps = impl.printed_gaps(t.n)
    at3 = [g for g in gaps if g[0] == 3]
    tpu = impl.time_per_update_ns()
    train_ns = [r.wall_ns[-1] for r in impl.runs]
    log_points = len(base.samples)
    return {
        "name": impl.name,
        "framework": impl.framework,
        "role": impl.role,
        "seeds": [r.seed for r in impl.runs],
        "budget_samples": impl.budget_samples,
        "initializer": impl.initializer,
        "work": {
            "samples": base.samples[last],
            "updates": base.updates[last],
            "epochs": base.epochs[last],
            "optimizer_counter": base.counter[last],
            "distinct": spread(distinct_end),
            "coverage": spread([d / t.n for d in distinct_end]),
            "distinct_last_epoch": spread([float(r.distinct_epoch[-1]) for r in impl.runs]),
            "distinct_source": "construction" if impl.framework == "keras" else "instrumented",
            "samples_per_epoch": impl.samples_per_epoch,
            "updates_per_epoch": impl.updates_per_epoch,
            "samples_per_update": impl.work["samples_per_step"] / impl.work["updates_per_step"],
            "batch_size": impl.work.get("batch_size"),
            "reuse_passes": impl.reuse_passes(),
            "batch_draws": impl.batch_draws(),
        },
        "step_size": {
            "at_ref_updates": _step_size(base, ref_i) if ref_i is not None else None,
            "smallest": _step_size(base, min(mults)[1]) if mults else None,
            "at_end": _step_size(base, last) if base.updates[last] > 0 else None,
        },
        "noise_floor": spread([r.floor for r in impl.runs]),
        "initial_loss": spread([r.loss[0] for r in impl.runs]),
        "at_ref_samples": {
            "x": t.ref_samples,
            "loss": spread(impl.at("samples", t.ref_samples, "loss")),
            "excess": spread(impl.at("samples", t.ref_samples)),
        },
        "at_ref_updates": {
            "x": t.ref_updates,
            "loss": spread(impl.at("updates", t.ref_updates, "loss")),
            "excess": spread(impl.at("updates", t.ref_updates)),
        },
        "final_excess": spread([r.excess[-1] for r in impl.runs]),
        "target": {
            "excess": t.target_excess,
            "first_reached": impl.crossing(t.target_excess, "first"),
            "stays_below": impl.crossing(t.target_excess, "stays"),
        },
        "printed": {
            "kind": impl.printed,
            "gap": spread([g[3] for g in gaps]) if gaps else None,
            "epoch3": (
                {
                    "printed": spread([g[1] for g in at3]),
                    "eval": spread([g[2] for g in at3]),
                    "gap": spread([g[3] for g in at3]),
                }
                if at3
                else None
            ),
        },
        "time": {
            "per_update_us": tpu / 1e3 if tpu is not None else None,
            "per_epoch_ms": tpu * impl.updates_per_epoch / 1e6 if tpu is not None else None,
            "train_s": spread([v / 1e9 for v in train_ns]),
            "run_s": spread([r.run_s for r in impl.runs]),
            "first_update_ms": spread([r.first_update_ns / 1e6 for r in impl.runs]),
            "flops_per_update": impl.flops_per_update,
            "log_points": log_points,
            "log_us_per_point": _med(r.log_ns / 1e3 / log_points for r in impl.runs),
            "log_share": _med(r.log_ns / max(r.wall_ns[-1], 1) for r in impl.runs),
            "observe_share": _med(r.observe_ns / max(r.wall_ns[-1], 1) for r in impl.runs),
        },
        "curve": _curve(impl),
    }


# --- causes: one pair of implementations each ------------------------------------------------
