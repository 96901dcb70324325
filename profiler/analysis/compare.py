"""``python -m profiler compare A B``: why is A slower than B, by category.

Place in the pipeline: a consumer of finished runs' ``summary.json`` (it never writes into a
run). A and B name a workload of a run: ``WORKLOAD`` (in ``--run``, default ``runs/latest``),
``RUN`` (every workload the two runs share) or ``RUN:WORKLOAD``. The comparison is the
difference of the two typical steps' attributions, in µs per training step, largest first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from profiler.model import CATEGORIES

LABELS = {
    "compute": "compute",
    "dispatch": "dispatch",
    "feed_fetch": "feed/fetch",
    "python": "Python",
    "tracing": "tracing",
    "communication": "communication",
    "other": "other",
}


class CompareError(ValueError):
    """A or B does not name a run or a workload with an attribution (a user mistake)."""


def load_summary(run: Path) -> dict[str, Any]:
    path = run / "summary.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CompareError(f"{path} does not exist: is {run} a run folder?") from None
    except (OSError, ValueError) as exc:
        raise CompareError(f"cannot read {path}: {exc}") from None


def _entry(doc: dict[str, Any], name: str, run: Path) -> dict[str, Any]:
    for w in doc.get("workloads", []):
        if name in (w["name"], w["slug"], w["label"]):
            if not w.get("attribution"):
                raise CompareError(f"{name} in {run} has no attribution (status {w['status']})")
            return w
    names = ", ".join(w["name"] for w in doc.get("workloads", []))
    raise CompareError(f"no workload {name!r} in {run}; it has: {names}")


def resolve(spec: str, default_run: Path) -> tuple[Path, str | None]:
    """(run folder, workload or None) named by ``spec``."""
    run, sep, name = spec.rpartition(":")
    if sep and Path(run).is_dir():
        return Path(run), name
    if Path(spec).is_dir():
        return Path(spec), None
    return default_run, spec


def one(a_doc: dict, a: dict, b_doc: dict, b: dict) -> dict[str, Any]:
    """The comparison of workload ``a`` (of run ``a_doc``) with ``b``."""
    at, bt = a["attribution"], b["attribution"]
    a_step, b_step = at["reference_us"], bt["reference_us"]
    # A category one side did not measure has no difference (unknown is not zero).
    # A run of an older schema lacks a newer category (communication): not measured there.
    ta, tb = at["typical_us"], bt["typical_us"]
    diff = {
        c: (ta[c] - tb[c] if ta.get(c) is not None and tb.get(c) is not None else None)
        for c in CATEGORIES
    }
    ratio = a_step / b_step if b_step else None
    order = sorted(CATEGORIES, key=lambda c: -abs(diff[c] or 0.0))
    terms = [
        f"{d:+,.1f} µs {LABELS[c]}" for c in order if (d := diff[c]) is not None and abs(d) >= 0.05
    ]
    unknown = [LABELS[c] for c in order if diff[c] is None]
    if unknown:
        terms.append(f"{', '.join(unknown)} not measured on both sides")
    if ratio is None:
        verdict = f"{a['label']} vs {b['label']}"
    elif ratio >= 1:
        verdict = f"{a['label']} is {ratio:,.1f}× slower than {b['label']}"
    else:
        verdict = f"{a['label']} is {1 / ratio:,.1f}× faster than {b['label']}"
    sentence = f"{verdict} ({a_step:,.1f} vs {b_step:,.1f} µs per step): " + ", ".join(terms)

    def side(doc: dict, w: dict) -> dict[str, Any]:
        return {
            "run": doc["run"]["id"],
            "workload": w["name"],
            "label": w["label"],
            "step_us": w["attribution"]["reference_us"],
            "typical_us": w["attribution"]["typical_us"],
            "flops_per_step": (w.get("work") or {}).get("flops_per_step"),
            "method": w["attribution"]["method"],
        }

    return {
        "a": side(a_doc, a),
        "b": side(b_doc, b),
        "ratio": ratio,
        "difference_us": diff,
        "order": order,
        "sentence": sentence,
    }


def compare(a_spec: str, b_spec: str, default_run: Path) -> dict[str, Any]:
    """The compare document for two specs (see the module docstring)."""
    a_run, a_name = resolve(a_spec, default_run)
    b_run, b_name = resolve(b_spec, default_run)
    a_doc, b_doc = load_summary(a_run), load_summary(b_run)
    if a_name is None and b_name is None:
        b_names = {w["name"] for w in b_doc.get("workloads", [])}
        pairs = [
            (w["name"], w["name"])
            for w in a_doc.get("workloads", [])
            if w["name"] in b_names and w.get("attribution")
        ]
        if not pairs:
            raise CompareError(f"{a_run} and {b_run} share no attributed workload")
    elif a_name is None or b_name is None:
        raise CompareError("name a workload on both sides, or two runs")
    else:
        pairs = [(a_name, b_name)]
    out = [
        one(a_doc, _entry(a_doc, an, a_run), b_doc, _entry(b_doc, bn, b_run)) for an, bn in pairs
    ]
    return {"schema": "compare/1", "comparisons": out}
