"""The lines phase: line_profiler on the workload's step function (and TF1's ``BaseSession._run``).

Place in the pipeline: runs inside the workload process (``profiler.capture.worker``) after the
sampled phase. ``install`` registers every function of ``Loop.line_targets`` (default: the step
function; closures work, line_profiler needs the function object) and, for TF1 workloads,
``tensorflow.python.client.session.BaseSession._run``, then enables the profiler; the re-warm steps
and the window run; ``remove`` disables it and hands the statistics to
``profiler.capture.collectors.lines`` for the ``LineStat`` rows (tables and ``lines.txt`` are made
from them after the run).

line_profiler traces every Python line of the registered functions, so those lines run slower
(~1.6x measured) while native calls do not: shares of Python lines are overstated. The phase's
measured slow-down is next to its table in the summary (``phases[].inflation``, against the timed
window, and ``inflation_vs_warmup``).
"""

from __future__ import annotations

from typing import Any

from profiler.capture.collectors import lines as collect
from profiler.capture.phases import Budget, Phase, PhaseContext, PhaseUnavailable
from profiler.model import OK, PhaseRecord, Window
from profiler.model.records import INFLATION_NOTE, LinesData


def tf1_session_target() -> Any:
    """``BaseSession._run``, the TF1 session's Python between ``session.run`` and the C call."""
    from tensorflow.python.client.session import BaseSession

    return BaseSession._run


class LinesPhase(Phase):
    """line_profiler over one window (see the module docstring); its record is a
    ``LinesData`` and its rows are the record's ``lines``."""

    name = "lines"

    def __init__(self, budget: Budget, options: dict[str, Any] | None = None) -> None:
        super().__init__(budget)
        self.profiler: Any = None
        self.targets: list[str] = []

    def install(self, ctx: PhaseContext) -> None:
        try:
            from line_profiler import LineProfiler
        except ImportError as exc:
            raise PhaseUnavailable(
                "line_profiler is not installed; `pip install line_profiler` "
                "(a dependency in pyproject.toml)"
            ) from exc
        targets = list(ctx.loop.line_targets)
        if ctx.spec.framework == "tf1" or ctx.loop.info.kind == "tf1":
            targets.append(tf1_session_target())
        prof = LineProfiler()
        self.targets = []
        for fn in targets:
            if prof.add_callable(fn):
                self.targets.append(getattr(fn, "__qualname__", repr(fn)))
        if not self.targets:
            raise PhaseUnavailable(
                "no Python function to profile: the loop's line_targets hold no function "
                "line_profiler can trace; give Loop(line_targets=...) the step's Python function"
            )
        self.profiler = prof
        # line_profiler traces the thread that enables it: the one running the steps.
        ctx.loop.in_loop_thread(prof.enable_by_count)

    def remove(self, ctx: PhaseContext, window: Window) -> PhaseRecord:
        prof = self.profiler
        if prof is None:
            raise RuntimeError("lines phase removed without being installed")
        ctx.loop.in_loop_thread(prof.disable_by_count)
        self.profiler = None
        rows = collect.from_line_profiler(prof.get_stats())
        steps = (window.n_steps + window.rewarm_steps) * ctx.loop.work.units_per_step
        return PhaseRecord(
            name=self.name,
            status=OK,
            window=window,
            lines=rows,
            data=LinesData(steps_profiled=steps, targets=tuple(self.targets), note=INFLATION_NOTE),
        )

    def abort(self, ctx: PhaseContext) -> None:
        if self.profiler is not None:
            ctx.loop.in_loop_thread(self.profiler.disable_by_count)
            self.profiler = None
