"""line_profiler statistics -> model ``LineStat`` rows, per-function tables and a text listing.

Place in the pipeline: the lines phase (``profiler.capture.phases.lines``) runs ``line_profiler``
over a window of steps and hands its ``LineStats`` here; this collector converts them at the edge
into ``LineStat`` objects (``profiler.model``: integer nanoseconds, source text attached). The
tables (``profiler.analysis.lines``) and the ``lines.txt`` listing (``profiler.reports.lines_text``)
are made from these rows after the run.

Reading the figures: line_profiler's tracer runs on every line event, so Python lines are
inflated (~1.6x measured on ``BaseSession._run``) while time spent inside native calls is not;
shares of Python lines are therefore overstated. A statement spanning several source lines can
report more hits than it ran (Python 3.11 emits a line event again when execution comes back to
its first line), so compare µs per step, not hits, across lines.
"""

from __future__ import annotations

import linecache
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
