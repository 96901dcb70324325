"""``compare A B --fail-above PCT``: did B's typical step regress from A's, beyond the noise?

Place in the pipeline: pure, over two runs' ``summary.json`` workload entries (``compare`` pairs
them); no I/O, no printing. ``reports.text`` formats the result, ``cli`` turns it into the exit
status.

The figure is the change of the typical step, ``attribution.reference_us`` (the mean of the
timed steps between the 10th and 90th percentiles, a 10%-trimmed mean), from A to B, in percent,
with a 95% interval. ``summary.json`` keeps no per-step times (``series`` is thinned to the
longest step of each run of steps, which biases it upwards) and no interval, so each side's
standard error is Yuen's for a trimmed mean, ``sqrt((n-1) s_w² / (h (h-1)))`` over ``n`` timed
units with ``h = n - 2⌊n/10⌋`` kept, where the winsorized standard deviation ``s_w``, which the
summary does not hold, is bounded by what it does hold: every winsorized step lies between
``step_time.p10_us`` and ``p90_us`` (nearest-rank percentiles, the same cut as the trimmed mean),
so ``s_w² ≤ n/(n-1) · (p90 - p10)² / 4``. The bound is reached only by steps split evenly
between p10 and p90; for the usual one-humped step times it overstates the error by about 1.5×,
so the gate fails only on a clear regression. The two sides combine on the log of the ratio
(delta method) with Welch's degrees of freedom and Student's t quantile.

The interval covers the step-to-step noise within each timed window, not what differs between
two runs of the same code (another load on the machine, another day): it says whether these two
windows differ, not whether every run will.

Verdicts, in order: ``inconclusive`` when there is no interval (a side has no ``step_time`` or
one timed unit) and the change is above PCT, or when the change is above PCT but its interval's
lower end is not; ``regressed`` when the lower end is above PCT (the gate fails); ``faster``
when the upper end is below 0; ``within`` otherwise.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

#: The interval's coverage.
CONFIDENCE = 0.95
#: The share of steps the typical step leaves out on each side (``attribution.central_mean``).
TRIM = 0.1
#: Verdicts; the gate fails on ``REGRESSED`` only.
REGRESSED, INCONCLUSIVE, WITHIN, FASTER = "regressed", "inconclusive", "within", "faster"

METHOD = (
    f"{CONFIDENCE:.0%} interval of the change of the typical step (10%-trimmed mean): Yuen's "
    "standard error on each side with the winsorized SD bounded by half the p10-p90 range "
    "(summary.json holds no per-step times), combined on the log ratio with Welch's degrees of "
    "freedom and Student's t"
)


@dataclass(frozen=True, slots=True)
class StepEstimate:
    """One side's typical step and the standard error of that estimate (µs).

    ``se_us`` and ``df`` are None when the summary cannot bound the error (no ``step_time``, or
    fewer than two timed units).
    """

    us: float
    se_us: float | None
    df: float | None
    units: int | None


@dataclass(frozen=True, slots=True)
class Change:
    """One workload's change from A to B, in percent of A's typical step."""

    workload: str
    a_us: float
    b_us: float
    change_pct: float | None
    low_pct: float | None
    high_pct: float | None
    verdict: str


def estimate(entry: dict[str, Any]) -> StepEstimate:
    """The typical step of a ``summary.json`` workload entry with its error bound."""
    us = float(entry["attribution"]["reference_us"])
    st = entry.get("step_time") or {}
    k = int((entry.get("work") or {}).get("units_per_step") or 1)
    if not st or st.get("p10_us") is None or st.get("p90_us") is None or not st.get("steps"):
        return StepEstimate(us, None, None, None)
    n = int(st["steps"]) // k
    h = n - 2 * int(n * TRIM)
    if n < 2 or h < 2:
        return StepEstimate(us, None, None, n)
    spread = max(float(st["p90_us"]) - float(st["p10_us"]), 0.0)
    var_w = n / (n - 1) * spread**2 / 4  # the bound on the winsorized variance
    se = math.sqrt((n - 1) * var_w / (h * (h - 1)))
    return StepEstimate(us, se, float(h - 1), n)


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile at ``p`` for ``df`` degrees of freedom (``df`` rounded down, which
    widens the interval): exact for 1 and 2, otherwise the Cornish-Fisher expansion around the
    normal quantile (Abramowitz & Stegun 26.7.5: 0.004 under the table's 3.182 at 3 degrees,
    under 0.001 from 4 on)."""
    v = max(math.floor(df), 1)
    if v == 1:
        return math.tan(math.pi * (p - 0.5))
    if v == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = statistics.NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / v + g2 / v**2 + g3 / v**3 + g4 / v**4


def change(workload: str, a: StepEstimate, b: StepEstimate, fail_above_pct: float) -> Change:
    """B's typical step against A's, with its interval and verdict (see the module docstring)."""
    if a.us <= 0 or b.us <= 0:
        return Change(workload, a.us, b.us, None, None, None, INCONCLUSIVE)
    log_ratio = math.log(b.us / a.us)
    point = 100 * math.expm1(log_ratio)
    low = high = None
    if a.se_us is not None and b.se_us is not None and a.df and b.df:
        ra, rb = (a.se_us / a.us) ** 2, (b.se_us / b.us) ** 2
        if ra + rb == 0:
            low = high = point
        else:
            df = (ra + rb) ** 2 / (ra**2 / a.df + rb**2 / b.df)
            half = t_quantile(0.5 + CONFIDENCE / 2, df) * math.sqrt(ra + rb)
            low = 100 * math.expm1(log_ratio - half)
            high = 100 * math.expm1(log_ratio + half)
    if low is None or high is None:
        verdict = INCONCLUSIVE if point > fail_above_pct else WITHIN
    elif low > fail_above_pct:
        verdict = REGRESSED
    elif point > fail_above_pct:
        verdict = INCONCLUSIVE
    elif high < 0:
        verdict = FASTER
    else:
        verdict = WITHIN
    return Change(workload, a.us, b.us, point, low, high, verdict)


def gate(pairs: list[tuple[dict[str, Any], dict[str, Any]]], fail_above_pct: float) -> dict:
    """The gate over (A's entry, B's entry) pairs: each pair's change and whether any regressed.

    Returns the ``gate`` object of the compare document: ``fail_above_pct``, ``confidence``,
    ``method``, ``failed`` and ``workloads`` (one ``Change`` each, percentages and µs rounded to
    three decimals).
    """
    changes = []
    for a, b in pairs:
        name = a["name"] if a["name"] == b["name"] else f"{a['name']} → {b['name']}"
        changes.append(change(name, estimate(a), estimate(b), fail_above_pct))
    return {
        "fail_above_pct": fail_above_pct,
        "confidence": CONFIDENCE,
        "method": METHOD,
        "failed": any(c.verdict == REGRESSED for c in changes),
        "workloads": [
            {k: round(v, 3) if isinstance(v, float) else v for k, v in asdict(c).items()}
            for c in changes
        ],
    }
