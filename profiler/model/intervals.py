"""Intervals shared by the measured process and the analysis: a paired saving's 95% interval.

Place in the pipeline: the model layer (no imports of its own), so that the what-if phase, which
decides in the measured process when it has pairs enough, and the analysis, which reports the
interval, compute it one way.
"""

from __future__ import annotations

#: Student's t, 97.5th percentile, by degrees of freedom (1..30; beyond: 1.96).
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    """Student's t at 97.5% for ``df`` degrees of freedom (a two-sided 95% interval)."""
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


def saving_interval(diffs: list[float]) -> tuple[float, float, float] | None:
    """(mean, low, high) of paired differences: a 95% t interval; None under two pairs."""
    n = len(diffs)
    if n < 2:
        return None
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    half = t975(n - 1) * (var / n) ** 0.5
    return mean, mean - half, mean + half
