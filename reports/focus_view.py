"""The first screen of a run of the user's own code: where its step goes, and what to change.

Place in the pipeline: part of the view model (``profiler.reports.viewmodel``), computed from
the summary. For every workload that is a user's script (or, in a run without the case study's
questions, every workload), ``focus`` gives: the step's time in words (median and mean, the
slow steps a median hides), its split into categories (largest first, "not measured" where no
phase measured one, with the phase that would), the costliest findings with their fixes, and
the phases that got no steps. The terminal (``profiler.reports.text.answer``) and the HTML page
show the same figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from profiler.model import CATEGORIES

#: Findings shown per workload on the first screen.
TOP_FINDINGS = 3

LABELS = {
    "compute": "compute (kernels)",
    "dispatch": "dispatch",
    "feed_fetch": "feed/fetch",
    "python": "Python",
    "tracing": "tracing",
    "communication": "communication",
    "other": "other (unexplained)",
}


def duration(us: float | None) -> str:
    """``us`` for people: ``14.0 µs``, ``1.25 ms``, ``2.10 s``."""
    if us is None:
        return "–"
    if us >= 1e6:
        return f"{us / 1e6:,.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:,.2f} ms"
    return f"{us:,.1f} µs"


def _split(att: Mapping[str, Any]) -> list[dict[str, Any]]:
    typical, share = att["typical_us"], att["share"]
    missing = att.get("not_measured") or {}
    rows = [
        {
            "category": c,
            "label": LABELS[c],
            "us": typical[c],
            "share": share[c],
            "measured": c not in missing,
            "why": missing.get(c, ""),
        }
        for c in CATEGORIES
    ]
    return sorted(rows, key=lambda r: (not r["measured"], -(r["us"] or 0.0)))


def _sentence(w: Mapping[str, Any]) -> str:
    st, dist = w.get("step_time") or {}, w.get("distribution") or {}
    median = st.get("median_us")
    steps = st.get("steps")
    text = f"A step of {w['label']} takes {duration(median)} (the median of {steps} timed steps"
    mean = dist.get("mean_us")
    if mean and median and mean > 1.2 * median and dist.get("outliers"):
        text += (
            f"; the mean is {duration(mean)}: {dist['outliers']} "
            f"step{'s' if dist['outliers'] != 1 else ''} over "
            f"{dist['outlier_factor']:g}× the median hold {100 * dist['outlier_share']:.0f}% "
            "of the time"
        )
    return text + ")."


def _budget(script: Mapping[str, Any]) -> str:
    """Where the script's wall time went around its steps, when the steps are not most of it."""
    t = script.get("time") or {}
    wall = float(script.get("wall_s") or 0.0)
    steps_s = t.get("steps_s")
    if not wall or steps_s is None or steps_s >= 0.8 * wall:
        return ""
    n = script.get("steps") or 0
    return (
        f"The script ran {wall:,.1f} s: {t['before_s']:,.1f} s before its first step (imports, "
        f"data, model), {steps_s:,.1f} s from its first step to its last ({n:,} step"
        f"{'s' if n != 1 else ''}), {t['after_s']:,.1f} s after it."
    )


#: A block of steps this many times slower or faster than the timed window gets a note.
BLOCK_RATIO = 1.5


def _blocks_note(script: Mapping[str, Any], median_us: float | None) -> str:
    """When the run's last block of steps (an epoch of fit, a tenth of the run) ran at another
    speed than the timed window: the windows measured steps unlike the rest of the run."""
    every = script.get("blocks") or []
    # Blocks inside an instrumented window run slower for it: only the others compare.
    rows = [every[0], *(r for r in every[1:] if not r.get("instrumented"))] if every else []
    if len(rows) < 2 or not median_us:
        return ""
    last = rows[-1]
    ratio = last["median_us"] / median_us
    if 1 / BLOCK_RATIO < ratio < BLOCK_RATIO:
        return ""
    what = "epoch" if (script.get("fit") or {}).get("steps_per_epoch") else "tenth of the run"
    speed = f"{1 / ratio:.1f}× faster" if ratio < 1 else f"{ratio:.1f}× slower"
    first = rows[0]
    return (
        f"The steps changed speed during the run: the last uninstrumented {what}'s (steps "
        f"{last['from_step']:,}–{last['to_step']:,}) took a median {duration(last['median_us'])}, "
        f"{speed} than the timed window's {duration(median_us)} (the first {what}'s: "
        f"{duration(first['median_us'])}); the findings below describe the timed steps."
    )


def _whatif_row(x: Mapping[str, Any]) -> dict[str, Any]:
    """One what-if in words: what it changed, what it saved, against the prediction."""
    m, p, res = x["measured_saving_us"], x["predicted_saving_us"], x["resolution_us"]
    share = x.get("removes_share", 1.0)
    removes = ", ".join(x["removes"])
    if share < 1:
        removes = f"{share:.0%} of {removes}"
    if x["status"] == "partial" and m is None:
        text = "not measured: the script ended during its blocks"
    elif x["status"] == "failed" or m is None:
        text = f"could not be applied: {x['error'] or 'no steps measured'}"
    else:
        speed = (
            f", {x['baseline_us'] / x['variant_us']:.1f}× faster"
            if x["variant_us"] and x["baseline_us"] and m > 0
            else ""
        )
        text = (
            f"{duration(abs(m))}{' ±' + duration(res) if res is not None else ''} "
            f"{'less' if m >= 0 else 'more'} per step ({duration(x['baseline_us'])} → "
            f"{duration(x['variant_us'])}{speed}); "
            + (
                f"predicted {duration(p)} ({100 * (x.get('predicted_share') or 0):.0f}% of the "
                f"step: {removes}): {x['verdict']}"
                if p is not None
                else "not predicted (a category it removes was not measured)"
            )
        )
    kept = "results kept" if x["keeps_results"] else "results may change"
    check = x.get("results_check") or ""
    checked = f"checked: {check}" if check else "not compared on this loop"
    return {
        "title": x["title"],
        "text": text,
        "verdict": x["verdict"],
        "results": f"{kept}: {x['results_note']}; {checked}",
        "blocks": f"{x['pairs']} pairs of {x['block_steps']}-step blocks",
    }


def _biggest(split: list[dict[str, Any]]) -> str:
    measured = [r for r in split if r["measured"] and r["category"] != "other" and r["us"]]
    if not measured:
        return "No phase measured what the step is made of."
    top = measured[0]
    return f"Most of it is {top['label']}: {duration(top['us'])} ({100 * top['share']:.0f}%)."


def focus(summary: Mapping[str, Any], answered: bool) -> list[dict[str, Any]]:
    """The first-screen cards (see the module docstring); ``answered``: the case study's
    questions are answered on this page already (then only scripts get a card)."""
    findings = list(summary.get("diagnoses") or [])
    out = []
    for w in summary.get("workloads", []):
        script = w.get("script") or {}
        if answered and not script:
            continue
        att = w.get("attribution")
        card: dict[str, Any] = {
            "label": w["label"],
            "slug": w["slug"],
            "status": w["status"],
            "message": script.get("message", ""),
            "missed": list(script.get("missed") or []),
            "sentence": "",
            "budget": _budget(script),
            "blocks": "",
            "biggest": "",
            "split": [],
            "overhead_share": None,
            "findings": [],
            "whatifs": [_whatif_row(x) for x in w.get("whatif") or []],
        }
        if att and w.get("step_time"):
            card["sentence"] = _sentence(w)
            card["blocks"] = _blocks_note(script, (w.get("step_time") or {}).get("median_us"))
            card["split"] = _split(att)
            card["biggest"] = _biggest(card["split"])
            card["overhead_share"] = att.get("overhead_share")
        card["findings"] = [
            {"message": d["message"], "fix": d["fix"], "cost_us": d.get("cost_us")}
            for d in findings
            if d.get("name") == w["name"]
        ][:TOP_FINDINGS]
        out.append(card)
    return out
