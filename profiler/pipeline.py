"""One run from start to finish: run folder -> workloads -> summary -> report -> rename.

Place in the pipeline: called by ``cli``; calls ``runner`` for capture, ``summary`` for the
analysis document and ``reports`` for the renderers. The run folder is ``<id>.partial`` until
everything is written; an interrupted run keeps its partial folder with a summary of what
finished (status ``interrupted``) and leaves ``runs/latest`` alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler import env, rundir, summary
from profiler.runner import RunOptions, WorkloadOutcome, run_all

EXIT_OK = 0
EXIT_WORKLOAD_FAILED = 1
EXIT_USAGE = 2
EXIT_OUTPUT = 3
EXIT_INTERRUPTED = 130

RENDERERS = ("summary.json", "report.html")


@dataclass
class RunResult:
    """Where a run went and how it ended."""

    run_id: str
    run_dir: Path
    status: str
    summary: dict[str, Any]
    outcomes: list[WorkloadOutcome]

    @property
    def exit_status(self) -> int:
        if self.status == "interrupted":
            return EXIT_INTERRUPTED
        return EXIT_OK if self.status == "ok" else EXIT_WORKLOAD_FAILED

    @property
    def report_path(self) -> Path:
        return self.run_dir / "report.html"


#: Per-workload renderers that run in the runner after capture: (run folder, outcome) -> the
#: files written, relative to the run folder. A writer's failure is recorded, never fatal.
ArtefactWriter = Callable[[Path, WorkloadOutcome], list[str]]


def _chrome_trace(run_dir: Path, o: WorkloadOutcome) -> list[str]:
    from reports import chrome_trace

    if o.trace is None:
        return []
    path = chrome_trace.write(run_dir / "workloads" / o.slug / chrome_trace.FILE_NAME, o.trace)
    return [str(path.relative_to(run_dir))]


def _tensorboard_scalars(run_dir: Path, o: WorkloadOutcome) -> list[str]:
    from reports import tensorboard

    if o.trace is None:
        return []
    path = tensorboard.write(run_dir / "tensorboard" / o.slug, o.trace)
    return [str(path.relative_to(run_dir))]


ARTEFACT_WRITERS: dict[str, ArtefactWriter] = {
    "chrome_trace": _chrome_trace,
    "tensorboard_scalars": _tensorboard_scalars,
}


def write_artefacts(run_dir: Path, outcomes: list[WorkloadOutcome]) -> dict[str, list[str]]:
    """Run every artefact writer over every outcome that has a trace; returns problems by slug."""
    problems: dict[str, list[str]] = {}
    for o in outcomes:
        if o.trace is None:
            continue
        for name, writer in ARTEFACT_WRITERS.items():
            try:
                writer(run_dir, o)
            except Exception as exc:  # one renderer's bug must not lose the run
                problems.setdefault(o.slug, []).append(f"{name}: {type(exc).__name__}: {exc}")
    return problems


def run_experiments(opts: RunOptions, run_dir: Path) -> dict[str, Any] | None:
    """Run the pairs and the sweep whose workloads were selected; None if there are none.

    Returns ``experiments.json`` with the process's ``status`` and ``error`` added; whatever
    it measured before a failure or time-out is kept.
    """
    from profiler.experiments import DEFAULT_SIZES, PAIRS, SWEEP_WORKLOADS
    from profiler.experiments_worker import RESULT_FILE, ExperimentSpec

    selected = {s.name for s in opts.workloads}
    pairs = [p.name for p in PAIRS if p.baseline in selected and p.variant in selected]
    sweep = [w for w in SWEEP_WORKLOADS if w in selected]
    if not pairs and not sweep:
        return None
    xdir = run_dir / "experiments"
    xdir.mkdir(parents=True, exist_ok=True)
    spec = ExperimentSpec(
        out_dir=str(xdir.resolve()),
        pairs=pairs,
        sweep_workloads=sweep,
        sizes=list(opts.sweep_sizes or DEFAULT_SIZES),
    )
    for key, value in opts.experiment_overrides.items():
        setattr(spec, key, value)
    raw, _wall_s = _measure(
        "profiler.experiments_worker", spec.to_json(), xdir, RESULT_FILE, opts, "experiments"
    )
    return {"pairs": [], "sweep": {}, **raw}


def _measure(
    module: str, spec_json: str, workdir: Path, result_file: str, opts: RunOptions, label: str
) -> tuple[dict[str, Any], float]:
    """Run measurement process ``module`` on ``spec_json`` in ``workdir``; collect its result.

    Returns the result file (whatever it saved, even after a failure or time-out) with the
    process's ``status`` and ``error`` added, and the process's wall time in seconds.
    """
    from profiler.runner import TaskBar, run_process

    spec_path = workdir / "spec.json"
    rundir.atomic_write_text(spec_path, spec_json)
    bar = TaskBar(opts.progress, label)
    try:
        proc = run_process(module, spec_path, workdir, opts.timeout_s, bar.event)
    finally:
        bar.close()
    raw: dict[str, Any] = {}
    try:
        raw = json.loads((workdir / result_file).read_text())
    except (OSError, ValueError):
        pass
    if proc.timed_out:
        raw.update(status="timeout", error=f"timed out after {opts.timeout_s:g} s")
    elif proc.returncode != 0:
        err_path = workdir / "error.txt"
        err = err_path.read_text() if err_path.exists() else ""
        raw.update(status="failed", error=err.strip() or f"exited with {proc.returncode}")
    else:
        raw.update(status="ok", error="")
    return raw, round(proc.wall_ns / 1e9, 3)


def run_efficiency(
    opts: RunOptions, run_dir: Path, overrides: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Train seed 004's implementations on a sample budget, logging the loss; None unless a
    seed-004 workload is selected (``profiler.efficiency_worker``).

    ``overrides`` replace fields of ``EfficiencySpec`` (seeds, budgets, points, ...). Returns
    ``efficiency.json`` with the process's ``status``, ``error`` and ``wall_s`` added; whatever
    it measured before a failure or time-out is kept.
    """
    from profiler.efficiency_worker import RESULT_FILE, EfficiencySpec

    if not any(s.seed == "004" for s in opts.workloads):
        return None
    edir = run_dir / "efficiency"
    edir.mkdir(parents=True, exist_ok=True)
    spec = EfficiencySpec(out_dir=str(edir.resolve()), **(overrides or {}))
    raw, wall_s = _measure(
        "profiler.efficiency_worker", spec.to_json(), edir, RESULT_FILE, opts, "efficiency"
    )
    return {"runs": {}, **raw, "wall_s": wall_s}


def write_efficiency_scalars(run_dir: Path, doc: dict[str, Any]) -> list[str]:
    """TensorBoard scalars of the efficiency curves, one run per implementation; problems."""
    from reports import tensorboard

    problems = []
    for impl in (doc.get("efficiency") or {}).get("implementations", []):
        if not impl.get("curve"):
            continue
        try:
            tensorboard.write_efficiency(run_dir / "tensorboard" / rundir.slug(impl["name"]), impl)
        except Exception as exc:  # a renderer's bug must not lose the run
            problems.append(f"efficiency scalars {impl['name']}: {type(exc).__name__}: {exc}")
    return problems


def write_outputs(run_dir: Path, doc: dict[str, Any]) -> None:
    """Validate ``doc`` and write ``summary.json`` and ``report.html`` into ``run_dir``."""
    from reports import html, viewmodel

    summary.validate(doc)
    rundir.atomic_write_text(run_dir / "summary.json", summary.dumps(doc))
    rundir.atomic_write_text(run_dir / "report.html", html.render(viewmodel.build(doc)))


def execute(opts: RunOptions, now: float | None = None) -> RunResult:
    """Run everything ``opts`` asks for; raise ``rundir.RunDirError`` if nothing can be written."""
    run_id, partial = rundir.create_partial(opts.out_root, now)
    info = summary.RunInfo(
        run_id=run_id,
        phases=list(opts.phases),
        options={
            "timeout_s": opts.timeout_s,
            "warmup_steps": opts.warmup_steps,
            "metric_points": opts.metric_points,
            "phase_steps": dict(opts.phase_steps),
            **{k: v for k, v in opts.options.items() if isinstance(v, (int, float, str, bool))},
        },
    )
    environment = env.capture()
    outcomes: list[WorkloadOutcome] = []
    try:
        outcomes = run_all(opts, partial)
    except KeyboardInterrupt:
        info.status = "interrupted"
        info.finished = time.time()
        doc = summary.build(info, _collected(partial, opts), environment)
        write_outputs(partial, doc)
        return RunResult(run_id, partial, info.status, doc, [])
    experiments = None
    efficiency = None
    if opts.experiments:
        try:
            experiments = run_experiments(opts, partial)
        except KeyboardInterrupt:
            experiments = None
            info.notes.append("experiments interrupted")
        try:
            efficiency = run_efficiency(opts, partial, opts.efficiency_overrides)
        except KeyboardInterrupt:
            efficiency = None
            info.notes.append("efficiency interrupted")
    for slug, problems in write_artefacts(partial, outcomes).items():
        info.notes.extend(f"{slug}: {p}" for p in problems)
    info.finished = time.time()
    info.status = "ok" if all(o.status == "ok" for o in outcomes) else "failed"
    doc = summary.build(info, outcomes, environment, experiments, efficiency)
    doc["run"]["notes"].extend(write_efficiency_scalars(partial, doc))
    write_outputs(partial, doc)
    final = rundir.finalize(opts.out_root, run_id)
    return RunResult(run_id, final, info.status, doc, outcomes)


def _collected(run_dir: Path, opts: RunOptions) -> list[WorkloadOutcome]:
    """Outcomes for the workloads that left a trace before an interruption (marked partial)."""
    from profiler.runner import load_trace

    out = []
    for spec in opts.workloads:
        slug = rundir.slug(spec.name)
        path = run_dir / "workloads" / slug / "model.json.gz"
        if not path.exists():
            continue
        try:
            trace = load_trace(path)
        except (OSError, ValueError, TypeError, KeyError):
            continue
        status = "ok" if trace.status == "ok" else "failed"
        error = "" if status == "ok" else "interrupted before it finished"
        out.append(WorkloadOutcome(spec, slug, status, trace, error, params=opts.params[spec.name]))
    return out
