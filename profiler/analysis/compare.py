"""``python -m profiler compare A B``: why is A slower than B, by category.

Place in the pipeline: a consumer of finished runs' ``summary.json`` (it never writes into a
run). A and B name a workload of a run: ``WORKLOAD`` (in ``--run``, default ``runs/latest``),
``RUN`` (every workload the two runs share) or ``RUN:WORKLOAD``. The comparison is the
difference of the two typical steps' attributions, in µs per training step, largest first, and
beside it each side's memory per step (``memory``: growth after the warm-up with its interval,
resident at the last step and at the peak; "not measured" where a side has none).
With ``fail_above_pct`` the document also holds the regression gate (``regression.gate``): did
B's typical step grow from A's by more than that, beyond the measurement's interval?
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profiler.analysis import regression
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
    """``run``'s ``summary.json``, read and validated as ``report`` reads it (``summary.load``).

    Raises:
        CompareError: one line: it is missing, unreadable or not a valid summary.
    """
    from profiler.reports import summary  # lazy: the summary module imports the analysis

    path = run / "summary.json"
    try:
        return summary.load(path)
    except FileNotFoundError:
        raise CompareError(f"{path} does not exist: is {run} a run folder?") from None
    except IsADirectoryError:
        raise CompareError(f"{path} is a folder, not a run's summary") from None
    except OSError as exc:
        raise CompareError(f"cannot read {path}: {exc.strerror or exc}") from None
    except summary.SummaryError as exc:
        raise CompareError(f"{path}: {exc}") from None


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
        "memory": memory(a, b),
    }


def _size(b: float) -> str:
    """Bytes in words, as the run's memory line writes them (binary units)."""
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if abs(b) >= size:
            return f"{b / size:,.1f} {unit}"
    return f"{b:,.0f} bytes"


def _memory_side(w: dict[str, Any]) -> dict[str, Any] | None:
    """One side's memory figures (the summary's ``memory``), None where not measured."""
    m = w.get("memory")
    if not m:
        return None
    return {
        "growth_bytes_per_step": m.get("growth_bytes_per_step"),
        "growth_interval": m.get("growth_interval"),
        "grows": bool(m.get("grows")),
        "last_mb": m["last_mb"],
        "peak_mb": m["peak_mb"],
    }


def _growth_words(m: dict[str, Any]) -> str:
    g, iv = m["growth_bytes_per_step"], m["growth_interval"]
    if g is None or not iv:
        return "growth per step not measured"
    span = f"95%: {_size(iv[0])} to {_size(iv[1])}"
    if m["grows"]:
        return f"grows by {_size(g)} a step ({span})"
    return f"no growth per step measured ({span})"


def memory(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """A's and B's memory per step: each side's growth after the warm-up with its 95% interval,
    resident MB at the last step and at the peak ("not measured" where a side has none); where
    both have a growth, A's minus B's with a conservative interval (A's low end minus B's high
    end to A's high end minus B's low end: never narrower than the two together)."""
    ma, mb = _memory_side(a), _memory_side(b)
    diff = interval = None
    if ma and mb and ma["growth_interval"] and mb["growth_interval"]:
        diff = ma["growth_bytes_per_step"] - mb["growth_bytes_per_step"]
        (la, ha), (lb, hb) = ma["growth_interval"], mb["growth_interval"]
        interval = [round(la - hb, 1), round(ha - lb, 1)]

    def words(label: str, m: dict[str, Any] | None) -> str:
        if m is None:
            return f"{label}: not measured"
        return (
            f"{label} {_growth_words(m)}, {m['last_mb']:,.0f} MB resident at its last step "
            f"(peak {m['peak_mb']:,.0f} MB)"
        )

    if ma is None and mb is None:
        sentence = "Memory per step: not measured on either side."
    else:
        label_a, label_b = f"A ({a['label']})", f"B ({b['label']})"
        sentence = f"Memory per step: {words(label_a, ma)}; {words(label_b, mb)}"
        if diff is not None and interval is not None:
            span = f"95%: {_size(interval[0])} to {_size(interval[1])}"
            if interval[0] > 0 or interval[1] < 0:
                more = "more" if diff > 0 else "less"
                sentence += f"; A grows {_size(abs(diff))} a step {more} than B ({span})"
            else:
                sentence += f"; the growths per step do not differ measurably (A − B {span})"
        sentence += "."
    return {
        "a": ma,
        "b": mb,
        "growth_difference_bytes_per_step": round(diff, 1) if diff is not None else None,
        "growth_difference_interval": interval,
        "sentence": sentence,
    }


def compare(
    a_spec: str, b_spec: str, default_run: Path, fail_above_pct: float | None = None
) -> dict[str, Any]:
    """The compare document for two specs (see the module docstring); with ``fail_above_pct``,
    its ``gate`` too."""
    a_run, a_name = resolve(a_spec, default_run)
    b_run, b_name = resolve(b_spec, default_run)
    a_doc = load_summary(a_run)
    # One run on both sides (two of its workloads, or a run against itself) is read once.
    same = a_run.resolve() == b_run.resolve()
    b_doc = a_doc if same else load_summary(b_run)
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
    entries = [(_entry(a_doc, an, a_run), _entry(b_doc, bn, b_run)) for an, bn in pairs]
    doc: dict[str, Any] = {
        "schema": "compare/1",
        "comparisons": [one(a_doc, a, b_doc, b) for a, b in entries],
    }
    if fail_above_pct is not None:
        doc["gate"] = regression.gate(entries, fail_above_pct)
    return doc
