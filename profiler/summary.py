"""``summary.json``: the run's results in one versioned document.

Place in the pipeline: traces + analysis -> **summary** -> reports. Everything a report shows is
in the summary (or in an artefact it names), so ``python -m profiler report RUN`` re-renders from
it alone. The document follows ``profiler/schema/summary.schema.json``; ``validate`` checks it
and every writer calls it. Additive changes add properties and bump ``SCHEMA_VERSION``.

Units: times in the summary are microseconds (``*_us``) or milliseconds (``*_ms``) as floats,
converted from the model's integer nanoseconds here and nowhere else.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any

from profiler import attribution, sampling, stats
from profiler.model import OK, MetricPoint, WorkDecl, WorkloadTrace, median_ns

if TYPE_CHECKING:
    from profiler.runner import WorkloadOutcome

#: 1: the foundation; 2 (additive): phase data, sampling, attribution, experiments, diagnoses,
#: training efficiency and script runs.
SCHEMA_VERSION = 2
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


def workload_summary(o: WorkloadOutcome, att: Any = None) -> dict[str, Any]:
    """The summary object of one workload (see the schema for every field)."""
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
        "params": (
            {"steps": params.steps, "n": params.n, "seed": params.seed, "k": params.k}
            if params
            else {}
        ),
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
    timed = trace.phase("timed")
    timed_stats = (
        stats.window_stats(timed.window, w) if timed is not None and timed.window else None
    )
    entry["work"] = _work_obj(w)
    entry["step_time"] = _stats_obj(timed_stats)
    steady_unit = (
        median_ns(timed.window.durations_ns()) if timed_stats and timed and timed.window else 0
    )
    oo = stats.one_off(trace, steady_unit) if steady_unit else None
    entry["one_off"] = {
        "build_ms": _ms(trace.build_ns),
        "warmup_steps": trace.warmup.n_steps * w.units_per_step,
        "warmup_ms": _ms(sum(trace.warmup.durations_ns())),
        "warmup_excess_ms": _ms(oo.warmup_excess_ns) if oo else None,
        "first_step_ms": _ms(trace.warmup.durations_ns()[0]) if trace.warmup.n_steps else None,
        "total_ms": _ms(oo.total_ns) if oo else None,
    }
    inflation = {i.phase: i.ratio for i in stats.inflation(trace)}
    for p in trace.phases:
        ps = stats.window_stats(p.window, w) if p.window is not None else None
        entry["phases"].append(
            {
                "name": p.name,
                "status": p.status,
                "reason": p.reason,
                "steps": ps.steps if ps else 0,
                "median_us": _us(ps.median_ns) if ps else None,
                "inflation": round(inflation[p.name], 4) if p.name in inflation else None,
                "artefacts": list(p.artefacts),
                "data": p.data,
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
    entry["sampling"] = sampling.summarize(trace)
    entry["attribution"] = attribution.summarize(att)
    if trace.script:
        # A user's script (profiler.script): how it ran, how its steps were found, how it ended.
        entry["script"] = trace.script
    return entry


def build(
    info: RunInfo,
    outcomes: list[WorkloadOutcome],
    environment: dict[str, Any],
    experiments: dict[str, Any] | None = None,
    efficiency: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole summary document.

    ``efficiency`` is the efficiency process's ``efficiency.json`` (``run_efficiency``); its
    section is ``profiler.efficiency.summarize`` of it, or None when it did not run.
    """
    from profiler import __version__, perf_rules
    from profiler import efficiency as eff
    from profiler import experiments as exp

    atts = {
        o.spec.name: attribution.attribute(o.trace)
        for o in outcomes
        if o.trace is not None and o.status == OK
    }

    def predict(baseline: str, removes: tuple[str, ...]) -> int | None:
        att = atts.get(baseline)
        return attribution.removal_ns(att, removes) if att is not None else None

    entries = [workload_summary(o, atts.get(o.spec.name)) for o in outcomes]
    x_section = exp.summarize(experiments, predict) if experiments is not None else None
    perf_rules.cross_check(entries, x_section)
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
            "experiments": x_section,
            "diagnoses": perf_rules.diagnose(entries, x_section),
            "efficiency": eff.summarize(efficiency) if efficiency is not None else None,
        }
    )
    # The environment section is recorded on purpose (an allow-list); everything else is
    # measurement data whose strings may hold paths: scrub them.
    return {k: v if k == "environment" else scrub(v) for k, v in doc.items()}


def schema() -> dict[str, Any]:
    text = resources.files("profiler").joinpath("schema/summary.schema.json").read_text()
    return json.loads(text)


def validate(doc: dict[str, Any]) -> None:
    """Raise ``SummaryError`` (one line per problem, at most five) if ``doc`` breaks the schema."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [
            f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in errors[:5]
        ]
        raise SummaryError("summary does not match its schema:\n" + "\n".join(lines))


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
