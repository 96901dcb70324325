"""One run from start to finish: run folder -> measured processes -> analysis -> outputs -> rename.

Place in the pipeline: called by ``cli``. ``execute`` reserves the run folder
(``profiler.processes.rundir``), runs every workload in its own process
(``profiler.processes.runner``), then the experiments and efficiency processes the selection
calls for (the case study's, ``profiler.workloads.casestudy``), analyses everything once
(``profiler.analysis.run.analyse``) and hands that analysis to the renderers: the per-workload
artefacts (``profiler.reports.artefacts``), ``summary.json`` (``profiler.reports.summary``) and
``report.html``. The run folder is ``<id>.partial`` until everything is written; an interrupted
run keeps its partial folder with a summary of what finished (status ``interrupted``) and
leaves ``runs/latest`` alone. ``rerender`` writes every output of a finished run again.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler import lifetime
from profiler.analysis.run import RunAnalysis, analyse
from profiler.processes import crash, env, rundir
from profiler.processes.launch import RunOptions, WorkloadOutcome, run_process
from profiler.processes.runner import run_all
from profiler.reports import summary

EXIT_OK = 0
EXIT_WORKLOAD_FAILED = 1
EXIT_USAGE = 2
EXIT_OUTPUT = 3
EXIT_INTERRUPTED = 130


@dataclass
class RunResult:
    """Where a run went and how it ended."""

    run_id: str
    run_dir: Path
    status: str
    summary: dict[str, Any]
    outcomes: list[WorkloadOutcome]
    analysis: RunAnalysis | None = None
    #: What stopped an interrupted run (Ctrl-C: 130; SIGTERM: 143; SIGHUP: 129).
    interrupted_status: int = EXIT_INTERRUPTED

    @property
    def exit_status(self) -> int:
        if self.status == "interrupted":
            return self.interrupted_status
        return EXIT_OK if self.status == "ok" else EXIT_WORKLOAD_FAILED

    @property
    def report_path(self) -> Path:
        return self.run_dir / "report.html"


def run_experiments(opts: RunOptions, run_dir: Path) -> dict[str, Any] | None:
    """Run the pairs and the sweep whose workloads were selected; None if there are none.

    Returns ``experiments.json`` with the process's ``status`` and ``error`` added; whatever
    it measured before a failure or time-out is kept.
    """
    from profiler.capture.experiments import RESULT_FILE, ExperimentSpec
    from profiler.workloads import casestudy

    selected = {s.name for s in opts.workloads}
    pairs = [p.id for p in casestudy.PAIRS if p.baseline in selected and p.variant in selected]
    sweep = [w for w in casestudy.SWEEP_WORKLOADS if w in selected]
    if not pairs and not sweep:
        return None
    xdir = run_dir / "experiments"
    xdir.mkdir(parents=True, exist_ok=True)
    spec = ExperimentSpec(
        out_dir=str(xdir.resolve()),
        pairs=pairs,
        sweep_workloads=sweep,
        sizes=list(opts.sweep_sizes or casestudy.SWEEP_SIZES),
    )
    for key, value in opts.experiment_overrides.items():
        setattr(spec, key, value)
    raw, _wall_s = _measure(
        "profiler.capture.experiments", spec.to_json(), xdir, RESULT_FILE, opts, "experiments"
    )
    out = {"pairs": [], "sweep": {}, **raw}
    if casestudy.SEED_SCRIPT_FOR in selected:
        out["seed_whatifs"] = run_seed_whatifs(opts, xdir / "seed-script")
    return out


def run_seed_whatifs(opts: RunOptions, out: Path) -> dict[str, Any]:
    """The seed TF1 script, verbatim, run with its what-ifs (a run of its own under ``out``):
    its what-ifs as the summary has them, with the process's status."""
    from profiler.processes import options
    from profiler.workloads import casestudy

    script = Path(__file__).resolve().parents[2] / casestudy.SEED_SCRIPT
    entry: dict[str, Any] = {"script": casestudy.SEED_SCRIPT, "whatifs": []}
    if not script.is_file():
        return {**entry, "status": "failed", "error": "the seed script is not in this checkout"}
    tokens = [*casestudy.SEED_SCRIPT_ARGS, "--no-progress", "--out", str(out)]
    tokens += ["--timeout", str(opts.timeout_s)]
    try:
        sub = execute(options.parse_run(tokens, [str(script)]))
        if sub.status == "interrupted":
            raise KeyboardInterrupt  # the case study's run stops here too
        doc = json.loads((sub.run_dir / "summary.json").read_text())
    except (OSError, ValueError, options.UsageError, rundir.RunDirError) as exc:
        return {**entry, "status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    workloads = doc.get("workloads") or [{}]
    status = "ok" if workloads[0].get("status") == "ok" else "failed"
    return {
        **entry,
        "status": status,
        "error": workloads[0].get("error") or "",
        "run": str(sub.run_dir.relative_to(out.parent.parent)),
        "whatifs": workloads[0].get("whatif") or [],
    }


def _measure(
    module: str, spec_json: str, workdir: Path, result_file: str, opts: RunOptions, label: str
) -> tuple[dict[str, Any], float]:
    """Run measurement process ``module`` on ``spec_json`` in ``workdir``; collect its result.

    Returns the result file (whatever it saved, even after a failure or time-out) with the
    process's ``status`` and ``error`` added, and the process's wall time in seconds.
    """
    from profiler.processes.runner import TaskBar

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
    elif proc.returncode:
        raw.update(status="failed", error=_failure(workdir, proc.returncode))
    else:
        raw.update(status="ok", error="")
    return raw, round(proc.wall_ns / 1e9, 3)


def _failure(workdir: Path, returncode: int) -> str:
    """Why a measurement process ended with ``returncode``, in a workload's words
    (``launch.one_run``): a signal first (``killed by signal 9 (SIGKILL)``, with the frame of
    a native crash and its dump), then its ``error.txt``."""
    err_path = workdir / "error.txt"
    err = err_path.read_text(errors="replace").strip() if err_path.exists() else ""
    if returncode > 0:
        return err or f"exited with status {returncode}"
    outside = crash.killed_by(-returncode)
    native = crash.read(workdir / "stderr.log")
    if native is not None:
        outside, err = f"{outside} {native.where()}", native.dump()
    return f"{outside}\n{err}".strip()


def run_efficiency(
    opts: RunOptions, run_dir: Path, overrides: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Train the efficiency study's implementations on a sample budget, logging the loss; None
    unless one of them is selected (``profiler.capture.efficiency``).

    ``overrides`` replace fields of ``EfficiencySpec`` (seeds, budgets, points, ...). Returns
    ``efficiency.json`` with the process's ``status``, ``error`` and ``wall_s`` added; whatever
    it measured before a failure or time-out is kept.
    """
    from profiler.capture.efficiency import RESULT_FILE, EfficiencySpec
    from profiler.workloads import casestudy

    if not casestudy.runs_efficiency({s.name for s in opts.workloads}):
        return None
    edir = run_dir / "efficiency"
    edir.mkdir(parents=True, exist_ok=True)
    spec = EfficiencySpec(out_dir=str(edir.resolve()), **(overrides or {}))
    raw, wall_s = _measure(
        "profiler.capture.efficiency", spec.to_json(), edir, RESULT_FILE, opts, "efficiency"
    )
    return {"runs": {}, **raw, "wall_s": wall_s}


def write_efficiency_scalars(run_dir: Path, doc: dict[str, Any]) -> list[str]:
    """TensorBoard scalars of the efficiency curves, one run per implementation; problems."""
    from profiler.reports import tensorboard

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
    """Validate ``doc`` and write ``summary.json`` and ``report.html`` into ``run_dir``.

    A summary that does not match its schema is a bug of the toolkit, not of the run: it is
    written all the same (what was measured is kept), the mismatch goes to stderr and into
    ``schema-error.txt``, and the report is drawn from it where it can be."""
    problem = ""
    try:
        summary.validate(doc)
    except summary.SummaryError as exc:
        problem = str(exc)
    rundir.atomic_write_text(run_dir / "summary.json", summary.dumps(doc))
    if problem:
        rundir.atomic_write_text(run_dir / "schema-error.txt", problem + "\n")
        print(
            "internal error (a bug of the profiler; the run is kept): "
            + problem.replace("\n", "; ")[:500],
            file=sys.stderr,
        )
    try:
        write_report(run_dir, doc)
    except Exception as exc:
        # A bug in drawing the report never loses the run: the summary is written, the
        # terminal's answer follows, and the traceback is kept for the bug report.
        import traceback

        rundir.atomic_write_text(run_dir / "report-error.txt", traceback.format_exc())
        print(
            "internal error (a bug of the profiler; the run is kept): the report could not be "
            f"drawn: {type(exc).__name__}: {str(exc)[:300]} (report-error.txt)",
            file=sys.stderr,
        )


def write_report(run_dir: Path, doc: dict[str, Any]) -> None:
    """``report.html`` from a summary document."""
    from profiler.reports import html, viewmodel

    rundir.atomic_write_text(run_dir / "report.html", html.render(viewmodel.build(doc)))


def _render(
    run_dir: Path,
    info: summary.RunInfo,
    outcomes: list[WorkloadOutcome],
    environment: dict[str, Any],
    experiments: dict[str, Any] | None = None,
    efficiency: dict[str, Any] | None = None,
) -> tuple[RunAnalysis, dict[str, Any]]:
    """Analyse, render the artefacts and write the summary and the report; (analysis, doc)."""
    from profiler.reports import artefacts

    analysis = analyse(outcomes, experiments, efficiency)
    written, problems = artefacts.write_all(run_dir, analysis.workloads)
    for slug, found in problems.items():
        info.notes.extend(f"{slug}: {p}" for p in found)
    info.finished = info.finished or time.time()
    doc = summary.build(info, analysis, environment, written)
    doc["run"]["notes"].extend(write_efficiency_scalars(run_dir, doc))
    write_outputs(run_dir, doc)
    return analysis, doc


@dataclass
class Started:
    """A run whose folder is reserved: what ``finish`` needs to write it."""

    run_id: str
    partial: Path
    info: summary.RunInfo
    environment: dict[str, Any]


def begin(opts: RunOptions, now: float | None = None) -> Started:
    """Reserve the run folder and record the run's options and environment; raise
    ``rundir.RunDirError`` if nothing can be written."""
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
    return Started(run_id, partial, info, env.capture())


def finish_interrupted(
    started: Started,
    outcomes: list[WorkloadOutcome],
    status: int = EXIT_INTERRUPTED,
    experiments: dict[str, Any] | None = None,
    efficiency: dict[str, Any] | None = None,
) -> RunResult:
    """Write what was measured before an interruption; the folder stays ``.partial``."""
    info = started.info
    info.status = "interrupted"
    info.finished = time.time()
    analysis, doc = _render(
        started.partial, info, outcomes, started.environment, experiments, efficiency
    )
    return RunResult(started.run_id, started.partial, info.status, doc, outcomes, analysis, status)


def finish(
    started: Started,
    outcomes: list[WorkloadOutcome],
    experiments: dict[str, Any] | None = None,
    efficiency: dict[str, Any] | None = None,
) -> RunResult:
    """Analyse, write every output and rename the folder from ``.partial`` (``latest`` moves).

    The run is ``failed`` when a workload, or the experiments or efficiency process, did not
    end ``ok`` (each says why in its ``error``): exit status 1."""
    info = started.info
    info.finished = time.time()
    processes = [p for p in (experiments, efficiency) if p is not None]
    ok = all(o.status == "ok" for o in outcomes) and all(p["status"] == "ok" for p in processes)
    info.status = "ok" if ok else "failed"
    analysis, doc = _render(
        started.partial, info, outcomes, started.environment, experiments, efficiency
    )
    final = rundir.finalize(started.partial.parent, started.run_id)
    return RunResult(started.run_id, final, info.status, doc, outcomes, analysis)


def execute(opts: RunOptions, now: float | None = None) -> RunResult:
    """Run everything ``opts`` asks for; raise ``rundir.RunDirError`` if nothing can be written."""
    started = begin(opts, now)
    partial, info = started.partial, started.info
    outcomes: list[WorkloadOutcome] = []
    try:
        outcomes = run_all(opts, partial)
    except KeyboardInterrupt as exc:
        return finish_interrupted(started, collected(partial, opts), lifetime.exit_status(exc))
    experiments = None
    efficiency = None
    if opts.experiments:
        stage = "experiments"
        try:
            experiments = run_experiments(opts, partial)
            stage = "efficiency"
            efficiency = run_efficiency(opts, partial, opts.efficiency_overrides)
        except KeyboardInterrupt as exc:
            # What finished is kept, the rest is not started; the run stays .partial.
            info.notes.append(f"interrupted during the {stage} process")
            return finish_interrupted(
                started, outcomes, lifetime.exit_status(exc), experiments, efficiency
            )
    return finish(started, outcomes, experiments, efficiency)


def collected(run_dir: Path, opts: RunOptions) -> list[WorkloadOutcome]:
    """Outcomes for the workloads that left a trace before an interruption (marked partial);
    a job's script (``--workers N``) as each of its workers, named as ``run_all`` names them."""
    from profiler.capture.script.spec import ScriptSpec
    from profiler.processes import workers
    from profiler.processes.launch import load_trace

    out = []
    for spec in opts.workloads:
        slug = rundir.slug(spec.name)
        found = [(spec, slug)]
        if isinstance(spec, ScriptSpec) and opts.workers > 1:
            found = [
                (workers.as_worker(spec, i, opts.workers), workers.worker_slug(slug, i))
                for i in range(opts.workers)
            ]
        for one, one_slug in found:
            path = run_dir / "workloads" / one_slug / "model.json.gz"
            if not path.exists():
                continue
            try:
                trace = load_trace(path)
            except (OSError, ValueError, TypeError, KeyError):
                continue
            status = "ok" if trace.status == "ok" else "failed"
            error = "" if status == "ok" else "interrupted before it finished"
            params = opts.params[spec.name]
            out.append(WorkloadOutcome(one, one_slug, status, trace, error, params=params))
    return out


def rerender(run_dir: Path) -> dict[str, Any]:
    """Write every output of a finished run again from its data (the report, the Chrome traces,
    TensorBoard's event files, the flame graphs and line tables): the report from
    ``summary.json`` (read by ``summary.load``, as ``compare`` reads it: ``summary.SummaryError``
    if it is not a valid summary), the per-workload artefacts from each workload's saved trace.
    Returns the summary."""
    from profiler.processes.launch import outcome_from_summary
    from profiler.reports import artefacts

    doc = summary.load(run_dir / "summary.json")
    outcomes = []
    for entry in doc.get("workloads", []):
        path = run_dir / "workloads" / entry["slug"] / "model.json.gz"
        if path.is_file():
            outcomes.append(outcome_from_summary(entry, path))
    artefacts.write_all(run_dir, analyse(outcomes).workloads)
    for problem in write_efficiency_scalars(run_dir, doc):
        print(f"warning: {problem}", file=sys.stderr)
    write_report(run_dir, doc)
    return doc
