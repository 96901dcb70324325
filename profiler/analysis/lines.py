"""Line tables: line_profiler's rows per function, ranked, with µs per hit and per step.

Place in the pipeline: pure analysis of a lines phase's ``LineStat`` rows (``profiler.model``).
The summary carries the tables (``phases[].data.functions``); ``profiler.reports.lines_text``
formats them as ``lines.txt``.

Reading the figures: line_profiler's tracer runs on every line event, so Python lines are
inflated (~1.6x measured on ``BaseSession._run``) while time spent inside native calls is not;
shares of Python lines are therefore overstated. A statement spanning several source lines can
report more hits than it ran (Python 3.11 emits a line event again when execution comes back to
its first line), so compare µs per step, not hits, across lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from profiler.model import LineStat


def _groups(lines: Iterable[LineStat]) -> dict[tuple[str, str], list[LineStat]]:
    groups: dict[tuple[str, str], list[LineStat]] = {}
    for ls in lines:
        groups.setdefault((ls.file, ls.function), []).append(ls)
    return groups


def tables(lines: Sequence[LineStat], steps: int) -> list[dict[str, Any]]:
    """Per function, its lines sorted by total time, as plain JSON types.

    Args:
        lines: the collected rows.
        steps: training steps the profiler was enabled for (to express µs per step).

    Returns:
        One entry per function, the most expensive function first: ``function``, ``file``,
        ``total_ms``, ``us_per_step`` and ``rows`` (``line``, ``hits``, ``us_per_hit``,
        ``us_per_step``, ``total_ms``, ``share`` of the function's total, ``source``).
    """
    out: list[dict[str, Any]] = []
    for (file, function), rows in _groups(lines).items():
        total = sum(r.total_ns for r in rows)
        ranked = sorted(rows, key=lambda r: (-r.total_ns, r.line))
        out.append(
            {
                "function": function,
                "file": file,
                "total_ms": round(total / 1e6, 3),
                "us_per_step": round(total / 1e3 / steps, 3) if steps else None,
                "rows": [
                    {
                        "line": r.line,
                        "hits": r.hits,
                        "us_per_hit": round(r.total_ns / 1e3 / r.hits, 3) if r.hits else None,
                        "us_per_step": round(r.total_ns / 1e3 / steps, 3) if steps else None,
                        "total_ms": round(r.total_ns / 1e6, 3),
                        "share": round(r.total_ns / total, 4) if total else None,
                        "source": r.source.strip(),
                    }
                    for r in ranked
                ],
            }
        )
    out.sort(key=lambda t: -t["total_ms"])
    return out
