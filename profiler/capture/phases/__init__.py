"""The phase interface: one kind of instrumentation, installed over a window of steps.

Place in the pipeline: the workload process (``profiler.capture.worker``) runs warm-up, then each
requested phase in ``PHASE_ORDER``: ``applies_to`` -> ``install`` -> re-warm steps -> the window
(steps wrapped by ``step_wrapper`` if the phase has one) -> ``remove``, which returns the phase's
record (artefacts written, spans/samples/lines collected, status). A phase that cannot run here
raises ``PhaseUnavailable`` with the reason and the fix; the run goes on without it.

The measured inflation of a phase is its window's median step over the timed window's, computed
after the fact from the windows (``profiler.reports.summary``); a phase does not measure itself.

Adding a phase: subclass ``Phase`` in its own module, set ``name`` to an entry of
``profiler.model.PHASE_ORDER`` and add it to ``PHASES`` (``profiler.capture.phases.registry``).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from profiler.capture.loop import Loop, StepWrapper, WorkloadSpec
from profiler.clock import Clock
from profiler.model import PhaseRecord, Window


class PhaseUnavailable(RuntimeError):
    """The phase cannot run in this environment; the message gives the reason and the fix."""


@dataclass(frozen=True)
class Budget:
    """How many steps a phase's window takes.

    The window aims at ``target_s`` seconds of steps at the warm-up's median step time,
    clamped to [``min_steps``, ``max_steps``]; ``rewarm`` steps run after install, unrecorded.
    An explicit ``steps`` overrides the target.
    """

    target_s: float
    min_steps: int
    max_steps: int
    rewarm: int = 20
    steps: int | None = None

    def steps_for(
        self,
        step_ns: int,
        scale: float = 1.0,
        min_steps: int | None = None,
        target_s: float | None = None,
    ) -> int:
        """Steps for the window; ``scale`` multiplies the target time (``--quick``: 0.5);
        ``min_steps`` and ``target_s`` replace the budget's own (a script's)."""
        if self.steps is not None:
            return self.steps
        target = self.target_s if target_s is None else target_s
        want = int(target * scale * 1e9 / max(step_ns, 1))
        floor = self.min_steps if min_steps is None else min_steps
        return max(floor, min(self.max_steps, want))


@dataclass
class PhaseContext:
    """What a phase gets to work with inside the workload process.

    Attributes:
        spec: the workload's registry entry.
        loop: the built loop (its ``info`` carries e.g. the TF1 session).
        workload_dir: this workload's folder in the run (artefacts go here).
        tensorboard_dir: this workload's TensorBoard run folder.
        clock: the clock steps are timed with.
        options: phase options from the command line (e.g. sampling rate).
        step_ns: the warm-up's median step time, for budgets.
    """

    spec: WorkloadSpec
    loop: Loop
    workload_dir: Path
    tensorboard_dir: Path
    clock: Clock
    options: dict[str, Any] = field(default_factory=dict)
    step_ns: int = 0


class Phase(abc.ABC):
    """One kind of instrumentation over a window of steps (see the module docstring)."""

    name: ClassVar[str]
    #: Whether the runner records metrics (loss) between segments of this phase's window.
    records_metrics: ClassVar[bool] = False
    #: The smallest window this phase gets when steps are scarce (``schedule.plan``).
    min_window: ClassVar[int] = 10

    def __init__(self, budget: Budget) -> None:
        self.budget = budget

    def applies_to(self, spec: WorkloadSpec) -> str | None:
        """None if the phase applies to this workload, else why it is skipped."""
        return None

    def install(self, ctx: PhaseContext) -> None:
        """Start the instrumentation (raise ``PhaseUnavailable`` if it cannot run here)."""

    def window_steps(self, ctx: PhaseContext, proposed: int) -> int:
        """The window's timed units, given the budget's ``proposed`` count (override to cap)."""
        return proposed

    def extra_steps(self, ctx: PhaseContext) -> int:
        """Steps the phase runs itself after its window (in no window; 0 by default)."""
        return 0

    def limit_extra(self, ctx: PhaseContext, seconds: float) -> int:
        """Keep the extra steps to about ``seconds`` at ``ctx.step_ns``; returns the count."""
        return self.extra_steps(ctx)

    def fit_extra(self, ctx: PhaseContext, tight: int, cap: int) -> int:
        """Shrink the extra steps when steps are scarce: to about ``tight``, and to none if
        they would take more than ``cap``; returns the new count."""
        return 0

    def step_wrapper(self, ctx: PhaseContext) -> StepWrapper | None:
        """A per-step context the loop enters around each step, or None."""
        return None

    @abc.abstractmethod
    def remove(self, ctx: PhaseContext, window: Window) -> PhaseRecord:
        """Stop the instrumentation and return what it produced."""

    def abort(self, ctx: PhaseContext) -> None:
        """Best-effort clean-up after a failure inside the window."""
