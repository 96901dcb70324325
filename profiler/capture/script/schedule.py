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
   (``tf.function`` calls, or TensorFlow imported: eager) or ``numpy`` (no TensorFlow).
   An uninstrumented **reference block** (``REF_S`` of steps, ``ReferenceBlock``) runs before
   an instrumented window that does not follow the timed window or another block, and after
   each instrumented window: every window has its uninstrumented neighbours, taken at nearly
   the same moment (``profiler.analysis.stats.drift``);
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
from profiler.capture import threads as thread_cpu
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
from profiler.capture.script.agree import Agreement
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
    ReferenceBlock,
    Sample,
    Segment,
    Window,
    WorkDecl,
    median_ns,
    tfdata,
)
from profiler.model.records import ThreadCpu

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
        #: The threads' CPU over the last timed window (``profiler.capture.threads``).
        self.cpu: ThreadCpu | None = None
        #: The timed and sampled windows' time limits and their fewest steps
        #: (``TIMED_CAP_FACTOR``), by phase.
        self.caps: dict[str, tuple[int, int]] = {}
        self._cpu_start: Any = None

    def segment(self, n: int, wrap: Any, max_ns: int = 0, min_n: int = 0) -> Segment:
        first = self.loop.steps_done
        marks = [self.clock()]
        try:
            self.loop.run(n, marks, self.clock, wrap, max_ns, min_n)
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
        start = thread_cpu.read() if phase == "timed" else None
        cap = self.caps.get(phase, (0, 0))
        seg = self.segment(n, wrap, *cap)
        if start is not None:
            self._cpu_start = start
            self.cpu = thread_cpu.window(start, thread_cpu.read())
        self.progress({"workload": self.name, "phase": phase, "done": seg.n_steps, "total": n})
        # Steps a phase runs itself while it is removed (FULL_TRACE, hooks on/off) go next.
        self.purpose = f"{phase}: its own extra steps after the window"
        return Window(phase=phase, segments=(seg,), rewarm_steps=rewarm)

    def extend(self, window: Window, n: int) -> Window:
        """Up to ``n`` more uninstrumented steps for the timed ``window``, right after it (a
        segment of its own: the time between is a gap), its CPU read over both."""
        self.purpose = "timed: its window extended at its steps' time"
        seg = self.segment(n, None, *self.caps.get("timed", (0, 0)))
        if self._cpu_start is not None:
            self.cpu = thread_cpu.window(self._cpu_start, thread_cpu.read())
        self.progress({"workload": self.name, "phase": "timed", "done": seg.n_steps, "total": n})
        self.purpose = "timed: its own extra steps after the window"
        return dataclasses.replace(window, segments=(*window.segments, seg))


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
#: What each phase needs to be right, below which its window is too thin to keep (the phase is
#: then measured again in another run of the script, ``profiler.processes.rerun``): at least
#: ``NEED_STEPS`` steps and ``NEED_S`` seconds of them, at most the phase's own largest window.
#: The sampled phase needs ``NEED_SAMPLES`` samples (at the run's rate): a share's 95% interval
#: is then at most ±10 points (1.96 * sqrt(0.25 / 100)), and is stated with the samples taken.
NEED_SAMPLES = 100
#: A short sampled window samples faster to get them (the rate the run was given otherwise).
RATE_MIN_HZ = 100
RATE_MAX_HZ = 500
#: Native samples pause the process for each (py-spy unwinds its native stack): at most this
#: fast. A 20,000-step numpy loop of ~0.2 s got 12-15 samples a run at 100 Hz, 197 at 300 Hz
#: (its window stretched by the pauses; 4.9 s for the whole profiling, 3 runs).
RATE_NATIVE_MAX_HZ = 300
NEED_STEPS: dict[str, int] = {"timed": 5, "sampled": 3, "framework": 3, "hooks": 3, "lines": 3}
NEED_S: dict[str, float] = {"timed": 0.1, "framework": 0.05, "hooks": 0.1, "lines": 0.1}
#: The timed window ends, after its floor of steps, once it has taken this many times its
#: planned time (at least ``TIMED_CAP_MIN_S``): steps far slower than those the plan was made
#: from. A DQN's first 1,000 steps return before training (12 µs), then each trains (200 ms):
#: its timed window of 43,170 steps took all 2,128 of the run's, and every other phase got none.
TIMED_CAP_FACTOR = 10
TIMED_CAP_MIN_S = 2.0
#: The windows so limited: the sampled one too (a loop fitting a new model per trial, each
#: first batch tracing for 2 s among 3 ms ones: its sampled window of 292 steps took 25 s of a
#: 35 s run, and the framework, hooks, lines and what-if phases got none).
CAPPED = ("timed", "sampled")
#: The fewest steps a timed window planned at far slower steps is extended by
#: (``_extend_timed``).
EXTEND_MIN = 5
#: Steps at the end of a timed window cut by its time limit that give the step's time to plan
#: the next phases with (its median is the fast steps').
LATE_STEPS = 10
#: Re-warm steps after a phase is installed: about this long, at least 2.
REWARM_S = 0.15
#: A script's warm-up: about ``WARMUP_S`` of steps after the first, between ``WARMUP_MIN`` and
#: ``WARMUP_MAX`` steps in all (``--warmup N`` fixes it), at most a tenth of the steps known.
WARMUP_S = 0.3
WARMUP_MIN = 3
WARMUP_MAX = 20
#: The timed window's step this many times shorter than the one the windows were planned at:
#: the later windows are planned again from their budgets.
REPLAN_FACTOR = 3.0
#: Steps a phase runs itself after its window (hooks on/off blocks, FULL_TRACE), at most this
#: long in a script.
EXTRA_S = 1.0
#: Uninstrumented reference blocks between the instrumented windows (``ReferenceBlock``): about
#: ``REF_S`` of steps, at least ``REF_MIN`` steps, at most ``1 / REF_SHARE`` of the steps known
#: to the run (a short script keeps its steps for the windows) and the steps left. A phase's
#: window is compared with the blocks on either side of it, taken seconds apart at most.
REF_S = 0.05
REF_MIN = 3
REF_SHARE = 50
REF_MAX_S = 0.5
#: Known step counts below this run no reference blocks (the first run, whose count is not
#: known, has them).
REF_FEW = 1_000
#: The phases that run no instrumentation of their own in their window: no block around them
#: (the timed window is itself a reference; the what-ifs alternate their own blocks).
UNINSTRUMENTED = ("timed", schedule.LAST_EXTRA)


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
    #: The main thread's samples from the script's start to its first step (the start-up
    #: capture's, ``WorkloadTrace.before_steps``).
    before_steps: tuple[Sample, ...] = ()
    #: Phases that apply to the script but got no steps (it ended first).
    missed: list[str] = field(default_factory=list)
    #: (first, end) steps each phase held, re-warm and extra steps included, by phase.
    held: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: The uninstrumented reference blocks between the phases' windows, in step order.
    references: list[ReferenceBlock] = field(default_factory=list)


#: The phase that runs last and fits its own blocks (``schedule.LAST_EXTRA``).
LAST = schedule.LAST_EXTRA


def need_steps(phase: Phase, step_ns: int, options: dict[str, Any]) -> int:
    """The fewest steps of ``phase``'s window that measure it right at ``step_ns`` a step
    (``NEED_*``); 0 for a phase without such a floor (the what-ifs fit their own blocks)."""
    if phase.name not in NEED_STEPS:
        return 0
    if phase.name == "sampled":
        fast = RATE_MAX_HZ if isinstance(phase, sampled_mod.SampledPhase) else RATE_MIN_HZ
        if getattr(phase, "native_hint", False):
            fast = RATE_NATIVE_MAX_HZ  # native samples are not taken faster (``_sample_rate``)
        rate = int(options.get("sample_rate") or fast)
        seconds = NEED_SAMPLES / max(rate, 1)
    else:
        seconds = NEED_S.get(phase.name, 0.0)
    want = max(NEED_STEPS[phase.name], -(-int(seconds * 1e9) // max(step_ns, 1)))
    return min(want, phase.budget.max_steps)


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
        module_targets: the script's module code and the functions it defines, as functions
            line_profiler can register (``ScriptWorker.module_target``).
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
        module_targets: list[Callable[..., Any]],
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
        self.module_targets = module_targets
        self.allow_native = allow_native
        self.script_span = script_span
        self.write = write
        self.loop = ScriptLoop(driver, work=WorkDecl(1, 1, 1, 0, 0))
        # The what-ifs add pairs of blocks only where the steps known to be left allow.
        self.loop.steps_left = self.available  # type: ignore[attr-defined]
        self.sched = ScriptWindows(self.loop, clock, progress, spec.name)
        self.out = Outcome()
        self.startup: StartupCapture | None = None
        plan = options.get("job_plan")
        self.agreement = Agreement(Path(plan), chief=not options.get("job_index")) if plan else None

    def _agree(self, key: str, value: int) -> int:
        """``value``, or the job's chief's for ``key`` in a job's worker (``agree``)."""
        return self.agreement.agree(key, value) if self.agreement is not None else value

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
            # Steps were found: the start-up capture's samples say what ran before the first
            # step (py-spy is stopped while the script waits, a gap of the warm-up).
            self.startup.keep(self.driver.first_start_ns, self.clock())
            self.out.before_steps = self.startup.samples
            self.sched.purpose = "warm-up: stop the start-up capture"
        segments.extend(self._warmup())
        self.out.warmup = Window("warmup", tuple(segments), self.sched.take_gaps())
        self.write(self.out)  # a process that dies before the first phase ends keeps its steps
        step_ns = self._agree("step_ns", schedule.typical_step_ns(self.out.warmup.durations_ns()))
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
            want = max(want, self._cache_filled())
            more = self._agree("warmup_steps", want) - self.driver.done
            if more > 0:
                out.append(self.sched.segment(more, None))
        except ScriptEnded:
            pass
        return out

    def _cache_filled(self) -> int:
        """The step a ``fit``'s first epoch ends at, where its tf.data pipeline caches after a
        map and its epochs are ``CACHE_EPOCHS`` or more: the first epoch fills the cache, the
        later ones read it, and the windows belong in those (a fit of 8 epochs over 12,000
        mapped images: 18.8 ms a step in its first epoch, 7.5 ms in its last; every window
        was in the first, and its answer was the map's). 0 otherwise."""
        fit = self.driver.facts.fit or {}
        per_epoch, epochs = int(fit.get("steps_per_epoch") or 0), int(fit.get("epochs") or 0)
        if per_epoch <= 0 or epochs < tfdata.CACHE_EPOCHS:
            return 0
        for _, pipe in self.driver.facts.pipelines.seen.values():
            if tfdata.caches_after_map([st.kind for st in pipe.stages]):
                return int(fit.get("first_step") or 0) + per_epoch
        return 0

    def _phases(self, step_ns: int) -> None:
        kind, info, work, notes = facts.describe(self.driver)
        self.out.kind, self.out.mode, self.out.work = kind, info.mode, work
        self.out.notes.extend(notes)
        self.loop.info, self.loop.work = info, work
        targets = list(self.line_targets)
        if kind == KERAS:
            import inspect

            targets.append(inspect.unwrap(type(info.model).fit))
        targets.extend(self.module_targets)
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
        deferred = self._defer(spec, step_ns, scale)
        # Whether the steps just run were uninstrumented (the timed window, a reference block):
        # an instrumented window then has its neighbour before it already.
        fresh = False
        after = ""
        # Each plan sets the later phases' budgets to its windows: a timed window cut by its
        # time limit puts them back, to be planned again at the step's new time.
        budgets = {p.name: p.budget for p in self.phases}
        for i, phase in enumerate(self.phases):
            if phase.name in deferred:
                record = PhaseRecord(phase.name, SKIPPED, reason=deferred[phase.name], missed=True)
                self.out.missed.append(phase.name)
                self.out.records.append(record)
                continue
            instrumented = self._instrumented(phase, spec)
            if instrumented and not fresh:
                self._reference(step_ns, after, phase.name)
            ctx = self._ctx(spec, step_ns)
            slots = self._plan(self.phases[i:], ctx, self._room(spec, i), scale, step_ns)
            slot = slots.get(phase.name)
            if slot is not None:
                self.out.plan["phases"][phase.name] = {
                    **slot.to_json(),
                    "step_us": round(step_ns / 1e3, 3),
                }
                if phase.name == "timed":
                    timed_steps = slot.window
            self.out.params = Params(steps=timed_steps, n=1).as_dict()
            if slot is not None and phase.name == "sampled":
                self._sample_rate(phase, ctx, slot.window * step_ns)
            if slot is not None and phase.name in CAPPED:
                cap_ns = max(TIMED_CAP_FACTOR * slot.window * step_ns, int(TIMED_CAP_MIN_S * 1e9))
                self.sched.caps[phase.name] = (cap_ns, SCRIPT_FLOORS[phase.name])
            begun = self.driver.done
            record = self._phase(phase, ctx, slot.window if slot else 0)
            # Every step the phase held, its own extra steps after its window included (the
            # what-ifs' blocks, hooks on/off): none of them is an uninstrumented step.
            self.out.held[phase.name] = (begun, self.driver.done)
            if record.missed:
                self.out.missed.append(phase.name)
            self.out.records.append(record)
            if phase.name == "timed" and record.window is not None and record.window.n_steps:
                # The uninstrumented window is the best estimate of a step from here on; cut
                # by its time limit, its last steps are (the slow ones that cut it).
                durations = list(record.window.durations_ns())
                cut = slot is not None and len(durations) < slot.window and not self.driver.ended
                if cut:
                    durations = durations[-LATE_STEPS:]
                planned_ns = step_ns
                step_ns = self._agree("timed_step_ns", median_ns(durations))
                if cut or step_ns * REPLAN_FACTOR < planned_ns:
                    # The windows were sized for far slower steps (one-off first steps): planned
                    # again from here. Not for slower ones: a TF1 graph that grows each step had
                    # its windows re-planned at its later steps' time and its growth's cost read
                    # 0.2 of the step against 0.89 measured.
                    for later in self.phases[i + 1 :]:
                        later.budget = budgets[later.name]
                    if not cut:
                        phase.budget = budgets[phase.name]
                        record = self._extend_timed(phase, spec, i, step_ns, scale, record)
                        self.out.records[-1] = record
                        self.out.held[phase.name] = (begun, self.driver.done)
            if instrumented:
                # The window's neighbour after it (and the next window's before it).
                nxt = self._next_instrumented(spec, i, deferred)
                fresh = self._reference(step_ns, phase.name, nxt)
                after = phase.name
            elif phase.name == "timed":
                fresh = record.window is not None and record.window.n_steps > 0
            self.write(self.out)

    def _extend_timed(
        self,
        phase: Phase,
        spec: WorkloadSpec,
        i: int,
        step_ns: int,
        scale: float,
        record: PhaseRecord,
    ) -> PhaseRecord:
        """The timed window, planned at far slower steps (a first step that evaluates, a
        warm-up that traced), run on for the window its steps' own time plans, right after it.
        word2vec's TF1 loop evaluated its embeddings at step 1: its warm-up read 204 ms a step,
        and its timed window was 10 steps of 3.8 ms (38 ms), its median and the whole answer
        resting on them."""
        if (
            self.driver.ended
            or record.status != OK
            or record.window is None
            or self.options.get("job_worker")
        ):
            # A job's workers step together: one extending its window alone would shift
            # their later windows apart.
            return record
        ctx = self._ctx(spec, step_ns)
        slots = self._plan(self.phases[i:], ctx, self._room(spec, i), scale, step_ns)
        slot = slots.get(phase.name)
        more = (slot.window if slot is not None else 0) - record.window.n_steps
        if more < EXTEND_MIN:
            return record
        cap_ns = max(TIMED_CAP_FACTOR * more * step_ns, int(TIMED_CAP_MIN_S * 1e9))
        self.sched.caps[phase.name] = (cap_ns, 1)
        entry = self.out.plan["phases"].setdefault(phase.name, {})
        entry["extended"] = more
        entry["extended_step_us"] = round(step_ns / 1e3, 3)
        self.loop.set_active(phase.name)
        try:
            window = self.sched.extend(record.window, more)
        except ScriptEnded:
            # The steps the extension ran are lost with its segment: the window as it was.
            return record
        finally:
            self.loop.set_active("")
        self.out.params = Params(steps=window.n_steps, n=1).as_dict()
        return dataclasses.replace(record, window=window, data=self.sched.cpu)

    def _plan(
        self,
        phases: list[Phase],
        ctx: PhaseContext,
        available: int | None,
        scale: float,
        step_ns: int,
    ) -> dict[str, schedule.Slot]:
        """``schedule.plan`` with a script's floors, targets and re-warm, and the tight floors
        at ``step_ns``: the windows of ``phases`` in ``available`` steps (None: not known)."""
        return schedule.plan(
            phases,
            ctx,
            timed_steps=self.timed_steps,
            available=available,
            scale=scale,
            floors=SCRIPT_FLOORS,
            extra_s=EXTRA_S,
            targets=SCRIPT_TARGETS,
            rewarm_s=REWARM_S,
            tight_floors=self._tight_floors(step_ns),
        )

    def _tight_floors(self, step_ns: int) -> dict[str, int]:
        """The windows a plan that does not fit shrinks to: the fewest steps measuring each
        phase right at ``step_ns`` (``need_steps``), where under its floor. The segmentation
        tutorial's 18 steps of 0.8 s: 12 after the warm-up went to a sampled window of 10 (its
        floor) and its re-warm, run after run, and its kernels were never measured."""
        out = {}
        for p in self.phases:
            n = need_steps(p, step_ns, self.options)
            if n > 0:
                out[p.name] = min(SCRIPT_FLOORS.get(p.name, p.min_window), n)
        return out

    def _instrumented(self, phase: Phase, spec: WorkloadSpec) -> bool:
        """Whether ``phase`` will run instrumentation in a window of the script's steps."""
        return phase.name not in UNINSTRUMENTED and phase.applies_to(spec) is None

    def _next_instrumented(self, spec: WorkloadSpec, i: int, deferred: dict[str, str]) -> str:
        for p in self.phases[i + 1 :]:
            if p.name not in deferred and self._instrumented(p, spec):
                return p.name
        return ""

    def ref_steps(self, step_ns: int) -> int:
        """A reference block's steps: about ``REF_S``, at least ``REF_MIN`` (1 when those
        would take over ``REF_MAX_S``), at most a ``REF_SHARE``-th of the steps known to the
        run (0: none are left, or the run has fewer than ``REF_SHARE`` steps)."""
        if self.options.get("job_worker"):
            # A job's workers step together: blocks sized by each worker's own step time would
            # shift their framework windows apart (no step in common, no per-step straggler).
            return 0
        n = -(-int(REF_S * 1e9) // max(step_ns, 1))
        # At least REF_MIN steps, unless they would take over REF_MAX_S (a step of seconds is
        # a block of its own).
        n = max(n, REF_MIN if step_ns * REF_MIN <= REF_MAX_S * 1e9 else 1)
        left = self.available()
        if left is not None:
            # A script of few steps keeps them for the phases (8 steps of 1.2 s went to the
            # blocks and left the sampled window none, run after run; a 331-step TF1 script
            # needed a 5th run for its blocks, past its budget beside another process).
            total = left + self.driver.done
            n = min(n, total // REF_SHARE, left) if total >= REF_FEW else 0
        return max(n, 0)

    def _room(self, spec: WorkloadSpec, i: int) -> int | None:
        """The steps left for the phases from ``i`` on: those known to be left, less the
        reference blocks still to run among them (one after each instrumented window)."""
        left = self.available()
        if left is None:
            return None
        blocks = sum(1 for p in self.phases[i:] if self._instrumented(p, spec))
        return max(left - blocks * self.ref_steps(self.out.step_ns), 0)

    def _reference(self, step_ns: int, after: str, before: str) -> bool:
        """Run one uninstrumented reference block; whether it got a step."""
        n = self.ref_steps(step_ns)
        if n <= 0 or self.driver.ended:
            return False
        try:
            seg = self.sched.segment(n, None)
        except ScriptEnded:
            return False
        if seg.n_steps:
            self.out.references.append(ReferenceBlock(seg, after, before))
        self.sched.purpose = f"phase switch before {before}" if before else "the free run"
        return seg.n_steps > 0

    def _sample_rate(self, phase: Phase, ctx: PhaseContext, window_ns: int) -> None:
        """A window too short for ``NEED_SAMPLES`` at the default rate samples faster (up to
        ``RATE_MAX_HZ``), unless the run was given a rate (``--sample-rate``); native frames
        up to ``RATE_NATIVE_MAX_HZ``: py-spy's native unwinding pauses the process for each
        sample (a 1 s numpy script took 3.6 s profiled at 100 Hz, 10.3 s at 500 Hz)."""
        if self.options.get("sample_rate") or not isinstance(phase, sampled_mod.SampledPhase):
            return
        try:
            native = phase.settings_for(ctx).native
        except ValueError:
            return
        phase.native_hint = native  # type: ignore[attr-defined]
        want = -(-NEED_SAMPLES * 10**9 // max(window_ns, 1))
        fastest = RATE_NATIVE_MAX_HZ if native else RATE_MAX_HZ
        phase.options["sample_rate"] = max(RATE_MIN_HZ, min(fastest, want))

    def _defer(self, spec: WorkloadSpec, step_ns: int, scale: float) -> dict[str, str]:
        """When another run already counted the script's steps (a re-run): the phases, from the
        last, that would leave a window too thin to be right (``need_steps``) if all ran in
        these steps; they wait for the next run. The first phase always runs."""
        left = self.available()
        if self.expected_steps is None or left is None or self.live:
            # In the caller's process (a Keras callback's known batches) no run follows.
            return {}
        ctx = self._ctx(spec, step_ns)
        # The what-ifs fit their blocks to what is left themselves (a what-if without room
        # is missed, for the next run): planned here, they would drop what-ifs for good.
        running = [p for p in self.phases if p.applies_to(spec) is None and p.name != LAST]
        saved = {p.name: p.budget for p in self.phases}
        deferred: dict[str, str] = {}
        while len(running) > 1:
            blocks = sum(1 for p in running if self._instrumented(p, spec))
            available = max(left - blocks * self.ref_steps(step_ns), 0)
            slots = self._plan(running, ctx, available, scale, step_ns)
            thin = [
                p.name
                for p in running
                if p.name in slots
                and slots[p.name].window < min(need_steps(p, step_ns, self.options), left)
            ]
            if not thin:
                break
            last = running.pop()
            deferred[last.name] = (
                f"left for another run of the script: its {left + self.driver.done:,} steps "
                f"hold the windows of {', '.join(p.name for p in running)} at what each needs"
            )
        for p in self.phases:  # plan() set the budgets: the phases' loop plans again
            p.budget = saved[p.name]
        if deferred and any(p.name == LAST and p.applies_to(spec) is None for p in self.phases):
            deferred[LAST] = "left for another run of the script, after the phases it measures"
        return deferred

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
            if phase.name == "timed" and record.status == OK and self.sched.cpu is not None:
                record = dataclasses.replace(record, data=self.sched.cpu)
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
            if planned and window.n_steps < planned and not d.ended and phase.name in CAPPED:
                cut = (
                    f"the window ended at its time limit after {window.n_steps} of its "
                    f"{planned} planned steps: the steps took far longer than the first ones"
                )
                record = dataclasses.replace(
                    record, reason=f"{record.reason}; {cut}" if record.reason else cut
                )
            elif planned and window.n_steps < planned:
                cut = f"the script ended after {window.n_steps} of this window's {planned} steps"
                # No run of the script has more steps than this one had after its warm-up:
                # a window that took them all is as good as another run would give.
                most = max(d.done - self.out.warmup.n_steps - phase.budget.rewarm, 1)
                need = min(need_steps(phase, ctx.step_ns, self.options), most)
                thin = record.status == OK and window.n_steps < need and not self.live
                if thin and phase.name == "sampled":
                    # Its need is samples, not steps: slow steps the plan did not foresee give
                    # them in fewer steps (a DQN's 40 frames, an eager update every 4th, gave
                    # 3,058 samples and read "sampled got too few samples to be right").
                    thin = sampled_mod.main_samples(record.samples) < NEED_SAMPLES
                if thin:
                    cut += f", fewer than the {need} it needs to be right"
                record = dataclasses.replace(
                    record, reason=f"{record.reason}; {cut}" if record.reason else cut, missed=thin
                )
        return self._few_samples(record)

    def _few_samples(self, record: PhaseRecord) -> PhaseRecord:
        """A sampled window with fewer main-thread samples than ``ENOUGH_SAMPLES`` (a short
        loop, or py-spy starved of a core on a busy machine) is thin: another run of the
        script adds its samples (``sampled.combine``). Not where the run was given its rate."""
        if (
            record.name != "sampled"
            or record.status != OK
            or record.missed
            or self.live
            or self.options.get("sample_rate")
        ):
            return record
        n = sampled_mod.main_samples(record.samples)
        if n >= sampled_mod.ENOUGH_SAMPLES:
            return record
        few = f"{n} main-thread samples, fewer than the {sampled_mod.ENOUGH_SAMPLES} it needs"
        return dataclasses.replace(
            record, reason=f"{record.reason}; {few}" if record.reason else few, missed=True
        )

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
