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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profiler.capture import schedule
from profiler.capture.loop import (
    KERAS,
    NUMPY,
    TF1,
    TF2,
    LoopEnded,
    Params,
    WorkloadSpec,
)
from profiler.capture.phases import Phase, PhaseContext
from profiler.capture.phases import sampled as sampled_mod
from profiler.capture.schedule import LoopError, Progress, Windows, error_tail, run_phase
from profiler.capture.script import facts
from profiler.capture.script.driver import ScriptLoop, StepDriver
from profiler.capture.script.startup import StartupCapture
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
    median_ns,
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


# --- the schedule -------------------------------------------------------------------------------


#: The order of a script's phases: when its steps run out, the ones that attribute a step on
#: their own come first (timed: the wall time; sampled: every category but the kernels';
#: framework: the kernels), then the ones that refine it (hooks: the Python side of the call;
#: lines: line by line), and last the what-ifs, which change the loop.
SCRIPT_ORDER: tuple[str, ...] = ("timed", "sampled", "framework", "hooks", "lines", "whatif")
#: The smallest window of each phase in a script (steps): a slow step (a 70 ms Keras batch)
#: still gets every phase from a few hundred steps.
SCRIPT_FLOORS: dict[str, int] = {
    "timed": 10,
    "sampled": 10,
    "framework": 5,
    "hooks": 10,
    "lines": 5,
    "whatif": 2,
}
#: The time each phase's window aims at in a script: shorter than a registered workload's, so
#: a script of a few seconds gets every phase.
SCRIPT_TARGETS: dict[str, float] = {
    "timed": 0.5,
    "sampled": 1.0,
    "framework": 0.3,
    "hooks": 0.5,
    "lines": 0.4,
    "whatif": 0.01,
}
#: Re-warm steps after a phase is installed: about this long, at least 2.
REWARM_S = 0.15
#: A script's warm-up: about ``WARMUP_S`` of steps after the first, between ``WARMUP_MIN`` and
#: ``WARMUP_MAX`` steps in all (``--warmup N`` fixes it), at most a tenth of the steps known.
WARMUP_S = 0.3
WARMUP_MIN = 3
WARMUP_MAX = 20
#: Steps a phase runs itself after its window (hooks on/off blocks, FULL_TRACE), at most this
#: long in a script.
EXTRA_S = 1.0


@dataclass
class Outcome:
    """What the schedule measured, read by the script process to write the trace."""

    warmup: Window = field(default_factory=lambda: Window("warmup", ()))
    records: list[PhaseRecord] = field(default_factory=list)
    work: WorkDecl = field(default_factory=lambda: WorkDecl(1, 1, 1, 0, 0))
    params: dict[str, Any] = field(default_factory=lambda: Params(steps=1, n=1).as_dict())
    marker_cost_ns: int = 0
    kind: str = ""
    mode: str = ""
    plan: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    detected: bool = False
    step_ns: int = 0
    error: str = ""
    startup: dict[str, Any] = field(default_factory=dict)
    #: Phases that apply to the script but got no steps (it ended first).
    missed: list[str] = field(default_factory=list)


class Schedule:
    """The schedule of one script run (module docstring); ``run`` is the thread's body.

    Args:
        spec: the script's spec (its ``framework`` is replaced by what the script used).
        driver: the script's step driver.
        phases: the phases asked for (they run in ``SCRIPT_ORDER``).
        workload_dir, tensorboard_dir: where artefacts go.
        options: phase options (``time_scale``, ``sample_rate`` ...).
        warmup_steps: steps of the warm-up (the first step included); None: sized by time.
        timed_steps: the timed window's steps (None: about a second of steps).
        max_steps: ``--max-steps`` (None: no limit).
        expected_steps: how many steps the script runs, when an earlier run of it said so
            (``--repeat``): the windows fit into them.
        line_targets: the step functions (filled while the script defines them).
        module_target: the script's module code as a function line_profiler can register.
        allow_native: whether the start-up capture may use py-spy's ``--native`` (while no
            heavy framework is loaded).
        script_span: returns (start, end) of the script's run once it has ended.
        write: called with the outcome after every phase (partial traces).
        live: the code runs in the caller's process (``profiler.capture.live``): no
            ``--repeat`` to suggest.
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
        warmup_steps: int | None,
        timed_steps: int | None,
        max_steps: int | None,
        line_targets: list[Callable[..., Any]],
        module_target: Callable[..., Any] | None,
        allow_native: bool,
        script_span: Callable[[], tuple[int, int]],
        write: Callable[[Outcome], None],
        expected_steps: int | None = None,
        live: bool = False,
    ) -> None:
        self.spec = spec
        self.live = live
        self.driver = driver
        order = {name: i for i, name in enumerate(SCRIPT_ORDER)}
        self.phases = sorted(phases, key=lambda p: order.get(p.name, len(order)))
        self.workload_dir = workload_dir
        self.tensorboard_dir = tensorboard_dir
        self.clock = clock
        self.options = options
        self.warmup_steps = warmup_steps
        self.timed_steps = timed_steps
        self.max_steps = max_steps
        self.expected_steps = expected_steps
        self.line_targets = line_targets
        self.module_target = module_target
        self.allow_native = allow_native
        self.script_span = script_span
        self.write = write
        self.loop = ScriptLoop(driver, work=WorkDecl(1, 1, 1, 0, 0))
        self.sched = ScriptWindows(self.loop, clock, progress, spec.name)
        self.out = Outcome()
        self.startup: StartupCapture | None = None

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
            if self.startup is not None:
                self.startup.abort()
        finally:
            if self.startup is not None:
                self.out.startup = self.startup.record.to_json()
            self.loop.finish()

    def start_capture(self) -> StartupCapture | None:
        """py-spy on the process from the start, in case no step is ever detected (started on
        the schedule's thread while the script starts; an import may switch it meanwhile)."""
        if "sampled" not in {p.name for p in self.phases}:
            return None
        capture = StartupCapture(self._ctx(self.spec), self.options, self.allow_native)
        self.startup = capture
        if not capture.start():
            self.out.notes.append(capture.record.note)
        return capture

    def available(self) -> int | None:
        """Steps the script has left, when known: ``--max-steps``, a Keras ``fit``'s epochs
        times its batches, or what an earlier run of the script ran."""
        d = self.driver
        known = [
            n for n in (self.max_steps, d.facts.fit.get("total_steps"), self.expected_steps) if n
        ]
        return max(min(known) - d.done, 0) if known else None

    def _run(self) -> None:
        self.start_capture()
        try:
            first = self.loop.first_segment()
        except LoopEnded:
            self._no_steps()
            return
        self.out.detected = True
        self.sched.purpose = "the warm-up"
        self.sched.note_request(first)
        segments = [Segment(0, tuple(first))]
        if self.startup is not None:
            # Steps were found: the start-up capture is not needed (py-spy is stopped while
            # the script waits, a gap of the warm-up).
            self.startup.discard()
            self.sched.purpose = "warm-up: stop the start-up capture"
        segments.extend(self._warmup())
        self.out.warmup = Window("warmup", tuple(segments), self.sched.take_gaps())
        step_ns = schedule.typical_step_ns(self.out.warmup.durations_ns())
        self.out.step_ns = step_ns
        self._phases(step_ns)

    def _warmup(self) -> list[Segment]:
        """The warm-up's steps after the first: ``warmup_steps`` in all when given, else about
        ``WARMUP_S`` of steps (``WARMUP_MIN``..``WARMUP_MAX``, at most a tenth of the steps
        known to be left)."""
        out: list[Segment] = []
        try:
            if self.warmup_steps is not None:
                if self.warmup_steps > 1:
                    out.append(self.sched.segment(self.warmup_steps - 1, None))
                return out
            probe = self.sched.segment(2, None)
            out.append(probe)
            estimate = max(median_ns(list(probe.durations_ns())), 1)
            want = max(WARMUP_MIN, min(WARMUP_MAX, -(-int(WARMUP_S * 1e9) // estimate)))
            left = self.available()
            if left is not None:
                want = min(want, max(WARMUP_MIN, (left + self.driver.done) // 10))
            more = want - self.driver.done
            if more > 0:
                out.append(self.sched.segment(more, None))
        except ScriptEnded:
            pass
        return out

    def _phases(self, step_ns: int) -> None:
        kind, info, work, notes = facts.describe(self.driver)
        self.out.kind, self.out.mode, self.out.work = kind, info.mode, work
        self.out.notes.extend(notes)
        self.loop.info, self.loop.work = info, work
        targets = list(self.line_targets)
        if kind == KERAS:
            import inspect

            targets.append(inspect.unwrap(type(info.model).fit))
        if self.module_target is not None:
            targets.append(self.module_target)
        self.loop.line_targets = tuple(targets)
        source = facts.main_source(self.driver)
        self.out.marker_cost_ns = facts.detector_cost(source, self.clock)
        spec = dataclasses.replace(self.spec, framework=kind)
        scale = float(self.options.get("time_scale", 1.0))
        self.out.plan = {
            "step_us": round(step_ns / 1e3, 3),
            "steps_before": self.driver.done,
            "available": self.available(),
            "order": [p.name for p in self.phases],
            "phases": {},
        }
        timed_steps = 1
        for i, phase in enumerate(self.phases):
            ctx = self._ctx(spec, step_ns)
            slots = schedule.plan(
                self.phases[i:],
                ctx,
                timed_steps=self.timed_steps,
                available=self.available(),
                scale=scale,
                floors=SCRIPT_FLOORS,
                extra_s=EXTRA_S,
                targets=SCRIPT_TARGETS,
                rewarm_s=REWARM_S,
            )
            slot = slots.get(phase.name)
            if slot is not None:
                self.out.plan["phases"][phase.name] = {
                    **slot.to_json(),
                    "step_us": round(step_ns / 1e3, 3),
                }
                if phase.name == "timed":
                    timed_steps = slot.window
            self.out.params = Params(steps=timed_steps, n=1).as_dict()
            record = self._phase(phase, ctx, slot.window if slot else 0)
            if record.missed:
                self.out.missed.append(phase.name)
            self.out.records.append(record)
            if phase.name == "timed" and record.window is not None and record.window.n_steps:
                # The uninstrumented window is the best estimate of a step from here on.
                step_ns = median_ns(list(record.window.durations_ns()))
            self.write(self.out)

    def _phase(self, phase: Phase, ctx: PhaseContext, planned: int) -> PhaseRecord:
        d = self.driver
        if phase.applies_to(ctx.spec) is not None:
            return run_phase(phase, ctx, self.sched, planned)
        if d.ended:
            return PhaseRecord(
                phase.name,
                SKIPPED,
                reason=self._ended(f"before the {phase.name} window"),
                missed=True,
            )
        if phase.name == "lines" and not ctx.loop.line_targets and ctx.spec.framework != TF1:
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
                phase.name,
                SKIPPED,
                reason=self._ended(f"during the {phase.name} re-warm steps"),
                missed=True,
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
        if self.live:
            if d.end_reason == "max_steps":
                return f"the measured steps ended after {d.done} steps {where}: measure more"
            return (
                f"the code ended after {d.done} steps {where}: give max_steps=N (the steps "
                "it runs) so that the windows fit into them, or run it longer"
            )
        if d.end_reason == "max_steps":
            return (
                f"--max-steps {self.max_steps} reached {where}: a larger --max-steps, or "
                "--repeat 1 to measure it in another run of the script"
            )
        return (
            f"the script ended after {d.done} steps {where}: --repeat 1 measures it in another "
            f"run of the script (the windows then fit into its {d.done} steps)"
        )

    def _no_steps(self) -> None:
        """No step was detected: the whole run is one step, sampled by the start-up capture."""
        start_ns, end_ns = self.script_span()
        whole = Segment(0, (start_ns, max(end_ns, start_ns)))
        names = [p.name for p in self.phases]
        framework = TF2 if sampled_mod.heavy_framework_loaded() else NUMPY
        spec = dataclasses.replace(self.spec, framework=framework)
        self.out.notes.append(NOT_DETECTED)
        startup, self.startup = self.startup, None
        for name in names:
            if name == "timed":
                rec = PhaseRecord("timed", OK, Window("timed", (whole,)), reason=NOT_DETECTED)
            elif name == "sampled" and startup is not None:
                try:
                    got = startup.finish(self._ctx(spec), Window("sampled", (whole,)))
                    rec = (
                        dataclasses.replace(got, reason="the whole run: " + NOT_DETECTED)
                        if got is not None
                        else PhaseRecord("sampled", UNAVAILABLE, reason=startup.record.note)
                    )
                except Exception as exc:  # keep the rest of the record
                    rec = PhaseRecord("sampled", FAILED, reason=error_tail(exc))
            else:
                rec = PhaseRecord(name, SKIPPED, reason=NOT_DETECTED)
            self.out.records.append(rec)
        if startup is not None:
            self.out.startup = startup.record.to_json()
            startup.abort()
