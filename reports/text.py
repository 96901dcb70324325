"""The terminal summary: a fixed-width table of the view model's workload rows."""

from __future__ import annotations

from typing import Any

from profiler.analysis.compare import LABELS


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


def comparison(doc: dict[str, Any]) -> str:
    """The terminal rendering: the sentence, then a table of both sides by category."""
    lines = []
    for c in doc["comparisons"]:
        a, b = c["a"], c["b"]
        lines.append(c["sentence"])
        head = f"  {'µs per step':12s} {a['label'][:18]:>18s} {b['label'][:18]:>18s} {'A − B':>10s}"
        lines.append(head)
        for cat in c["order"]:
            lines.append(
                f"  {LABELS[cat]:12s} {a['typical_us'][cat]:18,.1f} {b['typical_us'][cat]:18,.1f}"
                f" {c['difference_us'][cat]:+10,.1f}"
            )
        lines.append(
            f"  {'step':12s} {a['step_us']:18,.1f} {b['step_us']:18,.1f} "
            f"{a['step_us'] - b['step_us']:+10,.1f}"
        )
        if a["run"] != b["run"]:
            lines.append(f"  runs: A {a['run']}, B {b['run']}")
        lines.append("")
    return "\n".join(lines).rstrip()
