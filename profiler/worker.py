"""The workload process: build one loop, run warm-up and the phases as windows of it.

Place in the pipeline: ``profiler.runner`` starts ``python -m profiler.worker SPEC.json`` once per
workload; this module builds the loop, runs it phase by phase (``profiler.phases``) and writes
the ``WorkloadTrace`` (``profiler.model``) as ``model.json.gz`` in the workload's folder. It
rewrites that file after every phase with status ``partial``, so a later crash or time-out
keeps what was measured. Progress goes to the runner as JSON lines on the file descriptor named
by ``PROFILER_PROGRESS_FD``.

``run_workload`` is the whole schedule as a function of a spec, a clock and callbacks, so tests
drive it with a fake clock and a fake workload.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler.clock import Clock, now_ns
from profiler.model import (
    FAILED,
    OK,
    PARTIAL,
    SKIPPED,
    UNAVAILABLE,
    Gap,
    MetricPoint,
    PhaseRecord,
    Segment,
    Window,
    WorkloadTrace,
    median_ns,
    to_jsonable,
)
from profiler.phases import Phase, PhaseContext, PhaseUnavailable
from workloads.base import Loop, Params, StepWrapper, WorkloadSpec

MODEL_FILE = "model.json.gz"
ERROR_TAIL_LINES = 12

Progress = Callable[[dict[str, Any]], None]


class LoopError(RuntimeError):
    """The training loop itself raised: the workload fails (a phase's own failure does not)."""


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


def error_tail(exc: BaseException, lines: int = ERROR_TAIL_LINES) -> str:
    """The last lines of an exception's traceback, ending with the exception itself.

    For a ``LoopError`` the tail is the loop's own exception, headed by where it happened.
    """
    if isinstance(exc, LoopError) and exc.__cause__ is not None:
        text = "".join(traceback.format_exception(exc.__cause__)).rstrip().splitlines()
        return "\n".join([str(exc), *text[-(lines - 1) :]])
    text = "".join(traceback.format_exception(exc)).rstrip().splitlines()
    return "\n".join(text[-lines:])


def measure_marker_cost(clock: Clock, n: int = 20_000, repeats: int = 5) -> int:
    """Nanoseconds one step marker adds to a step: the driver with a no-op step minus a bare loop.

    This is the whole per-step cost of ``Loop.run``'s hot path (the step call and one
    ``append(clock())``), measured in this process; median of ``repeats``.
    """
    costs = []
    for _ in range(repeats):
        marks: list[int] = []
        append = marks.append

        def noop() -> None:
            pass

        t0 = clock()
        for _ in range(n):
            noop()
            append(clock())
        t1 = clock()
        for _ in range(n):
            pass
        t2 = clock()
        costs.append(max(0, ((t1 - t0) - (t2 - t1)) // n))
    return median_ns(costs)


class _Schedule:
    """Runs windows of one loop, timestamping back-to-back steps."""

    def __init__(self, loop: Loop, clock: Clock, progress: Progress, name: str) -> None:
        self.loop = loop
        self.clock = clock
        self.progress = progress
        self.name = name
        self.metrics: list[MetricPoint] = []

    def segment(self, n: int, wrap: StepWrapper | None) -> Segment:
        first = self.loop.steps_done
        marks = [self.clock()]
        try:
            self.loop.run(n, marks, self.clock, wrap)
        except Exception as exc:
            raise LoopError(f"{self.name} raised in step {first + len(marks) - 1}") from exc
        return Segment(first_step=first, boundaries_ns=tuple(marks))

    def window(
        self,
        phase: str,
        n: int,
        *,
        wrap: StepWrapper | None = None,
        chunks: int = 1,
        rewarm: int = 0,
    ) -> Window:
        """Run ``n`` steps (after ``rewarm`` unrecorded ones) as ``chunks`` segments.

        Between segments the loss is recorded; that time is a ``Gap`` of the window.
        """
        if rewarm:
            self.segment(rewarm, wrap)
        chunks = max(1, min(chunks, n))
        per = -(-n // chunks)
        segments: list[Segment] = []
        done = 0
        while done < n:
            seg = self.segment(min(per, n - done), wrap)
            if seg.n_steps == 0:
                raise RuntimeError(f"{self.name}: the loop ran no steps when asked for some")
            segments.append(seg)
            # A loop may run more than asked (Keras runs whole epochs); count what it ran.
            done += seg.n_steps
            self.progress({"workload": self.name, "phase": phase, "done": min(done, n), "total": n})
            if chunks > 1:
                self.record_metric(seg.end_ns)
        gaps = tuple(
            Gap(a.end_ns, b.start_ns - a.end_ns, "metric") for a, b in itertools.pairwise(segments)
        )
        return Window(phase=phase, segments=tuple(segments), gaps=gaps, rewarm_steps=rewarm)

    def record_metric(self, start_ns: int | None = None) -> None:
        t0 = self.clock() if start_ns is None else start_ns
        value = self.loop.loss()
        cost = self.clock() - t0
        self.metrics.append(
            MetricPoint(step=self.loop.steps_done - 1, name="loss", value=value, cost_ns=cost)
        )


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
    sched = _Schedule(loop, clock, progress, spec.name)
    sched.record_metric()  # the initial loss, before any step
    warmup = sched.window("warmup", warmup_steps)
    tail = warmup.durations_ns()[len(warmup.durations_ns()) // 2 :]
    step_ns = median_ns(tail) if tail else 1
    marker_cost = measure_marker_cost(clock)
    ctx = PhaseContext(
        spec=spec,
        loop=loop,
        workload_dir=workload_dir,
        tensorboard_dir=tensorboard_dir,
        clock=clock,
        options={"metric_points": metric_points, **(options or {})},
        step_ns=step_ns,
    )
    records: list[PhaseRecord] = []

    def snapshot(status: str) -> WorkloadTrace:
        return WorkloadTrace(
            workload=spec.name,
            params={"steps": params.steps, "n": params.n, "seed": params.seed, "k": params.k},
            work=loop.work,
            build_ns=build_ns,
            warmup=warmup,
            phases=tuple(records),
            metrics=tuple(sched.metrics),
            marker_cost_ns=marker_cost,
            final=loop.params(),
            status=status,
        )

    write(snapshot(PARTIAL))
    for phase in phases:
        records.append(_run_phase(phase, ctx, sched, params))
        if phase.name != "timed" and records[-1].window is not None:
            sched.record_metric()
        write(snapshot(PARTIAL))
    trace = snapshot(OK)
    loop.close()
    return trace


def _run_phase(phase: Phase, ctx: PhaseContext, sched: _Schedule, params: Params) -> PhaseRecord:
    why_not = phase.applies_to(ctx.spec)
    if why_not:
        return PhaseRecord(name=phase.name, status=SKIPPED, reason=why_not)
    scale = float(ctx.options.get("time_scale", 1.0))
    steps = params.steps if phase.name == "timed" else phase.budget.steps_for(ctx.step_ns, scale)
    if phase.name != "timed" and phase.budget.steps is None:
        steps = phase.window_steps(ctx, steps)
    installed = False
    try:
        phase.install(ctx)
        installed = True
        window = sched.window(
            phase.name,
            steps,
            wrap=phase.step_wrapper(ctx),
            chunks=int(ctx.options.get("metric_points", 20)) if phase.records_metrics else 1,
            rewarm=phase.budget.rewarm if phase.name != "timed" else 0,
        )
        record = phase.remove(ctx, window)
        installed = False
        return record
    except PhaseUnavailable as exc:
        return PhaseRecord(name=phase.name, status=UNAVAILABLE, reason=str(exc))
    except LoopError:
        if installed:
            try:
                phase.abort(ctx)
            except Exception:
                pass
        raise
    except Exception as exc:  # a failing phase must not take the workload down
        if installed:
            try:
                phase.abort(ctx)
            except Exception:
                pass
        return PhaseRecord(name=phase.name, status=FAILED, reason=error_tail(exc))


def _write_trace(path: Path, trace: WorkloadTrace) -> None:
    from profiler.rundir import atomic_write_bytes

    data = json.dumps(to_jsonable(trace), separators=(",", ":")).encode()
    atomic_write_bytes(path, gzip.compress(data, compresslevel=5))


def progress_writer() -> Progress:
    """Progress events to the runner, on the pipe named by ``PROFILER_PROGRESS_FD``."""
    fd = os.environ.get("PROFILER_PROGRESS_FD")
    if not fd:
        return lambda _e: None
    stream = os.fdopen(int(fd), "w", buffering=1)

    def emit(event: dict[str, Any]) -> None:
        try:
            stream.write(json.dumps(event) + "\n")
        except OSError:
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
    try:
        run(spec, progress=progress_writer())
        return 0
    except BaseException as exc:
        (Path(spec.out_dir) / "error.txt").write_text(error_tail(exc) + "\n")
        return 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of the workload process. Exit 0 done, 1 the workload failed."""
    from profiler.phases import registry
    from workloads.base import load_ref

    args = sys.argv[1:] if argv is None else argv
    wspec = WorkerSpec.from_json(Path(args[0]).read_text())
    workload_dir = Path(wspec.workload_dir)
    out = workload_dir / MODEL_FILE
    progress = progress_writer()
    last: list[WorkloadTrace] = []

    def write(trace: WorkloadTrace) -> None:
        last[:] = [trace]
        _write_trace(out, trace)

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
        (workload_dir / "error.txt").write_text(tail + "\n")
        if last:
            from dataclasses import replace

            _write_trace(out, replace(last[0], status=FAILED, error=tail))
        print(tail, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
