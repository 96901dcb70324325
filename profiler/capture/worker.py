"""The workload process: build one loop, run warm-up and the phases as windows of it.

Place in the pipeline: ``profiler.processes.runner`` starts ``python -m profiler.capture.worker
SPEC.json`` once per registered workload; this module builds the loop, runs it phase by phase
(``profiler.capture.phases``) through the window schedule (``profiler.capture.schedule``) and
writes the ``WorkloadTrace`` (``profiler.model``) as ``model.json.gz`` in the workload's folder. It
rewrites that file after every phase with status ``partial``, so a later crash or time-out
keeps what was measured. Progress goes to the runner as JSON lines on the file descriptor named
by ``PROFILER_PROGRESS_FD``.

``run_workload`` is the whole schedule as a function of a spec, a clock and callbacks, so tests
drive it with a fake clock and a fake workload.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler import lifetime
from profiler.capture import schedule
from profiler.capture.loop import Params, WorkloadSpec
from profiler.capture.phases import Phase, PhaseContext
from profiler.capture.schedule import Progress, Windows, error_tail, run_phase
from profiler.clock import Clock, now_ns
from profiler.model import FAILED, OK, PARTIAL, PhaseRecord, WorkloadTrace
from profiler.model.atomic import atomic_write_text

MODEL_FILE = "model.json.gz"
ERROR_FILE = "error.txt"


@dataclass
class WorkerSpec:
    """What the runner asks one workload process to do (written as JSON).

    ``workload`` is the spec's ``module:ATTRIBUTE`` reference (``WorkloadSpec.ref``).
    """

    workload: str
    params: dict[str, int]
    phases: list[str]
    workload_dir: str
    tensorboard_dir: str
    warmup_steps: int = 50
    metric_points: int = 20
    phase_steps: dict[str, int] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        return cls(**json.loads(text))


def run_workload(
    spec: WorkloadSpec,
    params: Params,
    phases: list[Phase],
    *,
    workload_dir: Path,
    tensorboard_dir: Path,
    clock: Clock = now_ns,
    progress: Progress = lambda _e: None,
    write: Callable[[WorkloadTrace], None] = lambda _t: None,
    warmup_steps: int = 50,
    metric_points: int = 20,
    options: dict[str, Any] | None = None,
) -> WorkloadTrace:
    """Build the loop, run warm-up and each phase's window; return the trace.

    A phase that is skipped, unavailable or fails is recorded as such and the next one runs.
    ``write`` receives a partial trace after every phase. An exception while building or in the
    warm-up propagates (there is nothing to keep); ``main`` records it.
    """
    params.validate()
    progress({"workload": spec.name, "phase": "build", "done": 0, "total": 1})
    t0 = clock()
    loop = spec.build(params)
    build_ns = clock() - t0
    windows = Windows(loop, clock, progress, spec.name)
    windows.record_metric()  # the initial loss, before any step
    warmup = windows.window("warmup", warmup_steps)
    marker_cost = schedule.marker_cost_ns(clock)
    ctx = PhaseContext(
        spec=spec,
        loop=loop,
        workload_dir=workload_dir,
        tensorboard_dir=tensorboard_dir,
        clock=clock,
        options={"metric_points": metric_points, **(options or {})},
        step_ns=schedule.typical_step_ns(warmup.durations_ns()),
    )
    scale = float(ctx.options.get("time_scale", 1.0))
    slots = schedule.plan(phases, ctx, timed_steps=params.steps, scale=scale)
    records: list[PhaseRecord] = []

    def snapshot(status: str) -> WorkloadTrace:
        return WorkloadTrace(
            workload=spec.name,
            params=params.as_dict(),
            work=loop.work,
            build_ns=build_ns,
            warmup=warmup,
            phases=tuple(records),
            metrics=tuple(windows.metrics),
            marker_cost_ns=marker_cost,
            final=loop.params(),
            status=status,
        )

    write(snapshot(PARTIAL))
    for phase in phases:
        slot = slots.get(phase.name)
        steps = slot.window if slot is not None else 0
        records.append(run_phase(phase, ctx, windows, steps, chunks=metric_points))
        if phase.name != "timed" and records[-1].window is not None:
            windows.record_metric()
        write(snapshot(PARTIAL))
    trace = snapshot(OK)
    loop.close()
    return trace


@functools.cache
def progress_writer() -> Progress:
    """Progress events to the runner, on the pipe named by ``PROFILER_PROGRESS_FD`` (one
    stream per process, shared by its threads: one event a line)."""
    fd = os.environ.get("PROFILER_PROGRESS_FD")
    if not fd:
        return lambda _e: None
    stream = os.fdopen(int(fd), "w", buffering=1)
    lock = threading.Lock()

    def emit(event: dict[str, Any]) -> None:
        line = json.dumps(event) + "\n"
        with lock:
            try:
                stream.write(line)
            except (OSError, ValueError):
                pass

    return emit


def measurement_main(
    load_spec: Callable[[str], Any], run: Callable[..., Any], argv: list[str] | None = None
) -> int:
    """Entry point of a measurement process (experiments, efficiency): ``run(spec)``.

    The spec comes from the JSON file named first on the command line; progress goes to the
    runner; a failure leaves the tail of its traceback in ``<out_dir>/error.txt`` (whatever
    ``run`` saved before it is kept) and exits 1.
    """
    args = sys.argv[1:] if argv is None else argv
    spec = load_spec(Path(args[0]).read_text())
    lifetime.watch_parent()
    try:
        run(spec, progress=progress_writer())
        return 0
    except BaseException as exc:
        atomic_write_text(Path(spec.out_dir) / ERROR_FILE, error_tail(exc) + "\n")
        return 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of the workload process. Exit 0 done, 1 the workload failed."""
    from profiler.capture.loop import load_ref
    from profiler.capture.phases import registry

    args = sys.argv[1:] if argv is None else argv
    wspec = WorkerSpec.from_json(Path(args[0]).read_text())
    lifetime.watch_parent()
    workload_dir = Path(wspec.workload_dir)
    out = workload_dir / MODEL_FILE
    progress = progress_writer()
    last: list[WorkloadTrace] = []

    def write(trace: WorkloadTrace) -> None:
        last[:] = [trace]
        trace.save(out)

    try:
        spec = load_ref(wspec.workload)
        params = Params(**wspec.params)
        options = dict(wspec.options)
        phases = [registry.make(p, options, wspec.phase_steps.get(p)) for p in wspec.phases]
        trace = run_workload(
            spec,
            params,
            phases,
            workload_dir=workload_dir,
            tensorboard_dir=Path(wspec.tensorboard_dir),
            progress=progress,
            write=write,
            warmup_steps=wspec.warmup_steps,
            metric_points=wspec.metric_points,
            options=options,
        )
        write(trace)
        return 0
    except BaseException as exc:  # record any failure, including KeyboardInterrupt
        tail = error_tail(exc)
        atomic_write_text(workload_dir / ERROR_FILE, tail + "\n")
        if last:
            dataclasses.replace(last[0], status=FAILED, error=tail).save(out)
        print(tail, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
