"""The runner: every workload of a run in turn, one process each, with the progress bar.

Place in the pipeline: ``profiler.processes.pipeline`` calls ``run_all`` with the run folder
it reserved; the runner runs each workload in its own process (``profiler.processes.launch``:
time-outs, failure isolation, the outcome), or a script's job of several workers
(``profiler.processes.workers``), and shows the progress. A workload that raises, crashes or hangs
is recorded as failed or timed out and the next one runs.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from profiler.capture.script.spec import ScriptSpec
from profiler.model import FAILED, OK
from profiler.processes import rundir

# The process plumbing lives in profiler.processes.launch (the workers of a job share it); these
# names stay importable from here for the tests and the magics that import them.
from profiler.processes.launch import (
    RunOptions,
    WorkloadOutcome,
    outcome_from_summary,
    run_workload_process,
)
from profiler.processes.launch import tee as _tee

__all__ = [
    "ProgressBar",
    "RunOptions",
    "TaskBar",
    "WorkloadOutcome",
    "_tee",
    "outcome_from_summary",
    "run_all",
    "run_workload_process",
]


class ProgressBar:
    """One bar over the whole run: a unit per workload step of the schedule (build, warm-up,
    each phase), advanced fractionally as a phase's window progresses."""

    def __init__(self, opts: RunOptions) -> None:
        self.per_workload = 2 + len(opts.phases)
        self.enabled = opts.progress
        self.bar: Any = None
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.per_workload * len(opts.workloads),
                unit="phase",
                dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n:.1f}/{total} phases [{elapsed}<{remaining}]",
                disable=None,  # off when stderr is not a terminal
            )
        self.base = 0.0
        self.order = ["build", "warmup", *opts.phases]
        self.lock = threading.Lock()

    def start(self, index: int, name: str) -> None:
        self.base = float(index * self.per_workload)
        self._set(self.base, f"{name} · starting")

    def event(self, e: dict[str, Any]) -> None:
        phase = str(e.get("phase", ""))
        pos = self.order.index(phase) if phase in self.order else 0
        total = max(int(e.get("total", 1) or 1), 1)
        frac = min(int(e.get("done", 0) or 0) / total, 1.0)
        self._set(self.base + pos + frac, f"{e.get('workload', '')} · {phase}")

    def finish(self, index: int, name: str, status: str) -> None:
        self._set(float((index + 1) * self.per_workload), f"{name} · {status}")

    def _set(self, value: float, desc: str) -> None:
        if self.bar is None:
            return
        with self.lock:
            self.bar.n = value
            self.bar.set_description_str(desc, refresh=False)
            self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class TaskBar:
    """A bar for a measurement process that reports ``done``/``total`` tasks (experiments)."""

    def __init__(self, enabled: bool, label: str) -> None:
        self.bar: Any = None
        self.label = label
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=1, unit="task", dynamic_ncols=True, disable=None, desc=label)

    def event(self, e: dict[str, Any]) -> None:
        if self.bar is None:
            return
        self.bar.total = max(int(e.get("total", 1) or 1), 1)
        self.bar.n = min(int(e.get("done", 0) or 0), self.bar.total)
        self.bar.set_description_str(f"{self.label} · {e.get('phase', '')}", refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_all(opts: RunOptions, run_dir: Path) -> list[WorkloadOutcome]:
    """Run every workload of ``opts`` into ``run_dir``; never raises for a workload's failure."""
    bar = ProgressBar(opts)
    outcomes: list[WorkloadOutcome] = []
    used: set[str] = set()
    try:
        for i, spec in enumerate(opts.workloads):
            slug = rundir.slug(spec.name)
            while slug in used:
                slug += "_"
            used.add(slug)
            bar.start(i, spec.name)
            if isinstance(spec, ScriptSpec) and opts.workers > 1:
                from profiler.processes import workers

                job = workers.run_job(spec, opts.params[spec.name], opts, run_dir, slug, bar.event)
                outcomes.extend(job)
                bar.finish(i, spec.name, FAILED if any(o.status != OK for o in job) else OK)
                continue
            outcome = run_workload_process(
                spec, opts.params[spec.name], opts, run_dir, slug, bar.event
            )
            outcomes.append(outcome)
            bar.finish(i, spec.name, outcome.status)
    finally:
        bar.close()
    return outcomes
