"""The framework-trace phase: TensorFlow's profiler over a window of steps, parsed into our model.

Place in the pipeline: a phase of the workload process (``profiler.capture.phases``), after the
lines phase. ``install`` starts ``tf.profiler.experimental`` with the workload's TensorBoard folder
as logdir, so the capture lands in ``tensorboard/<slug>/plugins/profile/<ts>/<host>.xplane.pb`` and
TensorBoard shows each workload as its own run. Every step of the window (and of its re-warm steps)
runs inside ``Trace("train", step_num=i, _r=1)``, the step convention XProf's overview page looks
for. ``remove`` stops the profiler, then for TF1 sessions runs a few extra steps with
``RunOptions(FULL_TRACE)`` (outside the window: they are ~60% slower) and saves their raw
``RunMetadata``, and finally parses the capture (``profiler.capture.collectors.xplane``) into spans
and per-step figures. A capture that cannot be parsed fails the phase with a one-line reason naming
the file; whatever else was measured is kept and the run goes on. The log lines TensorFlow writes
during these calls go to the workload's ``profiler-tf.log``, not the output
(``profiler.capture.quiet``).

Its record is a ``FrameworkData`` (``profiler.model.records``): the profiler session's cost
and file, per-step columns of the window and their medians, the clock alignment, the per-op
table (``step_stats`` of the FULL_TRACE steps for TF1, the capture's kernel events otherwise;
for TF1 the capture's own table is ``xplane_op_table`` and ``kernel_coverage`` counts both),
the FULL_TRACE steps and how many spans were kept.

The phase's inflation (its window's median step over the timed window's) is computed from the
windows like every phase's (``profiler.analysis.stats.inflation``).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from pathlib import Path
from typing import Any

from profiler.capture import quiet
from profiler.capture.collectors import fetches as fetches_mod
from profiler.capture.collectors import flops as flops_mod
from profiler.capture.collectors import step_stats, xplane
from profiler.capture.loop import LoopEnded, StepWrapper, WorkloadSpec
from profiler.capture.phases import Budget, Phase, PhaseContext, PhaseUnavailable
from profiler.model import FAILED, OK, PhaseRecord, Window, median_ns
from profiler.model.records import (
    BesideFetch,
    ClockAlignment,
    FrameworkData,
    FullTrace,
    KernelCoverage,
    OpTable,
    ProfilerSession,
    SpanCount,
)

#: Host level 3: every kernel. Level 2 (TF's default) traces only the kernels TensorFlow's cost
#: model deems expensive, which depends on how fast they ran: on a quiet machine a small
#: tf.function's kernels were all cheap and the capture held none (compute "0", the step
#: called Python-bound), under load the same kernels were traced. Level 3 slows a Keras step
#: more, which the framework window's own step (its shares) absorbs. python_tracer_level=1
#: yields nothing on this TF; no device tracer on a CPU-only build.
PROFILER_OPTIONS = {"host_tracer_level": 3, "python_tracer_level": 0, "device_tracer_level": 0}
#: TF1 steps run with ``RunOptions(FULL_TRACE)`` after the window, unless options say otherwise.
FULL_TRACE_STEPS = 20
#: Bounds of the capture window in training steps (a unit may hold several).
MAX_TRAINING_STEPS = 2_000
MIN_UNITS = 5
#: Where the FULL_TRACE steps' ``RunMetadata`` go, under the workload's folder.
RUN_METADATA_DIR = "framework/run_metadata"


def _xplanes(logdir: Path) -> set[Path]:
    return set((logdir / "plugins" / "profile").glob(f"*/*{xplane.XPLANE_SUFFIX}"))


def _start_profiler(logdir: Path) -> None:
    import tensorflow as tf

    options = tf.profiler.experimental.ProfilerOptions(**PROFILER_OPTIONS)
    tf.profiler.experimental.start(str(logdir), options=options)


def _stop_profiler() -> None:
    import tensorflow as tf

    tf.profiler.experimental.stop()


class FrameworkPhase(Phase):
    """TensorFlow profiler capture plus, for TF1, FULL_TRACE step_stats (module docstring)."""

    name = "framework"
    min_window = MIN_UNITS

    def __init__(self, budget: Budget, options: dict[str, Any] | None = None) -> None:
        super().__init__(budget)
        opts = options or {}
        self.full_trace_steps = int(opts.get("full_trace_steps", FULL_TRACE_STEPS))
        self._running = False
        self._before: set[Path] = set()
        self._start_ns = 0
        self._session_patched: Any = None
        self._metadata: Any = None

    def applies_to(self, spec: WorkloadSpec) -> str | None:
        if spec.uses_tensorflow:
            return None
        return f"{spec.framework} workload: no TensorFlow to trace"

    def install(self, ctx: PhaseContext) -> None:
        try:
            import tensorflow as tf
        except ImportError as exc:
            raise PhaseUnavailable(f"TensorFlow is not importable ({exc})") from None
        ctx.tensorboard_dir.mkdir(parents=True, exist_ok=True)
        self._before = _xplanes(ctx.tensorboard_dir)
        try:
            with quiet.held(ctx.workload_dir):
                t0 = ctx.clock()
                _start_profiler(ctx.tensorboard_dir)
                self._start_ns = ctx.clock() - t0
        except tf.errors.AlreadyExistsError:
            raise PhaseUnavailable(
                "another TensorFlow profiler session is running in this process; stop it "
                "(tf.profiler.experimental.stop) or leave out the framework phase"
            ) from None
        self._running = True

    def window_steps(self, ctx: PhaseContext, proposed: int) -> int:
        """At most ``MAX_TRAINING_STEPS`` training steps: a unit of k in-graph steps traces
        every kernel of every iteration (a 100-step unit is ~500 kernel events), and the
        capture grows with them, not with the units."""
        k = ctx.loop.work.units_per_step
        return max(min(proposed, MAX_TRAINING_STEPS // k), MIN_UNITS)

    def step_wrapper(self, ctx: PhaseContext) -> StepWrapper | None:
        import tensorflow as tf

        trace = tf.profiler.experimental.Trace

        def wrap(step: int) -> Any:
            # _r=1 marks a root event: XProf's step-grouping convention for host-only traces.
            return trace("train", step_num=step, _r=1)

        return wrap

    def extra_steps(self, ctx: PhaseContext) -> int:
        return self.full_trace_steps if self._is_tf1(ctx) else 0

    def limit_extra(self, ctx: PhaseContext, seconds: float) -> int:
        """FULL_TRACE steps of about ``seconds`` in all (they run ~1.6x slower), at least 3."""
        most = int(seconds * 1e9 / 1.6 / max(ctx.step_ns, 1))
        self.full_trace_steps = min(self.full_trace_steps, max(3, most))
        return self.extra_steps(ctx)

    def fit_extra(self, ctx: PhaseContext, tight: int, cap: int) -> int:
        self.full_trace_steps = min(self.full_trace_steps, tight)
        return self.extra_steps(ctx)

    def remove(self, ctx: PhaseContext, window: Window) -> PhaseRecord:
        self._running = False
        with quiet.held(ctx.workload_dir):
            t0 = ctx.clock()
            _stop_profiler()
            stop_ns = ctx.clock() - t0
        new = sorted(_xplanes(ctx.tensorboard_dir) - self._before, key=os.path.getmtime)
        run_dir = ctx.tensorboard_dir.parent.parent
        session = ProfilerSession(
            options=dict(PROFILER_OPTIONS),
            start_ns=self._start_ns,
            stop_ns=stop_ns,
            xplane=_relative(new[-1], run_dir) if new else None,
            xplane_bytes=new[-1].stat().st_size if new else 0,
        )
        artefacts: list[str] = []
        if new:
            artefacts.append(os.path.relpath(new[-1], ctx.workload_dir))
        stats_table: OpTable | None = None
        full: FullTrace | None = None
        self._metadata = None
        if self._is_tf1(ctx) and self.full_trace_steps > 0:
            try:
                stats_table, full, paths = self._full_trace(ctx)
            except LoopEnded:
                # A user's script ended with the window: no FULL_TRACE steps to run.
                full = FullTrace(steps=0, note="the script ended before them")
            else:
                artefacts.extend(os.path.relpath(p, ctx.workload_dir) for p in paths)
        data = FrameworkData(profiler=session, op_table=stats_table, full_trace=full)
        if not new:
            reason = f"the TF profiler wrote no {xplane.XPLANE_SUFFIX} under {ctx.tensorboard_dir}"
            return PhaseRecord(self.name, FAILED, window, reason, tuple(artefacts), data=data)
        bounds = {s.index: (s.start_ns, s.end_ns) for s in window.steps(ctx.loop.work)}
        try:
            capture = xplane.parse(new[-1], list(bounds))
        except xplane.XPlaneError as exc:
            return PhaseRecord(self.name, FAILED, window, str(exc), tuple(artefacts), data=data)
        columns = xplane.step_table(capture)
        offset, uncertainty = xplane.clock_offset(capture, bounds)
        spans = xplane.spans(capture, offset)
        table = xplane.op_table(capture)
        coverage = None
        if stats_table is not None:
            # Steady-state captures hold only the kernels TF deems expensive: say how many.
            coverage = KernelCoverage(
                xplane_ops=len(table.rows) + table.rows_omitted,
                step_stats_ops=len(stats_table.rows) + stats_table.rows_omitted,
            )
        with quiet.held(ctx.workload_dir):
            flops, flops_source = self._flops(ctx)
            peak_gflops = flops_mod.peak_gflops()
        data = dataclasses.replace(
            data,
            peak_gflops=peak_gflops,
            flops_per_step=flops,
            flops_source=flops_source,
            steps=columns,
            median_ns=xplane.medians(columns),
            missing_steps=tuple(capture.missing),
            clock=ClockAlignment(offset, uncertainty),
            op_table=stats_table if stats_table is not None else table,
            xplane_op_table=table if stats_table is not None else None,
            kernel_coverage=coverage,
            notes=(
                "in the steady state TensorFlow traces only the kernels it deems expensive: "
                "kernel time from the capture is a lower bound",
            ),
            spans=SpanCount(len(spans), len({s.step for s in spans}), xplane.MAX_SPANS),
        )
        return PhaseRecord(self.name, OK, window, "", tuple(artefacts), spans=spans, data=data)

    def _flops(self, ctx: PhaseContext) -> tuple[int | None, str]:
        """TensorFlow's float-op count of one step, where it can be had (best effort)."""
        info = ctx.loop.info
        if self._metadata is not None and info.session is not None:
            n = flops_mod.graph_flops(info.session.graph, self._metadata)
            return (
                n,
                "tf.compat.v1.profiler float_operation over a FULL_TRACE step's ops" if n else "",
            )
        function = info.function
        if function is None and info.model is not None:
            function = getattr(info.model, "train_function", None)
        if function is not None:
            n = flops_mod.function_flops(function)
            if n:
                return n, "tf.compat.v1.profiler float_operation over the step function's graph"
        return None, ""

    def abort(self, ctx: PhaseContext) -> None:
        if self._running:
            self._running = False
            with quiet.held(ctx.workload_dir):
                _stop_profiler()
        self._unpatch_session(ctx)

    # --- TF1 FULL_TRACE steps ----------------------------------------------------------------

    @staticmethod
    def _is_tf1(ctx: PhaseContext) -> bool:
        return ctx.loop.info.kind == "tf1" and ctx.loop.info.session is not None

    def _full_trace(self, ctx: PhaseContext) -> tuple[OpTable, FullTrace, list[Path]]:
        """Run ``full_trace_steps`` steps with FULL_TRACE; their op table, figures and files.

        The workloads call ``sess.run`` by attribute each step, so an instance attribute that
        adds ``options``/``run_metadata`` reaches every call without touching the workload.
        """
        from tensorflow.core.protobuf import config_pb2

        sess = ctx.loop.info.session
        run_options = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
        class_run = type(sess).run
        metadatas: list[tuple[int, Any]] = []
        first = ctx.loop.steps_done
        beside: list[tuple[BesideFetch, ...]] = []

        def traced_run(fetches: Any, feed_dict: Any = None, **_ignored: Any) -> Any:
            if not beside:
                beside.append(fetches_mod.beside_training(sess.graph, fetches))
            md = config_pb2.RunMetadata()
            out = class_run(
                sess, fetches, feed_dict=feed_dict, options=run_options, run_metadata=md
            )
            metadatas.append((first + len(metadatas), md))
            return out

        self._session_patched = sess
        sess.run = traced_run
        marks = [ctx.clock()]
        # Units of k in-graph steps: a few units already hold many traced iterations.
        units = max(
            min(
                self.full_trace_steps, -(-MAX_TRAINING_STEPS // 10 // ctx.loop.work.units_per_step)
            ),
            2,
        )
        try:
            # The script's session.run on its thread: each FULL_TRACE call logs 5 lines.
            with quiet.held(ctx.workload_dir):
                ctx.loop.run(units, marks, ctx.clock)
        finally:
            self._unpatch_session(ctx)
        paths = step_stats.write_run_metadata(ctx.workload_dir / RUN_METADATA_DIR, metadatas)
        self._metadata = metadatas[-1][1] if metadatas else None
        table = step_stats.op_table([md for _s, md in metadatas])
        durations = [b - a for a, b in itertools.pairwise(marks)]
        full = FullTrace(
            steps=len(metadatas),
            first_step=first,
            step_median_ns=median_ns(durations) if durations else None,
            run_metadata=tuple(os.path.relpath(p, ctx.workload_dir) for p in paths),
            beside=beside[0] if beside else (),
        )
        return table, full, paths

    def _unpatch_session(self, ctx: PhaseContext) -> None:
        sess, self._session_patched = self._session_patched, None
        if sess is not None and "run" in vars(sess):
            del sess.run


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
