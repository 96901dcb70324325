"""The phase schedule of a script process: windows cut from the script's single run.

Place in the pipeline: runs on its own thread of the script process
(``profiler.capture.script.worker``) while the script runs on the main thread; it asks for steps
through ``ScriptLoop`` (``profiler.capture.script.driver``) and reuses the registered workloads'
machinery unchanged: ``profiler.capture.schedule`` (``run_phase``: install, re-warm, window, remove,
failure isolation; ``plan``: the windows' sizes) over ``ScriptWindows``, whose windows the script's
detected steps fill.

The schedule, in steps of the script:

1. **the first step** is requested before the script starts. Meanwhile py-spy attaches
   (the *start-up capture*), so that if no step is ever detected the whole run is sampled
   and attributed as one step; once a step is detected that capture is dropped;
2. **warm-up**: ``warmup_steps`` steps in all (its second half's median step time sizes every
   budget; what the warm-up costs beyond the steady state is the one-off line);
3. **each phase** in ``PHASE_ORDER`` that applies: its window's size from its ``Budget`` and the
   warm-up's step time (``plan``), scaled down to fit ``--max-steps`` when given, after its
   re-warm steps. Framework detection is by what the script used: the phases see a spec whose
   ``framework`` is ``tf1`` (a ``Session.run`` was seen), ``keras`` (``fit``), ``tf2``
   (``tf.function`` calls, or TensorFlow imported: eager) or ``numpy`` (no TensorFlow);
4. **free run**: after the last phase the script runs on; boundaries are only counted.

Where the script ends before a phase, that phase is ``skipped`` and says so; a window the end
cut short is kept with the steps it has. A window's ``gaps`` are the stretches without a step
since the previous phase's window: removing and installing phases, the hand-offs, the steps a
phase ran itself after its window are in no gap (they are steps, in no window).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler import markers
from profiler.capture import schedule
from profiler.capture.loop import (
    EAGER,
    FUNCTION,
    KERAS,
    NUMPY,
    TF1,
    TF2,
    LoopEnded,
    LoopInfo,
    Params,
    WorkloadSpec,
)
from profiler.capture.phases import Phase, PhaseContext, PhaseUnavailable
from profiler.capture.phases.registry import PHASES
from profiler.capture.schedule import LoopError, Progress, Windows, error_tail, run_phase
from profiler.capture.script.driver import ScriptLoop, StepDriver
from profiler.clock import Clock
from profiler.model import (
    FAILED,
    OK,
    SKIPPED,
    UNAVAILABLE,
    Gap,
    PhaseRecord,
    Segment,
    Window,
    WorkDecl,
)

#: What the report says when no step was found, and how to mark them.
NOT_DETECTED = (
    "steps were not detected: the whole run is one step, attributed from py-spy samples. Mark "
    "the steps with --step-function NAME (each call of a function of the script), --step-line "
    "FILE:LINE (each execution of a line of its loop) or `with profiler.step():` in the script"
)


class ScriptEnded(LoopError):
    """The script ended (or was stopped) before a phase's window got a step."""


class ScriptWindows(Windows):
    """``Windows`` over a script: windows are one segment of whatever the script ran.

    There is no evaluation loss to record between segments (a script's metrics come from
    ``profiler.metric``), so ``chunks`` is ignored. Gaps between requests are collected and
    handed to the windows (``take_gaps``).
    """

    loop: ScriptLoop

    def __init__(self, loop: ScriptLoop, clock: Clock, progress: Progress, name: str) -> None:
        super().__init__(loop, clock, progress, name)
        self.gaps: list[Gap] = []
        self.last_end_ns = 0
        self.purpose = "the first step"

    def segment(self, n: int, wrap: Any) -> Segment:
        first = self.loop.steps_done
        marks = [self.clock()]
        try:
            self.loop.run(n, marks, self.clock, wrap)
        except LoopEnded as exc:
            raise ScriptEnded(str(exc)) from None
        seg = Segment(first_step=first, boundaries_ns=tuple(marks))
        self.note_request(seg.boundaries_ns)
        return seg

    def note_request(self, marks: tuple[int, ...] | list[int]) -> None:
        """Record the stretch without steps before a request's first step."""
        if len(marks) < 2:
            return
        if self.last_end_ns:
            self.gaps.append(Gap(self.last_end_ns, marks[0] - self.last_end_ns, self.purpose))
        self.last_end_ns = marks[-1]

    def take_gaps(self) -> tuple[Gap, ...]:
        out, self.gaps = tuple(self.gaps), []
        return out

    def window(
        self,
        phase: str,
        n: int,
        *,
        wrap: Any = None,
        chunks: int = 1,
        rewarm: int = 0,
    ) -> Window:
        """``rewarm`` unrecorded steps, then one segment of up to ``n`` steps."""
        self.purpose = f"phase switch before {phase}"
        if rewarm:
            self.segment(rewarm, wrap)
            self.purpose = f"{phase}: re-warm steps to window"
        seg = self.segment(n, wrap)
        self.progress({"workload": self.name, "phase": phase, "done": seg.n_steps, "total": n})
        # Steps a phase runs itself while it is removed (FULL_TRACE, hooks on/off) go next.
        self.purpose = f"{phase}: its own extra steps after the window"
        return Window(phase=phase, segments=(seg,), rewarm_steps=rewarm)


# --- what the script used ----------------------------------------------------------------------


def _feed_dict(call: tuple[tuple[Any, ...], dict[str, Any]] | None) -> dict[Any, Any]:
    if call is None:
        return {}
    args, kwargs = call
    feeds = kwargs.get("feed_dict", args[1] if len(args) > 1 else None)
    return feeds if isinstance(feeds, dict) else {}


def describe(driver: StepDriver) -> tuple[str, LoopInfo, WorkDecl, list[str]]:
    """What the script's steps are: (framework kind, loop info for the phases, work, notes)."""
    f = driver.facts
    counts = {name: det.steps for name, det in driver.detectors.items()}
    calls = {name: det.calls for name, det in driver.detectors.items()}
    notes: list[str] = []
    samples, updates, per_epoch = 1, 1, 1
    if f.session is not None:
        kind = TF1
        info = LoopInfo(kind=TF1, session=f.session)
        if f.session_call is not None:
            fetches = (
                f.session_call[0][0] if f.session_call[0] else f.session_call[1].get("fetches")
            )
            feeds = _feed_dict(f.session_call)
            arrays = [v for v in feeds.values() if hasattr(v, "shape") and hasattr(v, "dtype")]
            # The hooks phase times casting the fed arrays to float32: only when that is the
            # placeholders' type.
            cast = arrays and all(
                getattr(getattr(k, "dtype", None), "name", "") == "float32" for k in feeds
            )
            info = dataclasses.replace(
                info,
                fetches=len(fetches) if isinstance(fetches, (list, tuple, dict)) else 1,
                feeds=len(feeds),
                feed_arrays=tuple(arrays) if cast else (),
            )
            rows = {a.shape[0] for a in arrays if len(a.shape) > 0}
            if len(rows) == 1:
                samples = int(rows.pop())
                notes.append(
                    f"samples per step: {samples}, the leading dimension of the arrays fed to "
                    "session.run (inferred)"
                )
    elif f.model is not None:
        kind = KERAS
        info = LoopInfo(kind=KERAS, model=f.model)
        samples = int(f.fit.get("batch_size") or 32)
        per_epoch = int(f.fit.get("steps_per_epoch") or 1)
        notes.append(
            f"samples per step: fit's batch size ({samples}); an epoch is {per_epoch} batches"
        )
    elif counts.get("tf_function") or calls.get("tf_function"):
        kind, info = TF2, LoopInfo(kind=TF2, mode=FUNCTION)
    elif "tensorflow" in sys.modules:
        kind, info = TF2, LoopInfo(kind=TF2, mode=EAGER)
    else:
        kind, info = NUMPY, LoopInfo(kind=NUMPY)
    marked = counts.get("markers", 0)
    if f.marked_work and marked:
        samples = max(1, round(f.samples / marked))
        updates = max(1, round(f.updates / marked))
        notes.append(f"work per step from profiler.step(): {samples} samples, {updates} updates")
    work = WorkDecl(
        samples_per_step=max(samples, 1),
        updates_per_step=max(updates, 1),
        steps_per_epoch=max(per_epoch, 1),
        flops_per_step=0,
        bytes_per_step=0,
    )
    return kind, info, work, notes


def main_source(driver: StepDriver) -> str | None:
    """The detector that ended the most steps (None: no step)."""
    best = max(driver.detectors.values(), key=lambda d: d.steps, default=None)
    return best.name if best is not None and best.steps else None


def detector_cost(source: str | None, clock: Clock) -> int:
    """Nanoseconds ``source``'s detector adds to a step, measured on a free-running driver:
    the same wrapper (or marker, or line mark) around a no-op against the bare no-op
    (``schedule.overhead_ns``). Keras's own callback dispatch is not included."""
    from profiler.capture.script import detect

    scratch = StepDriver(clock)
    scratch.run_free()

    def noop(*_a: Any, **_k: Any) -> None:
        return None

    marked: Callable[[], Any]
    bare: Callable[[], Any] = noop
    if source == "tf1_session":
        run = detect.wrap_session_run(noop, scratch)
        marked = lambda: run(None, 0, feed_dict=None)  # noqa: E731
        bare = lambda: noop(None, 0, feed_dict=None)  # noqa: E731
    elif source == "markers":
        m = markers.Marker(scratch, claimed=True)

        def marked() -> None:
            with m:
                pass

    elif source == "step_line":
        marked = detect.step_line_marks(scratch)[0]
    elif source == "keras_fit":
        begin, end = detect.keras_marks(scratch)
        marked = lambda: (begin(), end())  # noqa: E731
    else:
        marked = detect.wrap_call(noop, scratch, "cost")
    return schedule.overhead_ns(marked, bare, clock)


# --- the schedule -------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What the schedule measured, read by the script process to write the trace."""

    warmup: Window = field(default_factory=lambda: Window("warmup", ()))
    records: list[PhaseRecord] = field(default_factory=list)
    work: WorkDecl = field(default_factory=lambda: WorkDecl(1, 1, 1, 0, 0))
    params: dict[str, Any] = field(default_factory=lambda: Params(steps=1, n=1).as_dict())
    marker_cost_ns: int = 0
    kind: str = ""
    plan: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    detected: bool = False
    step_ns: int = 0
    error: str = ""


class Schedule:
    """The schedule of one script run (module docstring); ``run`` is the thread's body.

    Args:
        spec: the script's spec (its ``framework`` is replaced by what the script used).
        driver: the script's step driver.
        phases: the phases asked for, in ``PHASE_ORDER``.
        workload_dir, tensorboard_dir: where artefacts go.
        options: phase options (``time_scale``, ``sample_rate`` ...).
        warmup_steps: steps of the warm-up (the first step included).
        timed_steps: the timed window's steps (None: about a second of steps).
        max_steps: ``--max-steps`` (None: no limit).
        line_targets: the step functions (filled while the script defines them).
        module_target: the script's module code as a function line_profiler can register.
        startup_native: whether the start-up capture may use py-spy's ``--native``.
        script_span: returns (start, end) of the script's run once it has ended.
        write: called with the outcome after every phase (partial traces).
    """

    def __init__(
        self,
        *,
        spec: WorkloadSpec,
        driver: StepDriver,
        phases: list[Phase],
        workload_dir: Path,
        tensorboard_dir: Path,
        clock: Clock,
        progress: Progress,
        options: dict[str, Any],
        warmup_steps: int,
        timed_steps: int | None,
        max_steps: int | None,
        line_targets: list[Callable[..., Any]],
        module_target: Callable[..., Any] | None,
        startup_native: bool,
        script_span: Callable[[], tuple[int, int]],
        write: Callable[[Outcome], None],
    ) -> None:
        self.spec = spec
        self.driver = driver
        self.phases = phases
        self.workload_dir = workload_dir
        self.tensorboard_dir = tensorboard_dir
        self.clock = clock
        self.options = options
        self.warmup_steps = warmup_steps
        self.timed_steps = timed_steps
        self.max_steps = max_steps
        self.line_targets = line_targets
        self.module_target = module_target
        self.startup_native = startup_native
        self.script_span = script_span
        self.write = write
        self.loop = ScriptLoop(driver, work=WorkDecl(1, 1, 1, 0, 0))
        self.sched = ScriptWindows(self.loop, clock, progress, spec.name)
        self.out = Outcome()

    def _ctx(self, spec: WorkloadSpec, step_ns: int = 0) -> PhaseContext:
        return PhaseContext(
            spec=spec,
            loop=self.loop,
            workload_dir=self.workload_dir,
            tensorboard_dir=self.tensorboard_dir,
            clock=self.clock,
            options={**self.options, "metric_points": 1},
            step_ns=step_ns,
        )

    def run(self) -> None:
        """The thread's body: never raises; always lets the script run free at the end."""
        try:
            self._run()
        except BaseException as exc:  # a bug here must not take the script down
            self.out.error = f"the phase schedule failed: {error_tail(exc)}"
        finally:
            self.loop.finish()

    def _startup_capture(self) -> Any:
        """py-spy on the process from the start, in case no step is ever detected."""
        if "sampled" not in {p.name for p in self.phases}:
            return None
        from profiler.capture.phases.sampled import SampledPhase

        native = "auto" if self.startup_native else "off"
        phase = SampledPhase(PHASES["sampled"][1], {**self.options, "sample_native": native})
        try:
            phase.install(self._ctx(self.spec))
        except PhaseUnavailable as exc:
            self.out.notes.append(f"no start-up capture: {exc}")
            return None
        return phase

    def _run(self) -> None:
        startup = self._startup_capture()
        try:
            first = self.loop.first_segment()
        except LoopEnded:
            self._no_steps(startup)
            return
        self.out.detected = True
        self.sched.purpose = "the warm-up"
        self.sched.note_request(first)
        segments = [Segment(0, tuple(first))]
        if startup is not None:
            # Steps were found: the start-up capture is not needed (py-spy is stopped while
            # the script waits, a gap of the warm-up).
            from profiler.capture.phases import sampled

            cap, startup.capture = startup.capture, None
            sampled.kill(cap)
            self.sched.purpose = "warm-up: stop the start-up capture"
        try:
            if self.warmup_steps > 1:
                segments.append(self.sched.segment(self.warmup_steps - 1, None))
        except ScriptEnded:
            pass
        self.out.warmup = Window("warmup", tuple(segments), self.sched.take_gaps())
        step_ns = schedule.typical_step_ns(self.out.warmup.durations_ns())
        self.out.step_ns = step_ns
        self._phases(step_ns)

    def _phases(self, step_ns: int) -> None:
        kind, info, work, notes = describe(self.driver)
        self.out.kind, self.out.work = kind, work
        self.out.notes.extend(notes)
        self.loop.info, self.loop.work = info, work
        targets = list(self.line_targets)
        if kind == KERAS:
            import inspect

            targets.append(inspect.unwrap(type(info.model).fit))
        if self.module_target is not None:
            targets.append(self.module_target)
        self.loop.line_targets = tuple(targets)
        source = main_source(self.driver)
        self.out.marker_cost_ns = detector_cost(source, self.clock)
        spec = dataclasses.replace(self.spec, framework=kind)
        ctx = self._ctx(spec, step_ns)
        done = self.driver.done
        available = self.max_steps - done if self.max_steps is not None else None
        scale = float(self.options.get("time_scale", 1.0))
        slots = schedule.plan(
            self.phases, ctx, timed_steps=self.timed_steps, available=available, scale=scale
        )
        self.out.plan = {
            "step_us": round(step_ns / 1e3, 3),
            "steps_before": done,
            "available": available,
            "phases": {k: v.to_json() for k, v in slots.items()},
        }
        timed = slots.get("timed")
        self.out.params = Params(steps=timed.window if timed else 1, n=1).as_dict()
        self.write(self.out)
        for phase in self.phases:
            slot = slots.get(phase.name)
            self.out.records.append(self._phase(phase, ctx, slot.window if slot else 0))
            self.write(self.out)

    def _phase(self, phase: Phase, ctx: PhaseContext, planned: int) -> PhaseRecord:
        d = self.driver
        if d.ended:
            return PhaseRecord(
                phase.name, SKIPPED, reason=self._ended(f"before the {phase.name} window")
            )
        if (
            phase.name == "lines"
            and not ctx.loop.line_targets
            and ctx.spec.framework != TF1
            and phase.applies_to(ctx.spec) is None
        ):
            return PhaseRecord(
                phase.name,
                UNAVAILABLE,
                reason="no function of the script to profile line by line: name the step's "
                "function with --step-function NAME",
            )
        try:
            record = run_phase(phase, ctx, self.sched, planned)
        except ScriptEnded:
            return PhaseRecord(
                phase.name, SKIPPED, reason=self._ended(f"during the {phase.name} re-warm steps")
            )
        if record.window is not None:
            window = dataclasses.replace(record.window, gaps=self.sched.take_gaps())
            record = dataclasses.replace(record, window=window)
            if planned and window.n_steps < planned:
                cut = f"the script ended after {window.n_steps} of this window's {planned} steps"
                record = dataclasses.replace(
                    record, reason=f"{record.reason}; {cut}" if record.reason else cut
                )
        return record

    def _ended(self, where: str) -> str:
        d = self.driver
        why = (
            f"--max-steps {self.max_steps} reached"
            if d.end_reason == "max_steps"
            else f"the script ended after {d.done} steps"
        )
        return (
            f"{why} {where}; to fit every phase into a run of N steps, pass --max-steps N "
            "(or --quick for shorter windows)"
        )

    def _no_steps(self, startup: Any) -> None:
        """No step was detected: the whole run is one step, sampled by the start-up capture."""
        start_ns, end_ns = self.script_span()
        whole = Segment(0, (start_ns, max(end_ns, start_ns)))
        names = [p.name for p in self.phases]
        spec = dataclasses.replace(
            self.spec, framework="tf2" if "tensorflow" in sys.modules else "numpy"
        )
        self.out.notes.append(NOT_DETECTED)
        for name in names:
            if name == "timed":
                rec = PhaseRecord("timed", OK, Window("timed", (whole,)), reason=NOT_DETECTED)
            elif name == "sampled" and startup is not None:
                try:
                    rec = startup.remove(self._ctx(spec), Window("sampled", (whole,)))
                    rec = dataclasses.replace(rec, reason="the whole run: " + NOT_DETECTED)
                except Exception as exc:  # keep the rest of the record
                    rec = PhaseRecord("sampled", FAILED, reason=error_tail(exc))
            else:
                rec = PhaseRecord(name, SKIPPED, reason=NOT_DETECTED)
            self.out.records.append(rec)
        if startup is not None and "sampled" not in names:
            startup.abort(self._ctx(spec))
