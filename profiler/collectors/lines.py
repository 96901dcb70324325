"""line_profiler statistics -> model ``LineStat`` rows, per-function tables and a text listing.

Place in the pipeline: the lines phase (``profiler.phases.lines``) runs ``line_profiler`` over a
window of steps and hands its ``LineStats`` here; this collector converts them at the edge into
``LineStat`` objects (``profiler.model``: integer nanoseconds, source text attached), and builds
the phase's tables (per function, sorted by total time, with µs per hit, µs per step and share of
the function's total) and the ``lines.txt`` listing. ``tables`` and ``render_text`` are pure.

Reading the figures: line_profiler's tracer runs on every line event, so Python lines are
inflated (~1.6x measured on ``BaseSession._run``) while time spent inside native calls is not;
shares of Python lines are therefore overstated. A statement spanning several source lines can
report more hits than it ran (Python 3.11 emits a line event again when execution comes back to
its first line), so compare µs per step, not hits, across lines.
"""

from __future__ import annotations

import linecache
from collections.abc import Iterable, Sequence
from typing import Any

from profiler.model import LineStat


def from_line_profiler(stats: Any) -> tuple[LineStat, ...]:
    """Convert ``line_profiler.LineStats`` (``timings`` keyed by (file, first line, function),
    values ``[(line, hits, time in units)]``, ``unit`` in seconds) to ``LineStat`` rows.

    Rows come grouped by function, in source order; lines never hit are absent.
    """
    unit_ns = float(stats.unit) * 1e9
    out: list[LineStat] = []
    for (file, _first, function), rows in sorted(stats.timings.items()):
        for line, hits, total in sorted(rows):
            out.append(
                LineStat(
                    file=str(file),
                    line=int(line),
                    function=str(function),
                    hits=int(hits),
                    total_ns=round(total * unit_ns),
                    source=linecache.getline(str(file), int(line)).rstrip(),
                )
            )
    return tuple(out)


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


def render_text(tables_: Sequence[dict[str, Any]], steps: int, notes: Sequence[str]) -> str:
    """``lines.txt``: each function's lines in source order with their figures and shares."""
    out = [f"line_profiler over {steps} steps (µs per step = total / {steps})", *notes, ""]
    for t in tables_:
        out.append(f"{t['function']}  ({t['file']})")
        out.append(f"  total {t['total_ms']:.3f} ms, {t['us_per_step']} µs per step")
        out.append(f"  {'line':>6} {'hits':>9} {'µs/hit':>9} {'µs/step':>9} {'share':>7}  source")
        top = max(t["rows"], key=lambda r: r["total_ms"])["line"] if t["rows"] else None
        for r in sorted(t["rows"], key=lambda r: r["line"]):
            mark = "*" if r["line"] == top else " "
            per_hit = "" if r["us_per_hit"] is None else f"{r['us_per_hit']:.3f}"
            per_step = "" if r["us_per_step"] is None else f"{r['us_per_step']:.3f}"
            share = "" if r["share"] is None else f"{100 * r['share']:.1f}%"
            out.append(
                f"{mark} {r['line']:>6} {r['hits']:>9} {per_hit:>9} {per_step:>9} {share:>7}  "
                f"{r['source']}"
            )
        out.append("")
    return "\n".join(out)
