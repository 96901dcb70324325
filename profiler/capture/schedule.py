"""Windows of steps: the one scheduling interface of every measured process.

Place in the pipeline: inside a measured process. ``Windows`` runs windows of one loop and
timestamps back-to-back steps (``segment``, ``window``, ``record_metric``); ``run_phase`` runs one
phase over one window (applies -> install -> re-warm -> window -> remove, with failure
isolation); ``plan`` sizes every phase's window from the step time seen so far. The registered
workloads' process (``profiler.capture.worker``) and a user's script (``profiler.capture.script``,
whose ``Windows`` asks the script for steps) both schedule through these.

``overhead_ns`` is the one micro-benchmark of what a wrapper adds to a call (step markers, the
detectors, the hooks), and ``typical_step_ns`` the one rule for a step time from a warm-up.
"""

from __future__ import annotations

import dataclasses
import itertools
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from profiler.capture.loop import Loop, LoopEnded, StepWrapper
from profiler.capture.phases import Phase, PhaseContext, PhaseUnavailable
from profiler.clock import Clock
from profiler.model import (
    FAILED,
    SKIPPED,
    UNAVAILABLE,
    Gap,
    MetricPoint,
    PhaseRecord,
    Segment,
    Window,
    median_ns,
)

ERROR_TAIL_LINES = 12

Progress = Callable[[dict[str, Any]], None]


class LoopError(RuntimeError):
    """The training loop itself raised: the workload fails (a phase's own failure does not)."""


def error_tail(exc: BaseException, lines: int = ERROR_TAIL_LINES) -> str:
    """The last lines of an exception's traceback, ending with the exception itself.

    For a ``LoopError`` the tail is the loop's own exception, headed by where it happened.
    """
    if isinstance(exc, LoopError) and exc.__cause__ is not None:
        text = "".join(traceback.format_exception(exc.__cause__)).rstrip().splitlines()
        return "\n".join([str(exc), *text[-(lines - 1) :]])
    text = "".join(traceback.format_exception(exc)).rstrip().splitlines()
    return "\n".join(text[-lines:])


def overhead_ns(
    marked: Callable[[], Any],
    bare: Callable[[], Any],
    clock: Clock,
    n: int = 20_000,
    repeats: int = 5,
) -> int:
    """Nanoseconds ``marked`` costs more than ``bare`` per call: ``n`` calls of each per block,
    ``repeats`` blocks of each, interleaved; the fastest block of each side (floored at 0).
    Other processes only ever add time to a block: the medians of the blocks' differences
    read 0 beside a busy test suite, where the fastest blocks still tell the cost."""
    marked_ns, bare_ns = [], []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(n):
            marked()
        t1 = clock()
        for _ in range(n):
            bare()
        t2 = clock()
        marked_ns.append(t1 - t0)
        bare_ns.append(t2 - t1)
    return max(0, (min(marked_ns) - min(bare_ns)) // n)


def marker_cost_ns(clock: Clock) -> int:
    """What one step marker adds to a step: ``Loop.run``'s hot path (the step call and one
    ``append(clock())``) around a no-op, against the bare loop, in this process."""
    marks: list[int] = []
    append = marks.append

    def noop() -> None:
        pass

    def marked() -> None:
        noop()
        append(clock())

    return overhead_ns(marked, lambda: None, clock)


def typical_step_ns(durations: Sequence[int]) -> int:
    """The steady step time of a warm-up's step durations: the median of their second half
    (the first half still carries one-off costs); 1 for no steps."""
    tail = list(durations[len(durations) // 2 :])
    return median_ns(tail) if tail else 1


class Windows:
    """Runs windows of one loop, timestamping back-to-back steps.

    Attributes:
        loop: the loop.
        clock: what steps are timed with.
        progress: receives ``{"workload", "phase", "done", "total"}`` as a window advances.
        name: the workload's name.
        metrics: the metric points recorded so far (the loss between segments).
    """

    def __init__(self, loop: Loop, clock: Clock, progress: Progress, name: str) -> None:
        self.loop = loop
        self.clock = clock
        self.progress = progress
        self.name = name
        self.metrics: list[MetricPoint] = []

    def segment(self, n: int, wrap: StepWrapper | None) -> Segment:
        """``n`` back-to-back steps, each inside ``wrap`` if given."""
        first = self.loop.steps_done
        marks = [self.clock()]
        try:
            self.loop.run(n, marks, self.clock, wrap)
        except LoopEnded:
            raise
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
        """The loss on the evaluation set now, as a metric point after the last step."""
        t0 = self.clock() if start_ns is None else start_ns
        value = self.loop.loss()
        cost = self.clock() - t0
        self.metrics.append(
            MetricPoint(step=self.loop.steps_done - 1, name="loss", value=value, cost_ns=cost)
        )


def run_phase(
    phase: Phase, ctx: PhaseContext, windows: Windows, steps: int, *, chunks: int = 1
) -> PhaseRecord:
    """One phase over a window of ``steps`` steps (after its budget's re-warm steps).

    A phase that does not apply is ``skipped``, one that cannot run here ``unavailable``, one
    that fails ``failed`` with its error's tail: the run goes on. The loop's own exception
    (``LoopError``) and the end of a script's loop (``LoopEnded``) propagate.
    """
    why_not = phase.applies_to(ctx.spec)
    if why_not:
        return PhaseRecord(name=phase.name, status=SKIPPED, reason=why_not)
    installed = False
    ctx.loop.set_active(phase.name)
    try:
        phase.install(ctx)
        installed = True
        window = windows.window(
            phase.name,
            steps,
            wrap=phase.step_wrapper(ctx),
            chunks=chunks if phase.records_metrics else 1,
            rewarm=phase.budget.rewarm,
        )
        record = phase.remove(ctx, window)
        installed = False
        return record
    except PhaseUnavailable as exc:
        return PhaseRecord(name=phase.name, status=UNAVAILABLE, reason=str(exc))
    except (LoopError, LoopEnded):
        if installed:
            _abort(phase, ctx)
        raise
    except Exception as exc:  # a failing phase must not take the workload down
        if installed:
            _abort(phase, ctx)
        return PhaseRecord(name=phase.name, status=FAILED, reason=error_tail(exc))
    finally:
        ctx.loop.set_active("")


def _abort(phase: Phase, ctx: PhaseContext) -> None:
    try:
        phase.abort(ctx)
    except Exception:
        pass


# --- window sizes ------------------------------------------------------------------------------


@dataclass
class Slot:
    """One phase's share of the steps: its window, its re-warm steps and the steps it runs
    itself after the window (FULL_TRACE, the hooks' on/off blocks)."""

    window: int
    rewarm: int
    extra: int

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)


#: The phase whose extra steps (the what-ifs' blocks) take what the others leave under a limit.
LAST_EXTRA = "whatif"
#: Under a step limit, re-warm and extra steps are cut to these when the plan does not fit.
TIGHT_REWARM = 5
TIGHT_EXTRA = 5


def plan(
    phases: list[Phase],
    ctx: PhaseContext,
    *,
    timed_steps: int | None = None,
    available: int | None = None,
    scale: float = 1.0,
    floors: Mapping[str, int] | None = None,
    extra_s: float | None = None,
    targets: Mapping[str, float] | None = None,
    rewarm_s: float | None = None,
    tight_floors: Mapping[str, int] | None = None,
) -> dict[str, Slot]:
    """Each applicable phase's window, re-warm and extra steps, fitted into ``available``.

    Windows come from the phases' budgets at ``ctx.step_ns`` (``timed_steps`` for the timed
    window when given). With ``available`` (the steps a limit leaves) and a plan that does not
    fit, re-warms and extra steps shrink (``TIGHT_*``; a phase drops extra steps that would take
    over a tenth of what is left, ``Phase.fit_extra``) and the windows are scaled down together.
    A script's plan replaces, per phase name, the budgets' smallest windows (``floors``) and
    target times (``targets``), caps the extra steps (``extra_s``) and the re-warm steps
    (``rewarm_s``, at least 2) in seconds: its steps may be slow, and its total unknown.
    Where the plan does not fit, windows shrink down to ``tight_floors`` where given (the
    fewest steps that measure each phase right at this step time), else to ``floors``.
    Sets each phase's budget to its slot.
    """
    slots: dict[str, Slot] = {}
    floors = floors or {}
    targets = targets or {}
    for phase in phases:
        if phase.applies_to(ctx.spec) is not None:
            continue
        floor, target = floors.get(phase.name), targets.get(phase.name)
        if phase.name == "timed":
            want = timed_steps or phase.budget.steps_for(ctx.step_ns, scale, floor, target)
            slots[phase.name] = Slot(want, 0, 0)
            continue
        want = phase.budget.steps_for(ctx.step_ns, scale, floor, target)
        if phase.budget.steps is None:
            want = phase.window_steps(ctx, want)
        extra = phase.limit_extra(ctx, extra_s) if extra_s is not None else phase.extra_steps(ctx)
        rewarm = phase.budget.rewarm
        if rewarm_s is not None:
            rewarm = min(rewarm, max(2, int(rewarm_s * 1e9 / max(ctx.step_ns, 1))))
        slots[phase.name] = Slot(want, rewarm, extra)
    need = sum(s.window + s.rewarm + s.extra for s in slots.values())
    if available is not None and need > available:
        by_name = {p.name: p for p in phases}
        for slot in slots.values():
            slot.rewarm = min(slot.rewarm, TIGHT_REWARM)
        for name, slot in slots.items():
            if slot.extra and name != LAST_EXTRA:
                slot.extra = by_name[name].fit_extra(ctx, TIGHT_EXTRA, available // 10)
        last = slots.get(LAST_EXTRA)
        if last is not None and last.extra:
            # The what-ifs' blocks take what the others leave (a run for them alone: most of
            # its steps), at least a tenth of the steps.
            others = sum(s.window + s.rewarm + s.extra for n, s in slots.items() if n != LAST_EXTRA)
            room = max(available // 10, available - others - last.window - last.rewarm)
            last.extra = by_name[LAST_EXTRA].fit_extra(ctx, TIGHT_EXTRA, room)
        fixed = sum(s.rewarm + s.extra for s in slots.values())
        wanted = sum(s.window for s in slots.values()) or 1
        factor = max(available - fixed, 0) / wanted
        for name, slot in slots.items():
            floor = min(floors.get(name, by_name[name].min_window), by_name[name].min_window)
            if tight_floors and name in tight_floors:
                floor = min(floor, tight_floors[name])
            slot.window = max(floor, int(slot.window * factor))
    for phase in phases:
        chosen = slots.get(phase.name)
        if chosen is not None:
            phase.budget = dataclasses.replace(
                phase.budget, steps=chosen.window, rewarm=chosen.rewarm
            )
    return slots
