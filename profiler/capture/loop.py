"""What capture drives: a workload's spec, its parameters, and the loop object it builds.

Place in the pipeline: the contract between the measured code and capture. A registered
workload (``profiler.workloads``) builds a ``Loop``; a user's script is driven through a
``Loop`` of its own (``profiler.capture.script.driver.ScriptLoop``). The workload process
(``profiler.capture.worker``) runs it window by window (``profiler.capture.schedule``), and the
phases read what they need about it from ``Loop.info`` (a ``LoopInfo``).

A ``Loop`` runs the training loop one *timed unit* at a time: ``run(n, marks, clock)`` executes
``n`` units and appends one timestamp after each, the whole of the marker's hot path. State
persists between calls, so successive windows are windows of one training run.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from profiler.clock import Clock
from profiler.model import WorkDecl

#: A per-step context factory a phase may ask for: called with the global step index.
StepWrapper = Callable[[int], AbstractContextManager[Any]]

T = TypeVar("T")

#: What a loop runs on (``LoopInfo.kind``; ``WorkloadSpec.framework`` for a registered one).
NUMPY, TF1, TF2, KERAS = "numpy", "tf1", "tf2", "keras"
#: How a TF2 loop runs (``LoopInfo.mode``).
EAGER, FUNCTION = "eager", "function"


class WorkloadError(ValueError):
    """Bad parameters for a workload (a user mistake, reported in one line)."""


class LoopEnded(RuntimeError):
    """The loop can run no more steps: a user script that drives its own loop has finished
    (``profiler.capture.script``). Phases that run extra steps after their window catch it and
    keep what they measured."""


@dataclass(frozen=True, slots=True)
class Params:
    """Parameters of one workload run.

    Attributes:
        steps: timed units in the timed phase's window.
        n: problem size (training samples).
        seed: random seed for data, initialisation and sampling (where the workload has any).
        k: training steps per timed unit, for workloads that run several steps per call.
    """

    steps: int
    n: int
    seed: int = 0
    k: int = 1

    def validate(self) -> None:
        if self.steps <= 0:
            raise WorkloadError(f"steps must be a positive integer, got {self.steps}")
        if self.n <= 0:
            raise WorkloadError(f"n must be a positive integer, got {self.n}")
        if self.k <= 0:
            raise WorkloadError(f"k must be a positive integer, got {self.k}")

    def with_(self, **changes: Any) -> Params:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, int]:
        """The parameters as plain JSON (the worker spec, the trace, the summary)."""
        return {"steps": self.steps, "n": self.n, "seed": self.seed, "k": self.k}


@dataclass(frozen=True)
class WorkloadSpec:
    """A registered workload.

    Attributes:
        name: registry name (``numpy_gd``); also the module's name.
        title: one line saying what it is.
        doc: the module docstring: what it reproduces and what it shows.
        seed: the case-study question it belongs to (``"000"``, ``"004"``; empty for a script).
        framework: ``numpy``, ``tf1`` (graph + Session), ``tf2`` (eager / tf.function) or
            ``keras``; phases use it to decide whether they apply.
        defaults: default parameters.
        full_steps: steps for ``make profile FULL=1`` (the seed's own count), if different.
        build: builds the loop (imports heavy frameworks lazily).
        default_suite: whether ``make profile`` runs it by default.
    """

    name: str
    title: str
    doc: str
    seed: str
    framework: str
    defaults: Params
    build: Callable[[Params], Loop]
    full_steps: int | None = None
    default_suite: bool = True
    display_name: str = ""

    @property
    def uses_tensorflow(self) -> bool:
        return self.framework in (TF1, TF2, KERAS)

    @property
    def label(self) -> str:
        """The name shown in reports (``display_name`` if set)."""
        return self.display_name or self.name

    @property
    def ref(self) -> str:
        """``module:ATTRIBUTE`` the workload process imports to find this spec."""
        module = self.build.__module__
        mod = sys.modules.get(module)
        for attr, value in vars(mod).items() if mod else ():
            if value is self:
                return f"{module}:{attr}"
        return f"{module}:WORKLOAD"


@dataclass(frozen=True)
class LoopInfo:
    """What the phases need to know about a loop (the framework objects it runs on).

    Attributes:
        kind: ``numpy``, ``tf1``, ``tf2`` or ``keras``.
        mode: for ``tf2``, ``eager`` or ``function``; empty otherwise.
        session: the TF1 session the steps run (FULL_TRACE steps, the hooks phase).
        graph: the TF1 graph.
        model: the Keras model (or the TF2 model object) the steps train.
        function: the ``tf.function`` a step calls, if one.
        fetches: values fetched per ``session.run`` (the attribution splits fetch costs).
        feeds: values fed per ``session.run``.
        feed_arrays: the arrays fed each step (the hooks phase times their dtype cast).
        same_feeds: whether every step feeds the very same arrays (None: not known).
        k: training steps per call for loops that run several (``tf.while_loop``).
    """

    kind: str = NUMPY
    mode: str = ""
    session: Any = None
    graph: Any = None
    model: Any = None
    function: Any = None
    fetches: int | None = None
    feeds: int | None = None
    feed_arrays: tuple[Any, ...] = ()
    same_feeds: bool | None = None
    k: int | None = None


class Loop:
    """A training loop, driven one timed unit at a time.

    Args:
        step: runs one timed unit (one step, or ``k`` steps for in-graph loops).
        work: declared work per timed unit.
        params: returns the current model parameters (``{"W": ..., "b": ...}``).
        eval_loss: loss on the workload's fixed evaluation set for given parameters; numpy,
            outside the timed steps, the same formula for every implementation of a task.
        line_targets: functions the lines phase profiles (default: ``step``).
        close: releases resources (sessions) when the process is done.
        info: what the phases need to know about the loop (``LoopInfo``).
        probes: case-study facts a measurement process reads (the optimizer's step counter,
            the batch in use ...), by name; capture never reads them.
    """

    def __init__(
        self,
        *,
        step: Callable[[], Any],
        work: WorkDecl,
        params: Callable[[], dict[str, float]],
        eval_loss: Callable[[dict[str, float]], float],
        line_targets: Iterable[Callable[..., Any]] | None = None,
        close: Callable[[], None] | None = None,
        info: LoopInfo | None = None,
        probes: Mapping[str, Any] | None = None,
    ) -> None:
        self.step = step
        self.work = work
        self.params = params
        self.eval_loss = eval_loss
        self.line_targets = tuple(line_targets) if line_targets is not None else (step,)
        self._close = close
        self.info: LoopInfo = info or LoopInfo()
        self.probes: dict[str, Any] = dict(probes or {})
        self.steps_done = 0
        #: The phase that instruments or alters the steps now ("" for none; "timed" times them
        #: as written): what the script measures between steps itself (fit's validations)
        #: is its own only outside the others.
        self.active = ""

    def set_active(self, phase: str) -> None:
        self.active = phase

    def run(self, n: int, marks: list[int], clock: Clock, wrap: StepWrapper | None = None) -> None:
        """Run ``n`` timed units, appending ``clock()`` after each to ``marks``."""
        step = self.step
        append = marks.append
        if wrap is None:
            for _ in range(n):
                step()
                append(clock())
        else:
            first = self.steps_done
            for i in range(n):
                with wrap(first + i):
                    step()
                append(clock())
        self.steps_done += n

    def in_loop_thread(self, fn: Callable[[], T]) -> T:
        """Call ``fn`` on the thread that runs the steps and return its result.

        Per-thread instrumentation (line_profiler traces the thread that enables it) must be
        switched there. A ``Loop`` runs its steps on its caller's thread; a user script's loop
        (``ScriptLoop``) runs them on the script's.
        """
        return fn()

    def hold(self, off: Callable[[], Any] | None, on: Callable[[], Any] | None = None) -> None:
        """A variant on for the coming steps: ``off`` where the script leaves its steps' loop,
        ``on`` where it comes back (``ScriptLoop.hold``). A built-in workload runs nothing
        between its steps: nothing to do."""

    def loss(self) -> float:
        """Loss on the fixed evaluation set at the current parameters."""
        return float(self.eval_loss(self.params()))

    def close(self) -> None:
        if self._close is not None:
            self._close()


@dataclass
class Registry:
    """Workloads by name, in registration order."""

    specs: dict[str, WorkloadSpec] = field(default_factory=dict)

    def add(self, spec: WorkloadSpec) -> None:
        if spec.name in self.specs:
            raise ValueError(f"workload {spec.name!r} registered twice")
        self.specs[spec.name] = spec

    def names(self) -> list[str]:
        return list(self.specs)

    def get(self, name: str) -> WorkloadSpec:
        try:
            return self.specs[name.removeprefix("profiler.").removeprefix("workloads.")]
        except KeyError:
            raise KeyError(name) from None


def load_ref(ref: str) -> WorkloadSpec:
    """Import the spec ``module:ATTRIBUTE`` (``ATTRIBUTE`` defaults to ``WORKLOAD``)."""
    module, _, attr = ref.partition(":")
    spec = getattr(importlib.import_module(module), attr or "WORKLOAD", None)
    if not isinstance(spec, WorkloadSpec):
        raise LookupError(f"{ref} does not define a WorkloadSpec")
    return spec


def null_wrapper(_step: int) -> AbstractContextManager[None]:
    """A step wrapper that does nothing (for tests and uniform call sites)."""
    return contextlib.nullcontext()
