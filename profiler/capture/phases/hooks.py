"""The hooks phase: cheap timers on TensorFlow's own Python internals, per step.

Place in the pipeline: a phase of the workload process (``profiler.capture.phases``), after the
framework trace. ``install`` wraps a fixed set of TensorFlow functions (``TF1`` or ``TF2`` below,
declared as data) with clock accumulators of self and inclusive time (a stack of open hooked calls
gives each its children's time); the step wrapper zeroes them as a step starts and stores them as it
ends; ``remove`` measures the hooks' whole cost (below), puts every original back (the very same
objects) and hands the rows to ``profiler.capture.collectors.hooks.split``, which builds the phase's
record (``HooksData``).

The hook points are TensorFlow's private functions, as the versions of
``profiler.capture.tf_internals.KNOWN_TF`` have them. Each is looked up before anything is
patched: a TensorFlow without a required one gets no hooks phase (``UNAVAILABLE``, the note
naming what is missing and the version), one without an optional one is timed without it,
with a note; a version outside the range whose points are all there is timed as usual, and
the record's note says the version was not tested.

This is what splits the Python side of ``session.run`` that no TensorFlow trace sees: the native
call, feed conversion, fetch-handler set-up and result building (TF1), and for ``tf.function``
the argument binding, concrete-function lookup (and any retracing), the flat call and the native
call (TF2). Eager ops take TensorFlow's C fast path (``TFE_Py_FastPathExecute``), which Python
hooks never see, so eager loops are left to the framework phase's ``eager_op`` events.

The timers are process-wide: a hooked call from any thread counts in the current step (the
loops here call these functions from their own thread only). The hooks' own cost is measured
twice: before they are installed, a no-op function timed with and without the same wrapper
plus the step wrapper's enter/exit (a lower bound: everything is hot in the caches); after the
window, the step-time difference of alternating blocks with the hooks on and off (the whole
cost, several times the first here). Both are in the record's ``self_cost``. Each part includes some
of the hooks' own cost.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
from collections.abc import Callable
from typing import Any

from profiler.capture import tf_internals
from profiler.capture.collectors import hooks as collect
from profiler.capture.collectors.hooks import HookPoint, Target
from profiler.capture.loop import LoopEnded, StepWrapper, WorkloadSpec
from profiler.capture.phases import Phase, PhaseContext, PhaseUnavailable
from profiler.capture.schedule import overhead_ns
from profiler.clock import Clock
from profiler.model import OK, PhaseRecord, Window, median_ns
from profiler.model.records import FeedCast, HooksCost, LoopFacts
from profiler.model.records import HookParts as P

#: Pairs of on/off blocks that measure the hooks' whole cost per step, and each block's size:
#: ~COST_BLOCK_S seconds of steps, clamped (Keras runs whole epochs, so its blocks are longer).
COST_PAIRS = 5
COST_BLOCK_S = 0.04
COST_BLOCK_MIN = 10
COST_BLOCK_MAX = 200
#: Steps at least this long get no on/off blocks: the hooks cost a few µs a step.
NEGLIGIBLE_STEP_NS = 2_000_000

_SESSION = "tensorflow.python.client.session"
_PF = "tensorflow.python.eager.polymorphic_function"

#: TF1 ``session.run``. ``feed`` is an interval: ``_run``'s entry to the fetch handler's set-up.
TF1 = Target(
    name="tf1_session",
    points=(
        HookPoint(P.SESSION_RUN, _SESSION, "BaseSession.run", "the whole session.run call"),
        HookPoint(P.RUN_INNER, _SESSION, "BaseSession._run", "BaseSession._run"),
        HookPoint(
            P.FETCH_SETUP, _SESSION, "_FetchHandler.__init__", "fetch-handler set-up (structure)"
        ),
        HookPoint(P.DO_RUN, _SESSION, "BaseSession._do_run", "C-API feed/fetch lists and the call"),
        HookPoint(
            P.NATIVE,
            "tensorflow.python.client.pywrap_tf_session",
            "TF_SessionRun_wrapper",
            "the native call: TF_SessionRun (executor and kernels)",
        ),
        HookPoint(P.BUILD_RESULTS, _SESSION, "_FetchHandler.build_results", "result building"),
        # TensorFlow 2.16 converts feeds with np.asarray inline (no numpy_compat): there the
        # conversion is timed as part of feed_other.
        HookPoint(
            P.FEED_CONVERT,
            "tensorflow.python.util.numpy_compat",
            "np_asarray",
            "feed conversion: np_asarray of each fed value to the placeholder's dtype",
            required=False,
        ),
    ),
    intervals={
        P.FEED: "feed_dict handling: BaseSession._run's entry to the fetch handler's set-up",
    },
    # Hook keys are self times: session_run is run's own work (option buffers), run_inner
    # _run's own (feed handling and the rest), do_run _do_run's own (C-API lists, graph check).
    derived={
        P.FEED_OTHER: (P.FEED, (P.FEED_CONVERT,)),
        P.RUN_REST: (P.RUN_INNER, (P.FEED_OTHER,)),
        P.OUTSIDE_RUN: (
            "wall",
            (
                P.SESSION_RUN,
                P.RUN_INNER,
                P.FETCH_SETUP,
                P.DO_RUN,
                P.NATIVE,
                P.BUILD_RESULTS,
                P.FEED_CONVERT,
            ),
        ),
    },
    partition=(
        P.OUTSIDE_RUN,
        P.SESSION_RUN,
        P.FEED_CONVERT,
        P.FEED_OTHER,
        P.FETCH_SETUP,
        P.DO_RUN,
        P.NATIVE,
        P.BUILD_RESULTS,
        P.RUN_REST,
    ),
    outside=P.OUTSIDE_RUN,
    categories={
        P.OUTSIDE_RUN: "python",
        P.SESSION_RUN: "python",
        P.FEED_CONVERT: "feed_fetch",
        P.FEED_OTHER: "feed_fetch",
        P.FETCH_SETUP: "feed_fetch",
        P.DO_RUN: "python",
        P.NATIVE: "native",
        P.BUILD_RESULTS: "feed_fetch",
        P.RUN_REST: "python",
    },
)

#: TF2 ``tf.function`` calls (``tf2_function_*``, Keras ``fit``'s train function).
TF2 = Target(
    name="tf_function",
    points=(
        HookPoint(
            P.FUNCTION_CALL,
            f"{_PF}.polymorphic_function",
            "Function.__call__",
            "the whole tf.function call",
        ),
        HookPoint(
            P.BIND_ARGS,
            f"{_PF}.function_type_utils",
            "canonicalize_function_inputs",
            "binding the call's arguments to the function's signature",
        ),
        HookPoint(
            P.LOOKUP,
            f"{_PF}.tracing_compilation",
            "trace_function",
            "finding the concrete function for these inputs (tracing included)",
        ),
        HookPoint(
            P.TRACING,
            f"{_PF}.tracing_compilation",
            "_create_concrete_function",
            "tracing a new concrete function (a retrace in the steady state)",
        ),
        HookPoint(
            P.CALL_FLAT,
            f"{_PF}.concrete_function",
            "ConcreteFunction._call_flat",
            "the concrete function's call: tape checks, forward/backward choice",
        ),
        HookPoint(
            P.NATIVE,
            "tensorflow.python.eager.context",
            "Context.call_function",
            "the native call: the function's graph (executor and kernels)",
        ),
        HookPoint(
            P.ITERATOR_NEXT,
            "tensorflow.python.data.ops.iterator_ops",
            "OwnedIterator.__next__",
            "the next element of a tf.data iterator (the loop waiting for its input)",
        ),
    ),
    intervals={},
    # Self times: function_call is __call__/_call's own work, lookup the cache look-up's own
    # (binding inside it counts as bind_args), call_flat the Python around the native call.
    derived={
        P.OUTSIDE_CALL: (
            "wall",
            (
                P.FUNCTION_CALL,
                P.BIND_ARGS,
                P.LOOKUP,
                P.TRACING,
                P.CALL_FLAT,
                P.NATIVE,
                P.ITERATOR_NEXT,
            ),
        ),
    },
    partition=(
        P.OUTSIDE_CALL,
        P.FUNCTION_CALL,
        P.BIND_ARGS,
        P.LOOKUP,
        P.TRACING,
        P.INSTANTIATE,
        P.CALL_FLAT,
        P.NATIVE,
        P.ITERATOR_NEXT,
    ),
    outside=P.OUTSIDE_CALL,
    categories={
        P.OUTSIDE_CALL: "python",
        P.FUNCTION_CALL: "python",
        P.BIND_ARGS: "python",
        P.LOOKUP: "python",
        P.TRACING: "tracing",
        P.INSTANTIATE: "tracing",
        P.CALL_FLAT: "python",
        P.NATIVE: "native",
        P.ITERATOR_NEXT: "feed_fetch",
    },
)


class StepTimers:
    """Per-step accumulators, and the step wrapper that zeroes and stores them.

    For measured key ``j``: ``own[j]`` self nanoseconds, ``total[j]`` inclusive nanoseconds and
    ``cnt[j]`` calls in the current step. ``stack`` holds one ``[children_ns]`` cell per open
    hooked call; ``mark[0]`` is the entry time of the open ``BaseSession._run`` (for the
    ``feed`` interval). Calling the object with a step index returns itself as the step's
    context manager.
    """

    __slots__ = ("cnt", "mark", "own", "rows", "stack", "step", "total", "zeros")

    def __init__(self, n: int) -> None:
        self.own = [0] * n
        self.total = [0] * n
        self.cnt = [0] * n
        self.zeros = [0] * n
        self.stack: list[list[int]] = []
        self.mark = [0]
        self.rows: list[tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = []
        self.step = -1

    def __call__(self, step: int) -> StepTimers:
        self.step = step
        return self

    def __enter__(self) -> StepTimers:
        self.own[:] = self.zeros
        self.total[:] = self.zeros
        self.cnt[:] = self.zeros
        return self

    def __exit__(self, *_exc: object) -> None:
        self.rows.append((self.step, tuple(self.own), tuple(self.total), tuple(self.cnt)))


def timed(
    fn: Callable[..., Any],
    timers: StepTimers,
    j: int,
    clock: Clock,
    *,
    on_entry: Callable[[int], None] | None = None,
    on_exit: Callable[[], None] | None = None,
) -> Any:
    """``fn`` wrapped to add its self and inclusive time to key ``j`` of ``timers``.

    ``on_entry(t0)``/``on_exit()`` let a hook also open or close an interval (``feed``).
    """
    own, total, cnt, stack = timers.own, timers.total, timers.cnt, timers.stack

    @functools.wraps(fn)
    def hooked(*args: Any, **kwargs: Any) -> Any:
        cell = [0]
        stack.append(cell)
        t0 = clock()
        if on_entry is not None:
            on_entry(t0)
        try:
            return fn(*args, **kwargs)
        finally:
            elapsed = clock() - t0
            stack.pop()
            own[j] += elapsed - cell[0]
            total[j] += elapsed
            cnt[j] += 1
            if stack:
                stack[-1][0] += elapsed
            if on_exit is not None:
                on_exit()

    return hooked


def _feed_interval(timers: StepTimers, feed_j: int) -> tuple[Any, Any, Any]:
    """Callbacks measuring ``feed``: from ``_run``'s entry to ``_FetchHandler.__init__``'s."""
    own, total, cnt, mark = timers.own, timers.total, timers.cnt, timers.mark

    def run_entry(t0: int) -> None:
        mark[0] = t0

    def run_exit() -> None:
        mark[0] = 0

    def fetch_entry(t0: int) -> None:
        if mark[0]:
            own[feed_j] += t0 - mark[0]
            total[feed_j] += t0 - mark[0]
            cnt[feed_j] += 1
            mark[0] = 0

    return run_entry, run_exit, fetch_entry


def measure_cost(clock: Clock, n: int = 20_000, repeats: int = 5) -> HooksCost:
    """The hooks' own cost in this process: per hooked call, and per step for the wrapper.

    A no-op function is called ``n`` times through ``timed`` and ``n`` times bare; the step
    wrapper is entered and left ``n`` times against an empty loop. Medians of ``repeats``
    (``schedule.overhead_ns``).
    """

    def noop(*_a: Any, **_k: Any) -> None:
        return None

    scratch = StepTimers(1)
    hooked = timed(noop, scratch, 0, clock)

    def wrapped_step() -> None:
        with scratch(0):
            pass
        if len(scratch.rows) > 100_000:
            scratch.rows.clear()

    per_call = overhead_ns(hooked, noop, clock, n, repeats)
    wrapper = overhead_ns(wrapped_step, lambda: None, clock, n, repeats)
    scratch.rows.clear()
    return HooksCost(
        per_call_ns=per_call,
        step_wrapper_ns=wrapper,
        method=f"no-op call through the hook vs bare, and the step wrapper, {n} x {repeats}",
    )


def measure_feed_cast(
    arrays: Any, clock: Clock, dtype: str = "float32", n: int = 2_000, repeats: int = 5
) -> FeedCast:
    """What converting the step's feeds to the placeholders' dtype costs, per step.

    Feed conversion is ``np_asarray(value, dtype)``: for a float64 array fed to a float32
    placeholder that is a cast and a copy, for a float32 array a no-op. Timed here on the very
    arrays the step feeds, against already-converted copies, alternating, ``n`` steps'
    worth per block; the difference of the medians is the cast's cost (0 for pre-cast feeds).
    """
    import numpy as np

    feeds = [np.asarray(a) for a in arrays]
    ready = [np.asarray(a, dtype=dtype) for a in feeds]
    costs: list[int] = []
    for r in range(repeats):
        times: dict[bool, int] = {}
        for cast in (True, False) if r % 2 == 0 else (False, True):
            source = feeds if cast else ready
            t0 = clock()
            for _ in range(n):
                for a in source:
                    np.asarray(a, dtype=dtype)
            times[cast] = (clock() - t0) // n
        costs.append(times[True] - times[False])
    return FeedCast(
        cast_ns=max(0, median_ns(costs)),
        dtypes=tuple(str(a.dtype) for a in feeds),
        to=dtype,
        method=f"np.asarray of the fed arrays vs pre-converted copies, {n} x {repeats}",
    )


def _resolve(point: HookPoint) -> tuple[Any, str, Any] | str:
    """(owner object, attribute name, original value) of a hook point, or, for an optional
    point this TensorFlow does not have, the note saying so.

    Raises:
        PhaseUnavailable: this TensorFlow has no such required point (the note names it and
            the version).
    """
    try:
        owner: Any = importlib.import_module(point.module)
        *path, name = point.attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = vars(owner)[name] if isinstance(owner, type) else getattr(owner, name)
    except (ImportError, AttributeError, KeyError):
        where = f"{point.module}.{point.attr}"
        if point.required:
            raise PhaseUnavailable(tf_internals.missing_note("the hooks phase", where)) from None
        return tf_internals.missing_note(f"timing {point.key} on its own", where) + (
            "; its time is in the hooked call around it"
        )
    return owner, name, original


class HooksPhase(Phase):
    """Timers on TensorFlow's Python internals (see the module docstring)."""

    name = "hooks"

    def __init__(self, budget: Any, options: dict[str, Any] | None = None) -> None:
        super().__init__(budget)
        opts = options or {}
        self.cost_pairs = int(opts.get("hooks_cost_pairs", COST_PAIRS))
        self.target: Target | None = None
        self.timers: StepTimers | None = None
        self.cost = HooksCost()
        # (owner, attribute, original, hooked) for every hook point, in install order.
        self._hooks: list[tuple[Any, str, Any, Any]] = []
        #: Optional points this TensorFlow lacks, and its version if untested: for the record.
        self.notes: list[str] = []

    def applies_to(self, spec: WorkloadSpec) -> str | None:
        if spec.uses_tensorflow:
            return None
        return f"{spec.framework} workload: no TensorFlow to hook"

    def install(self, ctx: PhaseContext) -> None:
        if ctx.spec.framework == "tf1" or ctx.loop.info.kind == "tf1":
            target = TF1
        elif ctx.loop.info.mode == "eager":
            raise PhaseUnavailable(
                "eager loop: eager ops take TensorFlow's C fast path, invisible to Python hooks; "
                "their costs are the framework phase's eager_op events"
            )
        else:
            target = TF2
        resolved = [_resolve(p) for p in target.points]
        self.notes = [r for r in resolved if isinstance(r, str)]
        version_note = tf_internals.tf_version_note()
        if version_note is not None:
            self.notes.append(version_note)
        # Measured before patching, so the figure is the hook's alone.
        self.cost = measure_cost(ctx.clock)
        timers = StepTimers(len(target.measured))
        keys = target.measured
        if P.FEED in target.intervals:
            run_entry, run_exit, fetch_entry = _feed_interval(timers, keys.index(P.FEED))
        pairs = zip(target.points, resolved, strict=True)
        for j, (point, found) in enumerate(pairs):
            if isinstance(found, str):
                continue  # not in this TensorFlow: its accumulator stays at zero
            owner, name, original = found
            if point.key == P.RUN_INNER:
                hooked = timed(original, timers, j, ctx.clock, on_entry=run_entry, on_exit=run_exit)
            elif point.key == P.FETCH_SETUP:
                hooked = timed(original, timers, j, ctx.clock, on_entry=fetch_entry)
            else:
                hooked = timed(original, timers, j, ctx.clock)
            self._hooks.append((owner, name, original, hooked))
        self.target, self.timers = target, timers
        self._apply()

    def step_wrapper(self, ctx: PhaseContext) -> StepWrapper | None:
        return self.timers

    def _apply(self) -> None:
        for owner, name, _original, hooked in self._hooks:
            setattr(owner, name, hooked)

    def _restore(self) -> None:
        for owner, name, original, _hooked in reversed(self._hooks):
            setattr(owner, name, original)

    def _on_off(self, ctx: PhaseContext, timers: StepTimers) -> HooksCost:
        """The hooks' whole cost per step: alternating blocks of steps with them on and off.

        A no-op timed in a tight loop is hot in every cache; inside TensorFlow's call stack
        the same wrapper costs several times more, so the step-level difference is the figure
        reported. Blocks alternate in order (off-on, on-off, ...) so drift cancels; the result
        is the median over pairs of the difference of block medians. These steps run after the
        window and are in no window.
        """
        n = self._block(ctx)
        diffs: list[int] = []
        for pair in range(self.cost_pairs):
            medians: dict[bool, int] = {}
            for on in (False, True) if pair % 2 == 0 else (True, False):
                if on:
                    self._apply()
                else:
                    self._restore()
                marks = [ctx.clock()]
                ctx.loop.run(n, marks, ctx.clock, timers if on else None)
                medians[on] = median_ns([b - a for a, b in itertools.pairwise(marks)])
            diffs.append(medians[True] - medians[False])
        self._restore()
        return dataclasses.replace(
            self.cost,
            on_off_ns=median_ns(diffs) if diffs else None,
            on_off_pairs=tuple(diffs),
            on_off_block_steps=n,
        )

    def remove(self, ctx: PhaseContext, window: Window) -> PhaseRecord:
        if self.target is None or self.timers is None:
            self._restore()
            raise RuntimeError("hooks phase removed without being installed")
        walls = {s.index: s.dur_ns for s in window.steps(ctx.loop.work)}
        rows = list(self.timers.rows)
        try:
            cost = self._on_off(ctx, self.timers) if self.cost_pairs > 0 else self.cost
        except LoopEnded:
            # A user's script ended before the on/off blocks: the micro-benchmark's cost stands.
            cost = dataclasses.replace(
                self.cost, on_off_note="the script ended before the on/off blocks"
            )
        finally:
            self._restore()
        data = collect.split(self.target, rows, walls, cost)
        info = ctx.loop.info
        notes = list(self.notes)
        if self.target is TF2 and not data.calls_per_step.get(P.FUNCTION_CALL):
            notes.insert(0, "no tf.function call in the window's steps: nothing to split")
        data = dataclasses.replace(
            data,
            feed_cast=(
                measure_feed_cast(info.feed_arrays, ctx.clock)
                if self.target is TF1 and info.feed_arrays
                else None
            ),
            loop_info=LoopFacts(
                fetches=info.fetches,
                feeds=info.feeds,
                k=info.k,
                mode=info.mode,
                same_feeds=info.same_feeds,
            ),
            note="; ".join(notes),
        )
        self.timers.rows.clear()
        return PhaseRecord(name=self.name, status=OK, window=window, data=data)

    def extra_steps(self, ctx: PhaseContext) -> int:
        return self.cost_pairs * 2 * self._block(ctx)

    def limit_extra(self, ctx: PhaseContext, seconds: float) -> int:
        """On/off blocks of about ``seconds`` in all. Above ``NEGLIGIBLE_STEP_NS`` a step is so
        much longer than the hooks' few µs that the blocks could not resolve them: none run,
        and the micro-benchmark's cost stands."""
        if ctx.step_ns >= NEGLIGIBLE_STEP_NS:
            self.cost_pairs = 0
        else:
            pair_ns = 2 * self._block(ctx) * max(ctx.step_ns, 1)
            self.cost_pairs = max(1, min(self.cost_pairs, int(seconds * 1e9 // pair_ns)))
        return self.extra_steps(ctx)

    def fit_extra(self, ctx: PhaseContext, tight: int, cap: int) -> int:
        if self.extra_steps(ctx) > cap:
            self.cost_pairs = 0
        return self.extra_steps(ctx)

    @staticmethod
    def _block(ctx: PhaseContext) -> int:
        """Steps per on/off block: ~``COST_BLOCK_S`` of steps, clamped."""
        n = int(COST_BLOCK_S * 1e9 / max(ctx.step_ns, 1))
        return max(COST_BLOCK_MIN, min(COST_BLOCK_MAX, n))

    def abort(self, ctx: PhaseContext) -> None:
        self._restore()
