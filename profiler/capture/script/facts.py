"""What a script's steps turned out to be: its framework, what its steps feed and fetch, their
work, and what detecting them costs.

Place in the pipeline: read by the script's schedule (``profiler.capture.script.schedule``)
after the warm-up, from what the detectors saw (``StepDriver.facts``, ``profiler.capture.script
.detect``), to tell the phases what they are measuring (``LoopInfo``).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import Any

from profiler import markers
from profiler.capture import schedule
from profiler.capture.loop import EAGER, FUNCTION, KERAS, NUMPY, TF1, TF2, LoopInfo
from profiler.capture.script.driver import StepDriver
from profiler.clock import Clock
from profiler.model import WorkDecl


def _feed_dict(call: tuple[tuple[Any, ...], dict[str, Any]] | None) -> dict[Any, Any]:
    if call is None:
        return {}
    args, kwargs = call
    feeds = kwargs.get("feed_dict", args[1] if len(args) > 1 else None)
    return feeds if isinstance(feeds, dict) else {}


def functions_eagerly() -> bool | None:
    """Whether ``tf.config.run_functions_eagerly(True)`` is in force
    (None: TensorFlow was never imported)."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return None
    try:
        return bool(tf.config.functions_run_eagerly())
    except Exception:  # a TensorFlow without it
        return None


def tf_threads() -> dict[str, int] | None:
    """TensorFlow's intra- and inter-op thread pools as the script set them (0: its default,
    the cores); None: no TensorFlow."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return None
    try:
        return {
            "intra": int(tf.config.threading.get_intra_op_parallelism_threads()),
            "inter": int(tf.config.threading.get_inter_op_parallelism_threads()),
        }
    except Exception:  # a TensorFlow without them
        return None


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
                same_feeds=f.same_feeds,
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
        source = (
            "the batch of the dataset fit was given"
            if f.fit.get("batch_source") == "dataset"
            else "fit's batch size"
        )
        notes.append(f"samples per step: {source} ({samples}); an epoch is {per_epoch} batches")
    elif (counts.get("tf_function") or calls.get("tf_function")) and functions_eagerly():
        # Its tf.functions run their Python body, op by op: an eager loop, whose kernels the
        # framework phase's eager ops measure (a custom loop left with the switch on read
        # "0.0 µs of kernels ... the tf.function call's per-call cost").
        kind, info = TF2, LoopInfo(kind=TF2, mode=EAGER)
        notes.append(
            "tf.config.run_functions_eagerly(True) is in force: the steps' tf.functions run "
            "their Python op by op, measured as an eager loop"
        )
    elif counts.get("tf_function") or calls.get("tf_function"):
        busiest = max(f.functions.values(), key=lambda s: s.calls, default=None)
        function = busiest.ref if busiest is not None else None
        kind, info = TF2, LoopInfo(kind=TF2, mode=FUNCTION, function=function)
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
    elif source == "auto_loop":
        from profiler.capture.script.source import LoopSite

        loops = detect.LoopMarks(scratch, [LoopSite(0, 1, 0, "for", "<module>")])
        loops.decided, loops.chosen = True, 0
        marked = lambda: loops.mark(0)  # noqa: E731
    elif source == "keras_fit":
        begin, end = detect.keras_marks(scratch)
        marked = lambda: (begin(), end())  # noqa: E731
    elif source == "tf_function":

        class Function:
            """Stands in for a tf.function: the detector also reads its tracing counter."""

            python_function = noop

            def experimental_get_tracing_count(self) -> int:
                return 1

        fn, call = Function(), detect.wrap_function_call(noop, scratch)
        marked = lambda: call(fn, 0, 1.0)  # noqa: E731
        bare = lambda: noop(fn, 0, 1.0)  # noqa: E731
    else:
        marked = detect.wrap_call(noop, scratch, "cost")
    return schedule.overhead_ns(marked, bare, clock)
