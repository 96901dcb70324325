"""``summary.json``: the run's results in one versioned document.

Place in the pipeline: traces + analysis -> **summary** -> reports. Everything a report shows is
in the summary (or in an artefact it names), so ``python -m profiler report RUN`` re-renders from
it alone. The document follows ``reports/schema/summary.schema.json``; ``validate`` checks it
and every writer calls it. Additive changes add properties and bump ``SCHEMA_VERSION``.

Units: times in the summary are microseconds (``*_us``) or milliseconds (``*_ms``) as floats,
converted from the model's integer nanoseconds here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from profiler.analysis import attribution, before_steps, gc, memory, sampling, stacks, stats
from profiler.analysis.attribution import Attribution
from profiler.analysis.run import Check, RunAnalysis, WorkloadAnalysis
from profiler.capture.collectors.pyspy import frame_label, short_file
from profiler.model import (
    CATEGORIES,
    OK,
    MetricPoint,
    PhaseRecord,
    WorkDecl,
    WorkloadTrace,
    median_ns,
    to_jsonable,
)
from profiler.model.records import LinesData, SampledData
from profiler.version import __version__

#: 1: the foundation; 2 (additive): phase data, sampling, attribution, experiments, diagnoses,
#: training efficiency and script runs; 3 (additive): each phase's data is its typed record in
#: full (fields a record leaves unset are null, no longer absent), pairs carry their id;
#: 4 (additive): what-ifs' removes_share and group, experiments.seed_whatifs; 5: the
#: ``communication`` category (a required key of every category map), a workload's ``worker``,
#: the run's ``job``; 6 (additive): a script's memory names what grows; 7 (additive): what held
#: the peak (``memory.peak``).
SCHEMA_VERSION = 20
TOOL_NAME = "training-loop-profiler"


class SummaryError(ValueError):
    """A summary does not match the schema."""


@dataclass
class RunInfo:
    """Facts about the run as a whole."""

    run_id: str
    phases: list[str]
    started: float = field(default_factory=time.time)
    finished: float = 0.0
    status: str = OK
    options: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _us(ns: int | float) -> float:
    return round(ns / 1e3, 3)


def _ms(ns: int | float) -> float:
    return round(ns / 1e6, 3)


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


def _stats_obj(s: stats.StepStats | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "steps": s.steps,
        "median_us": _us(s.median_ns),
        "p10_us": _us(s.p10_ns),
        "p90_us": _us(s.p90_ns),
        "mean_us": _us(s.mean_ns),
        "total_ms": _ms(s.total_ns),
    }


def _distribution_obj(d: stats.Distribution | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {
        "steps": d.steps,
        "median_us": _us(d.median_ns),
        "mean_us": _us(d.mean_ns),
        "p90_us": _us(d.p90_ns),
        "p99_us": _us(d.p99_ns),
        "max_us": _us(d.max_ns),
        "outliers": d.outliers,
        "outlier_factor": stats.OUTLIER_FACTOR,
        "outlier_share": round(d.outlier_share, 4),
        "trend_us_per_100_steps": round(d.trend_ns_per_step * 100 / 1e3, 3),
        "others_cores": round(d.others_cores, 2) if d.others_cores is not None else None,
        "cores": d.cores,
        "wait_share": round(d.wait_share, 4) if d.wait_share is not None else None,
    }


def _work_obj(w: WorkDecl) -> dict[str, Any]:
    return {
        "samples_per_step": w.samples_per_step,
        "updates_per_step": w.updates_per_step,
        "steps_per_epoch": w.steps_per_epoch,
        "units_per_step": w.units_per_step,
        "flops_per_step": w.flops_per_step,
        "bytes_per_step": w.bytes_per_step,
    }


def _loss_obj(trace: WorkloadTrace) -> dict[str, Any]:
    w = trace.work
    points: list[MetricPoint] = [m for m in trace.metrics if m.name == "loss"]

    def point(m: MetricPoint) -> dict[str, Any]:
        done = m.step + 1
        return {
            "step": done,
            "samples": done * w.samples_per_step,
            "updates": done * w.updates_per_step,
            "epoch": (done * w.units_per_step) / w.steps_per_epoch,
            "value": m.value,
        }

    costs = [m.cost_ns for m in points if m.step >= 0]
    return {
        "initial": points[0].value if points else None,
        "final": points[-1].value if points else None,
        "trajectory": [point(m) for m in points],
        "record_cost_us": _us(median_ns(costs)) if costs else None,
    }


def _phase_data(rec: PhaseRecord, wa: WorkloadAnalysis) -> dict[str, Any]:
    """A phase's record as JSON, with what the analysis adds to it (the lines' tables)."""
    data = to_jsonable(rec.data) if rec.data is not None else {}
    if rec.name == "sampled" and isinstance(rec.data, SampledData) and wa.sampling is not None:
        # The samples inside steps (every share's denominator), and a share's 95% interval
        # from that many, at its widest (a share of 50%).
        n = wa.sampling.total
        data["samples_in_steps"] = n
        data["share_interval_pts"] = round(196 * math.sqrt(0.25 / n), 1) if n else None
    if rec.name == "lines" and isinstance(rec.data, LinesData):
        data = {
            "functions": wa.line_tables,
            **data,
            "inflation_vs_warmup": wa.lines_inflation_vs_warmup,
        }
    return data


def _attribution_obj(att: Attribution | None, checks: list[Check]) -> dict[str, Any] | None:
    """The summary's ``attribution`` object (µs per training step, shares, sources)."""
    if att is None:
        return None
    k = att.units_per_step
    totals = attribution.step_totals(att)
    units = len(att.steps)

    def known(values: dict[str, float]) -> dict[str, float | None]:
        # Unknown is not zero: a category no source measured has no figure.
        return {c: (v if att.measured(c) else None) for c, v in values.items()}

    medians = {
        c: median_ns([row[i] for row in att.steps]) / k / 1e3 for i, c in enumerate(CATEGORIES)
    }
    overhead = att.overhead_share
    ref_iv = att.reference_interval_ns

    def us_interval(c: str) -> list[float] | None:
        # The share's interval times the step's (both 95%): conservative, never narrower.
        iv = att.share_interval.get(c)
        if iv is None or ref_iv is None:
            return None
        return [round(iv[0] * ref_iv[0] / 1e3, 3), round(iv[1] * ref_iv[1] / 1e3, 3)]

    return {
        "method": att.method,
        "reference_us": att.reference_ns / 1e3,
        "typical_us": known({c: att.typical[c] / 1e3 for c in CATEGORIES}),
        "share": known({c: round(att.share(c), 5) for c in CATEGORIES}),
        "overhead_share": round(overhead, 5) if overhead is not None else None,
        "not_measured": dict(att.not_measured),
        "mean_us": known({c: totals[c] / units / k / 1e3 for c in CATEGORIES}),
        "median_us": known(medians),
        "window_total_ms": known({c: totals[c] / 1e6 for c in CATEGORIES}),
        "steps": units * k,
        "parts_us": {p: v / 1e3 for p, v in sorted(att.parts.items())},
        "sources": att.sources,
        "notes": list(att.notes),
        "conserved": True,
        "checks": [dataclasses.asdict(c) for c in checks],
        "share_interval": {
            c: list(att.share_interval[c]) if c in att.share_interval else None for c in CATEGORIES
        },
        "typical_interval_us": {c: us_interval(c) for c in CATEGORIES},
        "reference_interval_us": [_us(v) for v in ref_iv] if ref_iv is not None else None,
        "drift_pts": {c: att.drift_pts.get(c) for c in CATEGORIES},
        "interval_method": attribution.INTERVAL_METHOD,
    }


#: A run whose speed varied beyond this ratio (beyond its blocks' own noise) says so.
DRIFT_LARGE = 1.10


def _drift_obj(d: stats.Drift | None, att: Attribution | None) -> dict[str, Any] | None:
    """The summary's ``drift``: a script's uninstrumented blocks (the timed window and the
    reference blocks between the windows), per training step, and how far apart they ran."""
    if d is None:
        return None
    widest = max(att.drift_pts.values(), default=0.0) if att is not None else None
    return {
        "blocks": [
            {
                "label": b.label,
                "repeat": b.repeat,
                "first_step": b.first_step,
                "steps": b.steps,
                "median_us": _us(b.median_ns),
                "interval_us": [_us(b.low_ns), _us(b.high_ns)],
            }
            for b in d.blocks
        ],
        "repeat": d.repeat,
        "ratio": round(d.ratio, 4),
        "interval": [round(d.interval[0], 4), round(d.interval[1], 4)],
        "large": d.interval[0] >= DRIFT_LARGE,
        "share_pts": widest,
        "neighbours": {
            name: {"step_us": _us(n.step_ns), "ratio": round(n.ratio, 4)}
            for name, n in d.neighbours.items()
        },
    }


def _share(n: int, total: int) -> float | None:
    return round(n / total, 4) if total else None


def _sampling_obj(wa: WorkloadAnalysis) -> dict[str, Any] | None:
    """The summary's ``sampling`` object for one workload; None if it had no sampled phase.

    Keys: ``status``, ``reason``, the capture's settings (``rate_hz``, ``native``, ``idle``),
    ``inflation`` (the phase's median step over the timed one), ``inflation_mean`` (mean over
    mean: includes py-spy's pauses, the phase's real cost), ``samples`` (counts: total
    parsed, main thread, inside steps, outside, other threads), ``policy``, ``by_category``
    (samples and share per label; every category listed), ``temporary`` (labels still to
    resolve, with what they hold), ``rules`` (samples per deciding rule), ``top_stacks`` and
    ``top_lines``.
    """
    trace = wa.trace
    rec = trace.phase("sampled") if trace is not None else None
    if rec is None:
        return None
    settings = rec.data if isinstance(rec.data, SampledData) else None
    infl = wa.inflation.get("sampled")
    mean_infl = wa.sampled_mean_inflation
    out: dict[str, Any] = {
        "status": rec.status,
        "reason": rec.reason,
        "rate_hz": settings.rate_hz if settings else None,
        "native": settings.native if settings else None,
        "idle": settings.idle if settings else None,
        "inflation": round(infl, 4) if infl is not None else None,
        "inflation_mean": round(mean_infl, 4) if mean_infl is not None else None,
        "policy": sampling.THREAD_POLICY,
        "samples": None,
        "by_category": {},
        "temporary": {},
        "rules": {},
        "top_stacks": [],
        "top_lines": [],
    }
    a = wa.sampling
    if rec.status != OK or a is None:
        return out
    out["samples"] = {
        "parsed": sum(s.count for s in rec.samples),
        "main_thread": a.total + a.outside_steps,
        "in_steps": a.total,
        "outside_steps": a.outside_steps,
        "other_threads": a.other_threads,
        "scoped_to_steps": a.scoped,
    }
    labels = list(CATEGORIES) + [k for k in stacks.LABELS if k not in CATEGORIES]
    out["by_category"] = {
        k: {"samples": a.by_label.get(k, 0), "share": _share(a.by_label.get(k, 0), a.total)}
        for k in labels
        if k in CATEGORIES or a.by_label.get(k, 0)
    }
    out["temporary"] = {k: v for k, v in stacks.TEMPORARY_LABELS.items() if a.by_label.get(k, 0)}
    out["rules"] = a.by_rule
    out["top_stacks"] = [
        {
            "samples": n,
            "share": _share(n, a.total),
            "category": label,
            "rule": rule,
            "frames": [frame_label(f) for f in frames],
        }
        for n, label, rule, frames in a.top_stacks
    ]
    out["top_lines"] = [
        {
            "file": short_file(file),
            "line": line,
            "function": function,
            "samples": n,
            "share": _share(n, a.total),
            "categories": labels_,
        }
        for (file, line, function), n, labels_ in a.top_lines
    ]
    return out


def workload_summary(
    wa: WorkloadAnalysis, written: Mapping[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """The summary object of one workload (see the schema for every field).

    ``written`` lists, per phase, the files the renderers made from its record (a flame
    graph, ``lines.txt``); they join the phase's own artefacts.
    """
    o = wa.outcome
    spec, trace = o.spec, o.trace
    params = o.params
    entry: dict[str, Any] = {
        "name": spec.name,
        "label": spec.label,
        "slug": o.slug,
        "title": spec.title,
        "seed": spec.seed,
        "framework": spec.framework,
        "status": o.status,
        "error": o.error,
        "wall_s": round(o.wall_ns / 1e9, 3),
        "params": params.as_dict() if params else {},
        "work": None,
        "step_time": None,
        "one_off": None,
        "phases": [],
        "counters": None,
        "loss": None,
        "marker": None,
        "final": {},
    }
    if trace is None:
        return entry
    w = trace.work
    timed_stats = wa.timed
    entry["work"] = _work_obj(w)
    entry["step_time"] = _stats_obj(timed_stats)
    oo = wa.one_off
    entry["one_off"] = {
        "build_ms": _ms(trace.build_ns),
        "warmup_steps": trace.warmup.n_steps * w.units_per_step,
        "warmup_ms": _ms(sum(trace.warmup.durations_ns())),
        "warmup_excess_ms": _ms(oo.warmup_excess_ns) if oo else None,
        "first_step_ms": _ms(trace.warmup.durations_ns()[0]) if trace.warmup.n_steps else None,
        "total_ms": _ms(oo.total_ns) if oo else None,
    }
    for p in trace.phases:
        ps = wa.windows.get(p.name)
        entry["phases"].append(
            {
                "name": p.name,
                "status": p.status,
                "reason": p.reason,
                "steps": ps.steps if ps else 0,
                "median_us": _us(ps.median_ns) if ps else None,
                "inflation": round(wa.inflation[p.name], 4) if p.name in wa.inflation else None,
                "artefacts": [*p.artefacts, *((written or {}).get(p.name, ()))],
                "data": _phase_data(p, wa),
                "missed": p.missed,
                "repeat": p.repeat,
            }
        )
    last_step = max(
        [s.first_step + s.n_steps for p in trace.phases if p.window for s in p.window.segments]
        + [trace.warmup.n_steps]
    )
    entry["counters"] = {
        "steps": last_step * w.units_per_step,
        "samples": last_step * w.samples_per_step,
        "updates": last_step * w.updates_per_step,
        "epochs": (last_step * w.units_per_step) / w.steps_per_epoch,
    }
    entry["loss"] = _loss_obj(trace)
    entry["marker"] = {
        "cost_ns": trace.marker_cost_ns,
        "share_of_step": (
            round(trace.marker_cost_ns / timed_stats.median_ns, 5)
            if timed_stats and timed_stats.median_ns
            else None
        ),
    }
    entry["final"] = {k: float(v) for k, v in trace.final.items()}
    entry["distribution"] = _distribution_obj(wa.distribution)
    if wa.epochs is not None:
        entry["epochs"] = {
            "steps_per_epoch": wa.epochs.steps_per_epoch,
            "boundaries": wa.epochs.boundaries,
            "excess_us": _us(wa.epochs.excess_ns),
            "batch_us": _us(wa.epochs.batch_ns),
            "share": round(wa.epochs.share, 4),
        }
    if wa.series is not None:
        entry["series"] = {
            "step": list(wa.series.step),
            "us": [_us(d) for d in wa.series.dur_ns],
            "window": list(wa.series.window),
        }
    if wa.whatifs:
        entry["whatif"] = [_whatif_obj(w) for w in wa.whatifs]
    entry["sampling"] = _sampling_obj(wa)
    entry["attribution"] = _attribution_obj(wa.attribution, wa.checks)
    if wa.drift is not None:
        entry["drift"] = _drift_obj(wa.drift, wa.attribution)
    if trace.script.get("path"):
        # A user's script (profiler.capture.script): how it ran, how its steps were found,
        # how it ended.
        entry["script"] = {**trace.script, "gc": gc.record_totals(trace.script.get("gc"))}
        mem = memory.analyse(
            trace.script.get("memory"),
            trace.script,
            memory.clean_spans(trace),
            memory.instrumented_spans(trace),
        )
        if mem is not None:
            entry["memory"] = memory.to_json(mem)
        before = before_steps.to_json(before_steps.analyse(trace.before_steps, trace.script))
        if before is not None:
            entry["before_steps"] = before
        pauses = gc.analyse(trace)
        if pauses is not None:
            entry["gc"] = gc.to_json(pauses)
    if trace.script.get("worker"):
        # One worker of a job (run --workers, or a host of a capture).
        entry["worker"] = trace.script["worker"]
    return entry


def _whatif_obj(w: Any) -> dict[str, Any]:
    """One what-if (``profiler.analysis.whatif.WhatIf``) as JSON, µs per training step."""

    def r(v: float | None) -> float | None:
        return round(v, 3) if v is not None else None

    return {
        "id": w.id,
        "title": w.title,
        "removes": list(w.removes),
        "removes_share": round(w.removes_share, 4),
        "group": w.group,
        "block_mean": w.block_mean,
        "keeps_results": w.keeps_results,
        "results_note": w.results_note,
        "results_check": w.results_check,
        "status": w.status,
        "error": w.error,
        "block_steps": w.block_steps,
        "pairs": w.pairs,
        "baseline_us": r(w.baseline_us),
        "variant_us": r(w.variant_us),
        "measured_saving_us": r(w.measured_us),
        "resolution_us": r(w.resolution_us),
        "predicted_saving_us": r(w.predicted_us),
        "predicted_share": round(w.predicted_share, 5) if w.predicted_share is not None else None,
        "tolerance_us": r(w.tolerance_us),
        "verdict": w.verdict,
        "interval_us": [r(v) for v in w.interval_us] if w.interval_us is not None else None,
        "grew_per_step_bytes": [round(v, 1) for v in w.grew_per_step]
        if w.grew_per_step is not None
        else None,
    }


def build(
    info: RunInfo,
    analysis: RunAnalysis,
    environment: dict[str, Any],
    written: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
) -> dict[str, Any]:
    """The whole summary document: ``analysis`` serialised (``written``: per workload slug,
    the files the renderers made per phase)."""
    entries = [workload_summary(w, (written or {}).get(w.outcome.slug)) for w in analysis.workloads]
    doc = clean(
        {
            "schema_version": SCHEMA_VERSION,
            "tool": {"name": TOOL_NAME, "version": __version__},
            "run": {
                "id": info.run_id,
                "status": info.status,
                "started": _iso(info.started),
                "wall_s": round((info.finished or time.time()) - info.started, 3),
                "phases": list(info.phases),
                "options": info.options,
                "notes": list(info.notes),
            },
            "environment": environment,
            "workloads": entries,
            "experiments": analysis.experiments,
            "diagnoses": [d.to_json() for d in analysis.diagnoses],
            "efficiency": analysis.efficiency,
            "job": analysis.job.to_json() if analysis.job is not None else None,
        }
    )
    # The environment section is recorded on purpose (an allow-list); everything else is
    # measurement data whose strings may hold paths: scrub them.
    return {k: v if k == "environment" else scrub(v) for k, v in doc.items()}


def schema() -> dict[str, Any]:
    text = resources.files("profiler.reports").joinpath("schema/summary.schema.json").read_text()
    return json.loads(text)


def _short(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: Nesting deeper than any summary's (the deepest path of a run's summary is ~10 levels) is
#: refused before anything walks the document recursively (the schema check, the report).
MAX_DEPTH = 64
#: Schema problems a ``SummaryError`` names; the rest are counted.
SHOWN_PROBLEMS = 3


def _refuse_constant(name: str) -> Any:
    raise SummaryError(f"it holds {name}, which is not JSON (a summary writes null there)")


def load(path: Path) -> dict[str, Any]:
    """Read, parse and validate a run's ``summary.json``: how ``report`` and ``compare`` read one.

    Raises:
        OSError: it cannot be read (``FileNotFoundError`` when it is not there).
        SummaryError: one line: not UTF-8, not JSON, ``NaN``/``Infinity`` (which ``json``
            accepts and no summary writes), nested deeper than ``MAX_DEPTH``, or not matching
            the schema (``validate``).
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SummaryError(f"not a valid summary: not UTF-8 text (byte {exc.start})") from None
    try:
        doc = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:  # the decoder recurses per level: ~1,000 brackets are enough
        raise SummaryError(f"not a valid summary: nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise SummaryError(f"not a valid summary: not JSON ({exc})") from None
    except SummaryError as exc:
        raise SummaryError(f"not a valid summary: {exc}") from None
    if not isinstance(doc, dict):
        raise SummaryError(f"not a valid summary: a JSON {type(doc).__name__}, not an object")
    validate(doc)
    return doc


def _plain_problem(doc: Any) -> str | None:
    """The first value no summary holds that the schema cannot see: nesting deeper than
    ``MAX_DEPTH`` (checked without recursion) or a NaN or infinity (JSON numbers are finite;
    ``"type": "number"`` accepts them)."""
    todo: list[tuple[Any, tuple[Any, ...]]] = [(doc, ())]
    while todo:
        value, where = todo.pop()
        if len(where) >= MAX_DEPTH:
            return f"{'/'.join(map(str, where[:3]))}/...: nested deeper than {MAX_DEPTH} levels"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(item, (dict, list)):
                todo.append((item, (*where, key)))
            elif isinstance(item, float) and not math.isfinite(item):
                path = "/".join(map(str, (*where, key)))
                return f"{path}: {item} is not a JSON number (a summary writes null there)"
    return None


def validate(doc: dict[str, Any]) -> None:
    """Raise ``SummaryError``, one line naming the first few problems, if ``doc`` breaks the
    schema, holds a NaN or an infinity, or nests deeper than ``MAX_DEPTH``."""
    import jsonschema

    if not isinstance(doc, dict):
        raise SummaryError(f"summary is a {type(doc).__name__}, not an object")
    problem = _plain_problem(doc)
    if problem:
        raise SummaryError(f"summary does not match its schema: {problem}")
    try:
        spec = schema()
    except (OSError, ValueError) as exc:
        # A schema that cannot be read is the install's fault, not the run's: the run's
        # summary is still written, as for any mismatch (``pipeline.write_outputs``).
        raise SummaryError(f"the summary's schema cannot be read: {exc}") from None
    validator = jsonschema.Draft202012Validator(spec)
    # Keys of one container are all str or all int: (is str, key) sorts mixed paths too.
    errors = sorted(
        validator.iter_errors(doc),
        key=lambda e: [(isinstance(p, str), p) for p in e.absolute_path],
    )
    if errors:
        shown = [
            f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {_short(e.message)}"
            for e in errors[:SHOWN_PROBLEMS]
        ]
        more = len(errors) - len(shown)
        text = "; ".join(shown) + (f" (and {more} more)" if more else "")
        raise SummaryError("summary does not match its schema: " + " ".join(text.split()))


_ABS_PATH = re.compile(r"(?<![\w.])/(?:[\w.@+-]+/)+[\w.@+-]*")
_XPLANE = re.compile(r"/[^/\s\"']+\.xplane\.pb")


def short_path(path: str, cwd: str | None = None) -> str:
    """An absolute path without the machine's layout.

    Package files become relative to ``site-packages``, files under the working directory
    relative to it, anything else its last two components.
    """
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1]
    cwd = os.getcwd() if cwd is None else cwd
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    parts = [p for p in path.split("/") if p]
    return "/".join(parts[-2:])


def scrub(value: Any, cwd: str | None = None) -> Any:
    """Strings of ``value`` with absolute paths shortened and the capture's host name hidden.

    The summary is a report: it must not carry the machine's directory layout (home and
    checkout paths in tracebacks, file names, commands) or its host name (TensorFlow names
    each capture ``<host>.xplane.pb``). The raw artefacts keep everything.
    """
    if isinstance(value, str):
        if "/" not in value:
            return value
        text = _ABS_PATH.sub(lambda m: short_path(m.group(0), cwd), value)
        return _XPLANE.sub("/<host>.xplane.pb", text)
    if isinstance(value, dict):
        return {k: scrub(v, cwd) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, cwd) for v in value]
    return value


def clean(value: Any) -> Any:
    """Replace NaN and infinities (a diverged loss) by None: JSON has no spelling for them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def dumps(doc: dict[str, Any]) -> str:
    return json.dumps(clean(doc), indent=1, allow_nan=False) + "\n"
