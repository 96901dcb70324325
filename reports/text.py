"""The terminal summary: a fixed-width table of the view model's workload rows."""

from __future__ import annotations

from typing import Any

from profiler.analysis.compare import LABELS
from profiler.reports.focus_view import duration


def _num(v: float | None, fmt: str, width: int = 0, missing: str = "-") -> str:
    """``v`` formatted, or ``missing`` right-aligned to ``width``."""
    return missing.rjust(width) if v is None else format(v, fmt)


def table(vm: dict[str, Any]) -> str:
    """Workload, status, µs/step (median, p10-p90), ratio to the fastest, final loss."""
    header: tuple[str, ...] = ("workload", "status", "µs/step", "p10–p90 µs", "× fastest")
    # A user's script reports no loss to the profiler: no column of dashes for it (a new user
    # read "final loss -" as the profiler failing to see the loss the script prints).
    losses = any(r["final_loss"] is not None for r in vm["workloads"])
    if losses:
        header += ("final loss",)
    rows = [header]
    for r in vm["workloads"]:
        spread = f"{r['p10_us']:.1f}–{r['p90_us']:.1f}" if r["p10_us"] is not None else "-"
        row: tuple[str, ...] = (
            r["label"],
            r["status"],
            _num(r["median_us"], ".1f"),
            spread,
            _num(r["ratio"], ".2f"),
        )
        rows.append(row + ((_num(r["final_loss"], ".4g"),) if losses else ()))
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
        lines.append(f"{f['label']}: {f['status']}: {headline(f['error'])}")
    return "\n".join(lines)


def headline(error: str) -> str:
    """An error's one line for the terminal: its first line, which the runner and the script's
    process write as a sentence ("the script raised X after N steps:", "killed by signal 11
    ..."), unless that is a traceback's (a built-in workload's error is a traceback's tail,
    whose last line is the exception)."""
    lines = [ln for ln in error.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    first = lines[0]
    if first.startswith(("Traceback", " ", "\t")):
        return lines[-1].strip()
    return first.strip().rstrip(":")


def answer(vm: dict[str, Any]) -> str:
    """Under the table: for each workload of the user's own code, where its step goes (the
    split, largest first) and the costliest findings with their fixes."""
    out = []
    for card in vm.get("focus") or []:
        if not card["split"]:
            continue
        if card.get("verdict"):
            out.append(card["verdict"])
        if card.get("budget"):
            out.append(card["budget"])
        out.append(card["sentence"])
        parts = []
        for r in card["split"]:
            if not r["measured"]:
                parts.append(f"{r['label']} not measured ({r['why']})")
            elif r["us"]:
                pm = (
                    f" ±{max(round(r['pm']), 1)}"
                    if r.get("pm") is not None and r["pm"] >= 0.5
                    else ""
                )
                gc = f", {r['detail']}" if r.get("detail") else ""
                parts.append(f"{r['label']} {duration(r['us'])} ({100 * r['share']:.0f}%{pm}{gc})")
        out.append("  " + "; ".join(parts))
        if card.get("samples"):
            out.append("  " + card["samples"])
        if card.get("drift"):
            out.append("  " + card["drift"])
        if card.get("memory"):
            out.append(card["memory"])
            out.extend(f"  {line}" for line in card.get("memory_peak") or [])
        if card.get("blocks"):
            out.append(card["blocks"])
        if card.get("whatifs"):
            out.append("what would fix it, measured on your loop:")
            for x in card["whatifs"]:
                out.append(f"  - {x['title']}: {x['text']}; {x['results']} ({x['blocks']})")
        if card.get("not_fixes"):
            out.append(
                "measured on your loop, not shown to be a fix here (slower, or within the "
                "machine's noise):"
            )
            for x in card["not_fixes"]:
                out.append(f"  - {x['title']}: {x['text']} ({x['blocks']})")
        if card.get("not_measured"):
            out.append("tried on your loop, not measured:")
            for x in card["not_measured"]:
                out.append(f"  - {x['title']}: {x['text']} ({x['blocks']})")
        if card["findings"]:
            out.append("what to change, costliest first:")
            for i, d in enumerate(card["findings"], 1):
                out.append(f"  {i}. {d['message']}")
                out.append(f"     fix: {d['fix_text']}")
        elif card["overhead_share"] is not None:
            # Beside a measured fix, no finding is not no answer (a numpy RL script's one
            # BLAS thread, 5.1x faster, sat above "no finding fired").
            out.append(
                "  no finding fired beyond the measured fixes above."
                if card.get("whatifs")
                else "  no finding fired on this run's figures."
            )
        if card.get("runs"):
            out.append(card["runs"])
        out.append("")
    return "\n".join(out).rstrip()


def comparison(doc: dict[str, Any]) -> str:
    """The terminal rendering: the sentence, then a table of both sides by category, then their
    memory per step (growth with its interval, last and peak resident)."""
    lines = []
    for c in doc["comparisons"]:
        a, b = c["a"], c["b"]
        lines.append(c["sentence"])
        head = f"  {'µs per step':12s} {a['label'][:18]:>18s} {b['label'][:18]:>18s} {'A − B':>10s}"
        lines.append(head)
        for cat in c["order"]:
            lines.append(
                f"  {LABELS[cat]:12s} {_num(a['typical_us'][cat], '18,.1f', 18, 'n/m')}"
                f" {_num(b['typical_us'][cat], '18,.1f', 18, 'n/m')}"
                f" {_num(c['difference_us'][cat], '+10,.1f', 10, 'n/m')}"
            )
        lines.append(
            f"  {'step':12s} {a['step_us']:18,.1f} {b['step_us']:18,.1f} "
            f"{a['step_us'] - b['step_us']:+10,.1f}"
        )
        if c.get("memory"):
            lines.append(f"  {c['memory']['sentence']}")
        if a["run"] != b["run"]:
            lines.append(f"  runs: A {a['run']}, B {b['run']}")
        lines.append("")
    if doc.get("gate"):
        lines.extend(gate(doc["gate"]))
    return "\n".join(lines).rstrip()


def _pct(v: float) -> str:
    return f"{v:+,.1f}%"


def gate(g: dict[str, Any]) -> list[str]:
    """``compare --fail-above``: one line per workload (A's and B's typical step, the change
    with its interval, the verdict), then the gate's outcome."""
    pct = f"{g['fail_above_pct']:g}%"
    verdicts = {
        "regressed": f"regressed (more than {pct} slower)",
        "inconclusive": f"inconclusive (above {pct}, but its interval reaches below)",
        "within": f"within {pct}",
        "faster": "faster",
    }
    lines = [f"gate --fail-above {g['fail_above_pct']:g}: B's typical step against A's"]
    for c in g["workloads"]:
        verdict = verdicts[c["verdict"]]
        if c["change_pct"] is None:
            change, verdict = "change unknown (a step of 0 µs)", "inconclusive"
        elif c["low_pct"] is None:
            change = f"{_pct(c['change_pct'])} (no interval: no step spread in a summary)"
            if c["verdict"] == "inconclusive":
                verdict = f"inconclusive (above {pct}, no interval)"
        else:
            interval = f"{100 * g['confidence']:.0f}% interval {_pct(c['low_pct'])} to "
            change = f"{_pct(c['change_pct'])} ({interval}{_pct(c['high_pct'])})"
        lines.append(
            f"  {c['workload']}: A {c['a_us']:,.1f} µs, B {c['b_us']:,.1f} µs, {change}: {verdict}"
        )
    bad = [c["workload"] for c in g["workloads"] if c["verdict"] == "regressed"]
    lines.append(f"gate: failed ({', '.join(bad)} regressed)" if bad else "gate: passed")
    return lines
