"""What marking a script's steps costs: ``python -m profiler.capture.script.bench``.

Place in the pipeline: a measurement for profiler/docs/own-script.md ("The markers API") and for a
user
deciding how to mark steps; nothing in a run depends on it (a run measures its own detector's
cost, ``script.detection``).

Figures, ns per call (per step), each the median of ``REPEATS`` blocks of ``N`` calls against
the same loop without the call:

* ``profiler.step()`` as a ``with`` block and ``profiler.metric(loss=...)``, not profiling (the
  script runs as plain ``python script.py``) and profiling (a free-running step driver: what a
  step costs after the phases, and about what it costs inside the timed window);
* a detected call (``Session.run``/``tf.function``/``--step-function`` wrapper) around a no-op;
* ``--step-line``'s compiled call, and, for comparison, what ``sys.settrace`` would cost on the
  seed-000 numpy loop body (it fires on every Python call of the thread, numpy's Python wrappers
  included), next to the compiled call on the same loop body.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from typing import Any

from profiler import markers
from profiler.capture.script import detect
from profiler.capture.script.driver import StepDriver
from profiler.clock import now_ns

N = 200_000
REPEATS = 7


def _per_call(body: Callable[[int], None], bare: Callable[[int], None], n: int = N) -> float:
    costs = []
    for _ in range(REPEATS):
        t0 = now_ns()
        body(n)
        t1 = now_ns()
        bare(n)
        t2 = now_ns()
        costs.append(((t1 - t0) - (t2 - t1)) / n)
    return statistics.median(costs)


def _free_driver() -> StepDriver:
    d = StepDriver(now_ns)
    d.run_free()  # nothing is handed off, the last boundary only is kept
    return d


def _empty(n: int) -> None:
    for _ in range(n):
        pass


def markers_cost() -> dict[str, float]:
    """``with profiler.step(samples=32, updates=1)`` and ``metric(loss=...)``, off and on."""
    step, metric = markers.step, markers.metric

    def with_step(n: int) -> None:
        for _ in range(n):
            with step(samples=32, updates=1):
                pass

    def with_metric(n: int) -> None:
        for _ in range(n):
            metric(loss=0.5)

    out = {}
    markers.deactivate()
    out["step_off_ns"] = _per_call(with_step, _empty)
    out["metric_off_ns"] = _per_call(with_metric, _empty)
    markers.activate(_free_driver())
    try:
        out["step_on_ns"] = _per_call(with_step, _empty)
        out["metric_on_ns"] = _per_call(with_metric, _empty, n=N // 10)
    finally:
        markers.deactivate()
    return out


def detector_cost() -> float:
    """A detected call: the wrapper each outermost ``Session.run``/``tf.function`` goes through."""

    def noop(*_a: Any, **_k: Any) -> None:
        return None

    wrapped = detect.wrap_call(noop, _free_driver(), "bench")

    def marked(n: int) -> None:
        for _ in range(n):
            wrapped(0)

    def bare(n: int) -> None:
        for _ in range(n):
            noop(0)

    return _per_call(marked, bare)


def step_line_costs(steps: int = 20_000) -> dict[str, float]:
    """``--step-line``'s compiled call alone, and on the seed-000 numpy loop body against
    ``sys.settrace`` (a global trace function that traces nothing but is called for every
    Python call)."""
    import numpy as np

    mark = detect.step_line_marks(_free_driver())[0]

    def with_mark(n: int) -> None:
        for _ in range(n):
            mark()

    out = {"mark_ns": _per_call(with_mark, _empty)}
    x = np.arange(100, step=0.1)
    y = x + 20 * np.sin(x / 10) + 15

    def seed_loop(n: int, marked: bool = False) -> None:
        w = b = 0.0
        approx = w * x + b
        for _ in range(n):
            if marked:
                mark()
            gw = 2.0 / 1000 * np.sum(-x * (y - approx))
            gb = 2.0 / 1000 * np.sum(-1 * (y - approx))
            w = w - 1e-4 * gw
            b = b - 1e-4 * gb
            approx = w * x + b
            _loss = np.sum((y - approx) ** 2) / x.shape[0]

    def tracer(_frame: Any, _event: str, _arg: Any) -> None:
        return None

    def traced(n: int) -> None:
        sys.settrace(tracer)
        try:
            seed_loop(n)
        finally:
            sys.settrace(None)

    plain = []
    for _ in range(REPEATS):
        t0 = now_ns()
        seed_loop(steps)
        plain.append((now_ns() - t0) / steps)
    out["seed_step_ns"] = statistics.median(plain)
    out["seed_mark_ns"] = _per_call(lambda n: seed_loop(n, True), seed_loop, n=steps)
    out["seed_settrace_ns"] = _per_call(traced, seed_loop, n=steps)
    return out


def main() -> int:
    m = markers_cost()
    lines = step_line_costs()
    rows = [
        ("with profiler.step(samples=32, updates=1), not profiling", m["step_off_ns"]),
        ("profiler.metric(loss=...), not profiling", m["metric_off_ns"]),
        ("with profiler.step(...), profiling (free-running driver)", m["step_on_ns"]),
        ("profiler.metric(loss=...), profiling", m["metric_on_ns"]),
        ("a detected call (Session.run / tf.function wrapper)", detector_cost()),
        ("--step-line's compiled call", lines["mark_ns"]),
        ("seed-000 numpy step, plain", lines["seed_step_ns"]),
        ("  + --step-line's compiled call", lines["seed_mark_ns"]),
        ("  + sys.settrace instead (a no-op global tracer)", lines["seed_settrace_ns"]),
    ]
    width = max(len(r[0]) for r in rows)
    for name, ns in rows:
        print(f"{name:<{width}}  {ns:10,.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
