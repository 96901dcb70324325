"""The markers API: name your training loop's steps and record metrics from your own script.

::

    import profiler

    for batch in batches:
        with profiler.step(samples=len(batch), updates=1):
            loss = train(batch)
        profiler.metric(loss=loss)

Place in the pipeline: user code calls these; under ``python -m profiler run script.py`` the
script process (``profiler.capture.script.worker``) activates them and each ``with profiler.step()``
block is one step of the trace (``profiler.capture.script.driver``). Without the profiler they do as
little as Python allows: ``step()`` returns one shared object whose ``__enter__`` and
``__exit__`` do nothing, and ``metric()`` returns at once (figures in profiler/docs/own-script.md,
"The markers API", measured by ``python -m profiler.capture.script.bench``).

Steps are back to back, like every step in this toolkit: a step ends when its ``with`` block
ends, and the next one starts there, so the code between two blocks (data loading, logging)
belongs to the step that follows it. The first ``profiler.step()`` switches automatic step
detection off: TensorFlow calls inside a marked step are part of it, and those outside any
marked step are part of the next one. Nested ``step()`` blocks count once (the outermost).
``samples`` and ``updates`` are the work the step does (training samples processed, parameter
updates); they become the run's work counters. ``metric()`` records a point after the last
step that ended; converting each value with ``float()`` is its measured cost.

This module imports nothing but the standard library, so ``import profiler`` stays cheap.
Call the markers from the thread that runs the training loop.
"""

from __future__ import annotations

from typing import Any


class _Idle:
    """What ``step()`` returns when nothing is profiling: enter and exit do nothing."""

    __slots__ = ()

    def __enter__(self) -> _Idle:
        return self

    def __exit__(self, _t: object, _v: object, _tb: object) -> None:
        return None


_IDLE = _Idle()


class Marker:
    """The active step marker of a script process (one per process, re-entered each step)."""

    __slots__ = ("claimed", "counter", "depth", "driver", "samples", "updates")

    def __init__(self, driver: Any, claimed: bool = False) -> None:
        self.driver = driver
        self.counter = driver.detector("markers")
        self.depth = 0
        self.samples = 1
        self.updates = 1
        #: Whether automatic detection was switched off by a first marked step.
        self.claimed = claimed

    def _claim(self) -> None:
        # Explicit marks win: from the first marked step on, detected framework calls are
        # never steps of their own (the driver's block count stays raised).
        self.claimed = True
        self.driver.block += 1
        self.driver.facts.marked_work = True

    def __enter__(self) -> Marker:
        self.depth += 1
        if self.depth == 1:
            d = self.driver
            if not self.claimed:
                self._claim()
            if not d.started:
                d.begin()
            d.block += 1
            d.open_wrap()
        return self

    def __exit__(self, t: Any, v: Any, tb: Any) -> None:
        self.depth -= 1
        if self.depth == 0:
            d = self.driver
            d.block -= 1
            facts = d.facts
            facts.samples += self.samples
            facts.updates += self.updates
            self.counter.steps += 1
            d.boundary()


_marker: Marker | None = None


def step(samples: int = 1, updates: int = 1) -> Any:
    """A context manager around one training step.

    Args:
        samples: training samples the step processes (default 1).
        updates: parameter updates it makes (default 1).

    Returns:
        A context manager; under the profiler, its block is one step.
    """
    m = _marker
    if m is None:
        return _IDLE
    if m.depth == 0:
        m.samples = samples
        m.updates = updates
    return m


def metric(**values: float) -> None:
    """Record metrics (e.g. ``loss=0.25``) after the last step that ended.

    A metric named ``loss`` becomes the run's loss trajectory (``summary.json``: ``loss``).
    """
    m = _marker
    if m is None:
        return
    m.driver.metric(values)


def activate(driver: Any) -> None:
    """Route ``step`` and ``metric`` to ``driver`` (a script process's ``StepDriver``)."""
    global _marker
    _marker = Marker(driver)


def deactivate() -> None:
    """Back to doing nothing."""
    global _marker
    _marker = None


def profiling() -> bool:
    """Whether the markers are active (the script runs under ``python -m profiler run``)."""
    return _marker is not None
