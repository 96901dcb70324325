"""A script run inside the caller's own process: a notebook cell, a ``with`` block, a ``fit``.

Place in the pipeline: ``profiler.live`` (the in-process API, the IPython magics) and
``profiler.keras.ProfileCallback`` start a ``LiveRun`` where ``python -m profiler run`` would start
a script process (``profiler.capture.script.worker``). It is that process's ``ScriptRun`` without
the process: the same step driver, detectors, phase schedule (on its own thread) and trace, but
the code runs in the caller's namespace, nothing of the process's world changes (``sys.argv``,
``__main__``, ``sys.path``, signal handlers stay the caller's), and every patch is undone at the
end so that the process runs on as before. ``start`` and ``stop`` bracket the code measured;
``stop`` writes ``model.json.gz`` like the script process does when its script ends.

Phases that need a process of their own are left out by the caller (the what-if phase); the
sampled phase attaches py-spy to this process, which needs ptrace rights over it (the phase
says so when it cannot).

The caller ends a run that measured nothing it was asked to (a ``fit`` shorter than the
callback's ``skip_batches``) by passing ``NothingMeasured`` to ``stop``: the run fails with that
reason, not the script's "steps were not detected" advice.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import replace
from typing import Any

from profiler import markers
from profiler.capture.phases import sampled
from profiler.capture.script import detect, source
from profiler.capture.script.driver import StopScript
from profiler.capture.script.schedule import NOT_DETECTED, Outcome, Schedule
from profiler.capture.script.worker import (
    JOIN_TIMEOUT_S,
    Ending,
    ScriptRun,
    _spec_for,
    message_line,
)
from profiler.capture.worker import WorkerSpec
from profiler.model import FAILED, OK, PARTIAL, WorkloadTrace

#: Phases a live run can take (the what-if phase replaces the script's calls for a while:
#: it needs a process of its own).
LIVE_PHASES = ("timed", "sampled", "framework", "hooks", "lines")
#: ``script.ended`` of a run that measured no step it was asked for (``NothingMeasured``).
NO_STEPS = "no_steps"


class NothingMeasured(Exception):
    """Given to ``LiveRun.stop``: the code ended before any step it was asked to measure;
    its text says why and what to change."""


class LiveRun(ScriptRun):
    """``ScriptRun`` inside the caller's process; ``subject`` names what ran (``the cell``).

    Attributes:
        marks_only: the caller marks the steps itself (the Keras callback): no framework
            call is a step of its own, no framework class is patched.
    """

    def __init__(self, wspec: WorkerSpec, subject: str, marks_only: bool = False) -> None:
        super().__init__(wspec)
        self.subject = subject
        self.live = True
        self.marks_only = marks_only
        self.watcher: detect.ImportWatcher | None = None
        self.thread: threading.Thread | None = None
        self.finished: int | None = None

    # --- the code measured ------------------------------------------------------------------

    def compile_file(self) -> tuple[Any, Any]:
        """The file's code (a cell saved to a file) with its step marks and loop marks compiled
        in, registered for the lines phase: (code to run, the functions for the lines phase)."""
        code, _src = self.compile()
        return self.module_target(code)

    def marks(self) -> dict[str, Any]:
        """The names the marked code calls, for the namespace it runs in."""
        g: dict[str, Any] = {
            source.STEP_FUNCTION: detect.step_function_decorator(self.driver, self.step_targets)
        }
        g[source.STEP_LINE], g[source.STEP_LINE_END] = detect.step_line_marks(self.driver)
        if self.loops is not None:
            g[source.LOOP_MARK], g[source.LOOP_END] = self.loops.mark, self.loops.end
            g[source.LOOP_ON] = self.loops.on
        return g

    def start(self, module_fn: Any = None) -> None:
        """Install the detectors and the markers, start the phase schedule's thread."""
        if self.marks_only:
            self.driver.block += 1
        else:
            before = {name: self._framework_import for name in sampled.HEAVY_FRAMEWORKS}
            self.watcher = detect.ImportWatcher(
                self.patches.hooks(), self.driver.facts.notes, before
            )
            self.watcher.install()
        markers.activate(self.driver)
        heavy = any(name in sys.modules for name in sampled.HEAVY_FRAMEWORKS)
        self.schedule = Schedule(
            spec=_spec_for(self.name),
            driver=self.driver,
            phases=self.phases,
            workload_dir=self.workload_dir,
            tensorboard_dir=self.tensorboard_dir,
            clock=self.clock,
            progress=lambda _event: None,
            options=self.options,
            warmup_steps=(
                int(self.wspec.warmup_steps) if self.options.get("warmup_fixed") else None
            ),
            timed_steps=self.opts.get("steps"),
            max_steps=self.opts.get("max_steps"),
            expected_steps=self.opts.get("expected_steps"),
            line_targets=self.step_targets,
            module_targets=list(module_fn or []),
            allow_native=not heavy and self.options.get("sample_native", "auto") != "off",
            script_span=lambda: (self.start_ns, self.end_ns),
            write=self.write_partial,
            live=True,
        )
        self.thread = threading.Thread(
            target=self.schedule.run, name="profiler-schedule", daemon=True
        )
        self.thread.start()
        self.start_ns = self.clock()
        self.in_script = True

    def steps_done(self) -> None:
        """No more steps will be measured (the code runs on, unmeasured)."""
        self.driver.script_ended("max_steps")

    def stop(self, exc: BaseException | None) -> int:
        """The measured code ended (``exc``: how, if it raised): finish the schedule, undo
        every patch, write the trace; the trace's exit status (0, 1, 130). Once only."""
        if self.finished is not None:
            return self.finished
        self.in_script = False
        self.end_ns = self.clock()
        self.ending = self._ending(exc)
        markers.deactivate()
        self.driver.script_ended(self.ending.reason)
        if self.thread is not None:
            self.thread.join(JOIN_TIMEOUT_S)
        self.undo()
        self.finished = self.finish()
        return self.finished

    def undo(self) -> None:
        """Every framework patch taken back, the import watcher removed."""
        if self.watcher is not None and self.watcher in sys.meta_path:
            sys.meta_path.remove(self.watcher)
        self.patches.restore()

    def _ending(self, exc: BaseException | None) -> Ending:
        # The steps its loop's watching took before the first (iterations, or tf.function
        # calls held back) are the cell's steps all the same.
        steps = self.driver.done + (self.loops.watched()[0] if self.loops is not None else 0)
        what = self.subject
        if exc is None:
            return Ending("completed", OK, message=f"{what} ran to its end: {steps} steps")
        if isinstance(exc, StopScript):
            return Ending(
                "max_steps",
                OK,
                message=f"{what} stopped after {self.driver.done} steps (max_steps); everything "
                "measured is kept",
            )
        if isinstance(exc, KeyboardInterrupt):
            return Ending(
                "interrupted",
                PARTIAL,
                message=f"{what} was interrupted after {steps} steps; everything measured so "
                "far is kept",
            )
        if isinstance(exc, NothingMeasured):
            return Ending(NO_STEPS, FAILED, error=str(exc), message=str(exc))
        head = f"{what} raised {type(exc).__name__} after {steps} steps"
        # The line that says what went wrong first (TensorFlow's errors open with the op's
        # Python traceback, which the cut below would keep instead).
        said = message_line(exc)
        text = f"{head}: {said}\n{exc}" if said and said != str(exc) else f"{head}: {exc}"
        return Ending("raised", FAILED, error=text[:2000], message=head)

    def trace(self, out: Outcome, status: str, error: str = "") -> WorkloadTrace:
        """The script's trace; a run that measured nothing it was asked for says why in place
        of the advice to mark steps (the steps were marked; none was in the window)."""
        if self.ending.reason != NO_STEPS:
            return super().trace(out, status, error)
        why = self.ending.message
        out = replace(
            out,
            notes=[n for n in out.notes if n != NOT_DETECTED],
            records=[
                replace(r, reason=why) if NOT_DETECTED in r.reason else r for r in out.records
            ],
        )
        trace = super().trace(out, status, error)
        return replace(trace, script={**(trace.script or {}), "message": why})
