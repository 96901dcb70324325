"""``lines.txt``: a lines phase's tables as text, each function's lines in source order.

Place in the pipeline: a renderer of ``profiler.analysis.lines.tables``; written into the
workload's folder after the run (and again by ``profiler report RUN``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TEXT_FILE = "lines.txt"


def render(tables_: Sequence[dict[str, Any]], steps: int, notes: Sequence[str]) -> str:
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
