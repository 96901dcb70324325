"""Experiments: counterfactual pairs and a problem-size sweep that test the attribution.

Place in the pipeline: a measurement process of its own (``profiler.capture.experiments``)
builds the loops of every pair and every sweep size in ONE process and times them in
alternating blocks, so machine drift hits both sides alike; the analysis here is pure.

A pair declares, in code and before anything is measured, which categories (or named parts of
them) its variant removes from the baseline's step. The attribution of the baseline then
*predicts* the saving (the sum of those parts); the experiment *measures* it (baseline median
minus variant median, per training step). Their difference is the prediction's error; a saving
smaller than the run's resolution is reported as below resolution, not as a number.

The sweep times chosen workloads at several problem sizes and fits step time = a + b·n over a
bounded range (numpy bends past the cache, so the fit uses the range where a line holds),
giving the fixed per-step overhead ``a``, the per-sample cost ``b`` and the crossover size, if
any, where TensorFlow overtakes numpy.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from profiler.analysis.whatif import (
    FAILED,
    HOLDS,
    MISSES,
    NOT_PREDICTED,
    TOLERANCE,
    TOLERANCE_FLOOR_US,
    verdict_for,
)

# Timing in blocks lives in profiler.model.blocks (the experiments process runs it); the names
# tests import stay importable from here.
from profiler.model.blocks import Measured as Measured
from profiler.model.blocks import block_medians as block_medians
from profiler.model.blocks import measured as measured
from profiler.model.blocks import resolution_ns as resolution_ns
from profiler.model.studies import Pair

# --- analysis (pure) -------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """Predicted against measured, with the tolerance the bench holds predictions to."""

    predicted_ns: int
    measured_ns: int
    resolution_ns: int

    @property
    def error_ns(self) -> int:
        return self.predicted_ns - self.measured_ns

    @property
    def relative_error(self) -> float | None:
        return self.error_ns / self.measured_ns if self.measured_ns else None

    @property
    def below_resolution(self) -> bool:
        return abs(self.measured_ns) < self.resolution_ns

    def within(self, rel: float = 0.25, abs_ns: int = 3_000) -> bool:
        """Within max(rel × measured, abs_ns) of the measurement (the project's goal)."""
        return abs(self.error_ns) <= max(rel * abs(self.measured_ns), abs_ns)


# --- size sweep ------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearFit:
    """step time = a + b·n over sizes [n_min, n_max]; ``max_rel_residual`` says how well."""

    a_ns: float
    b_ns: float
    n_min: int
    n_max: int
    max_rel_residual: float

    def at(self, n: float) -> float:
        return self.a_ns + self.b_ns * n


def theil_sen(ns: Sequence[float], ts: Sequence[float]) -> tuple[float, float]:
    """Robust line through points: median of pairwise slopes, then median intercept."""
    slopes = [
        (ts[j] - ts[i]) / (ns[j] - ns[i])
        for i in range(len(ns))
        for j in range(i + 1, len(ns))
        if ns[j] != ns[i]
    ]
    if not slopes:
        raise ValueError("a line needs at least two distinct sizes")
    b = statistics.median(slopes)
    a = statistics.median(t - b * n for n, t in zip(ns, ts, strict=True))
    return a, b


def fit_bounded(
    ns: Sequence[int], ts: Sequence[float], tolerance: float = 0.15, min_points: int = 3
) -> LinearFit:
    """Fit a + b·n over the widest range of sizes, from the smallest, where the line holds.

    The range grows one size at a time while every point stays within ``tolerance`` (relative)
    of the fitted line; numpy's per-sample cost rises past the cache, so its range stops there.
    """
    order = sorted(range(len(ns)), key=lambda i: ns[i])
    xs = [float(ns[i]) for i in order]
    ys = [float(ts[i]) for i in order]
    best: LinearFit | None = None
    for end in range(min(min_points, len(xs)), len(xs) + 1):
        a, b = theil_sen(xs[:end], ys[:end])
        resid = max(abs(y - (a + b * x)) / y for x, y in zip(xs[:end], ys[:end], strict=True))
        fit = LinearFit(a, b, int(xs[0]), int(xs[end - 1]), resid)
        if best is None or resid <= tolerance:
            best = fit
        if resid > tolerance:
            break
    if best is None:
        raise ValueError("no sizes to fit")
    return best


def crossover(slow_fixed: LinearFit, fast_fixed: LinearFit) -> float | None:
    """The size where ``slow_fixed`` (higher a, e.g. TensorFlow) becomes faster, if it ever does.

    None when its per-sample cost is not lower (the lines never cross for n > 0).
    """
    db = fast_fixed.b_ns - slow_fixed.b_ns
    if db <= 0:
        return None
    n = (slow_fixed.a_ns - fast_fixed.a_ns) / db
    return n if n > 0 else None


# --- summary section -------------------------------------------------------------------------

#: Predicts a pair's saving (ns per training step) from the baseline's attribution:
#: (baseline workload name, removal keys) -> ns, or None when no attribution exists.
Predictor = Callable[[str, tuple[str, ...]], "int | None"]


def summarize(
    raw: dict,
    pairs_declared: Sequence[Pair],
    predict: Predictor | None = None,
    crossing: tuple[str, str] | None = None,
) -> dict:
    """The ``experiments`` section of the summary from the experiments process's output.

    Args:
        raw: ``experiments.json`` as written by ``profiler.capture.experiments`` plus
            ``status`` and ``error`` of the process.
        pairs_declared: the pairs, as declared (their removals and claims).
        predict: the attribution's prediction for a pair (None: predictions not available).
        crossing: (higher fixed cost, lower fixed cost) sweep workloads whose crossover size
            is computed, if both were swept.
    """
    declared = {p.id: p for p in pairs_declared}
    pairs = []
    for entry in raw.get("pairs", []):
        pair = declared.get(entry.get("id", ""))
        row: dict = {
            "id": entry.get("id", ""),
            "name": entry["name"],
            "baseline": entry["baseline"],
            "variant": entry["variant"],
            "claim": pair.claim if pair else "",
            "removes": [r.key for r in pair.removes] if pair else [],
            "status": entry["status"],
            "error": entry.get("error", ""),
            "baseline_us": None,
            "variant_us": None,
            "measured_saving_us": None,
            "resolution_us": None,
            "below_resolution": None,
            "predicted_saving_us": None,
            "error_us": None,
            "relative_error": None,
            "within_goal": None,
            "pairs": entry.get("pairs"),
            "interval_us": None,
            "verdict": FAILED if entry["status"] != "ok" else NOT_PREDICTED,
        }
        if entry["status"] == "ok":
            m = Measured(entry["baseline_ns"], entry["variant_ns"], entry["resolution_ns"])
            row.update(
                baseline_us=m.baseline_ns / 1e3,
                variant_us=m.variant_ns / 1e3,
                measured_saving_us=m.saving_ns / 1e3,
                resolution_us=m.resolution_ns / 1e3,
                below_resolution=abs(m.saving_ns) < m.resolution_ns,
            )
            interval = entry.get("interval_ns")
            if interval is not None:
                row["interval_us"] = [interval[0] / 1e3, interval[1] / 1e3]
            predicted = predict(entry["baseline"], tuple(row["removes"])) if predict else None
            tolerance = (
                None
                if predicted is None
                else max(TOLERANCE * abs(predicted), TOLERANCE_FLOOR_US * 1e3)
            )
            if "pairs" in entry:  # sized to its noise: the verdict follows the interval
                span = None if interval is None else (float(interval[0]), float(interval[1]))
                row["verdict"] = verdict_for(span, predicted, tolerance)
            if predicted is not None:
                v = Verdict(predicted, m.saving_ns, m.resolution_ns)
                row.update(
                    predicted_saving_us=predicted / 1e3,
                    error_us=v.error_ns / 1e3,
                    relative_error=v.relative_error,
                    within_goal=v.within(),
                )
                if "pairs" not in entry:  # an older run's pair: no interval, the goal decides
                    row["verdict"] = HOLDS if v.within() else MISSES
        pairs.append(row)
    sweep = {}
    fits: dict[str, LinearFit] = {}
    for name, entry in raw.get("sweep", {}).items():
        item: dict = {
            "status": entry["status"],
            "error": entry.get("error", ""),
            "sizes": entry.get("sizes", []),
            "median_us": [t / 1e3 for t in entry.get("median_ns", [])],
            "fit": None,
        }
        if entry["status"] == "ok" and len(entry.get("median_ns", [])) >= 2:
            fit = fit_bounded(entry["sizes"], entry["median_ns"])
            fits[name] = fit
            item["fit"] = {
                "a_us": fit.a_ns / 1e3,
                "b_ns_per_sample": fit.b_ns,
                "n_min": fit.n_min,
                "n_max": fit.n_max,
                "max_rel_residual": fit.max_rel_residual,
            }
        sweep[name] = item
    cross = None
    if crossing is not None and all(name in fits for name in crossing):
        slow, fast = crossing
        n = crossover(fits[slow], fits[fast])
        cross = {
            "slow_fixed": slow,
            "fast_fixed": fast,
            "n": n,
            "note": (
                f"{slow}'s per-sample cost is not lower than {fast}'s: the lines never cross"
                if n is None
                else f"above n ≈ {n:,.0f} {slow}'s step is the faster (extrapolated)"
            ),
        }
    out = {
        "status": raw.get("status", "ok"),
        "error": raw.get("error", ""),
        "pairs": pairs,
        "sweep": sweep,
        "crossover": cross,
    }
    if raw.get("seed_whatifs") is not None:
        out["seed_whatifs"] = seed_whatifs(raw["seed_whatifs"], pairs)
    return out


def seed_whatifs(raw: dict, pairs: list[dict]) -> dict:
    """The seed script's what-ifs, each beside the hand-written pair that makes the same fix
    (``casestudy.SEED_WHATIF_PAIRS``): both measured savings, µs per step, and their ratio."""
    from profiler.workloads import casestudy

    by_id = {p["id"]: p for p in pairs}
    rows = []
    for x in raw.get("whatifs", []):
        pair = by_id.get(casestudy.SEED_WHATIF_PAIRS.get(x["id"]) or "")
        hand = pair["measured_saving_us"] if pair else None
        m = x.get("measured_saving_us")
        rows.append(
            {
                "id": x["id"],
                "title": x["title"],
                "measured_saving_us": m,
                "resolution_us": x.get("resolution_us"),
                "predicted_saving_us": x.get("predicted_saving_us"),
                "verdict": x.get("verdict", ""),
                "pair": pair["name"] if pair else None,
                "pair_saving_us": hand,
                "ratio": m / hand if m is not None and hand else None,
            }
        )
    return {
        "script": raw.get("script", ""),
        "status": raw.get("status", "failed"),
        "error": raw.get("error", ""),
        "run": raw.get("run", ""),
        "rows": rows,
    }
