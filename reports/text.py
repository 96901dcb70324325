"""The terminal summary: a fixed-width table of the view model's workload rows."""

from __future__ import annotations

from typing import Any


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def table(vm: dict[str, Any]) -> str:
    """Workload, status, µs/step (median, p10-p90), ratio to the fastest, final loss."""
    header = ("workload", "status", "µs/step", "p10–p90 µs", "× fastest", "final loss")
    rows = [header]
    for r in vm["workloads"]:
        spread = f"{r['p10_us']:.1f}–{r['p90_us']:.1f}" if r["p10_us"] is not None else "-"
        rows.append(
            (
                r["label"],
                r["status"],
                _num(r["median_us"], ".1f"),
                spread,
                _num(r["ratio"], ".2f"),
                _num(r["final_loss"], ".4g"),
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    lines = []
    for j, row in enumerate(rows):
        cells = [
            str(c).ljust(widths[i]) if i < 2 else str(c).rjust(widths[i]) for i, c in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    for f in vm["failed"]:
        last = f["error"].strip().splitlines()[-1] if f["error"].strip() else ""
        lines.append(f"{f['label']}: {f['status']}: {last}")
    return "\n".join(lines)
