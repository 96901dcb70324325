"""The framework-trace phase: TensorFlow's profiler over a window of steps, parsed into our model.

Place in the pipeline: a phase of the workload process (``profiler.phases``), after the lines
phase. ``install`` starts ``tf.profiler.experimental`` with the workload's TensorBoard folder as
logdir, so the capture lands in ``tensorboard/<slug>/plugins/profile/<ts>/<host>.xplane.pb`` and
TensorBoard shows each workload as its own run. Every step of the window (and of its re-warm
steps) runs inside ``Trace("train", step_num=i, _r=1)``, the step convention XProf's overview
page looks for. ``remove`` stops the profiler, then for TF1 sessions runs a few extra steps with
``RunOptions(FULL_TRACE)`` (outside the window: they are ~60% slower) and saves their raw
``RunMetadata``, and finally parses the capture (``profiler.collectors.xplane``) into spans and
per-step figures. A capture that cannot be parsed fails the phase with a one-line reason naming
the file; whatever else was measured is kept and the run goes on.

``data`` keys:

* ``profiler``: options, ``start_ns``/``stop_ns`` (cost of starting, and of stopping, which
  writes the capture), ``xplane`` (path relative to the run folder) and ``xplane_bytes``;
* ``steps``: per-step columns of the window (``xplane.STEP_COLUMNS``: ``wall_ns``,
  ``run_call_ns`` (``SessionRun`` / the function's native call), ``function_call_ns``,
  ``executor_ns``, ``kernel_union_ns``, ``kernel_sum_ns``, ``kernels``, ``eager_ops``,
  ``eager_op_ns``) and ``median_ns`` of each; ``missing_steps``;
* ``clock``: ``offset_ns`` from the capture's clock to ours and ``uncertainty_ns``, the bound
  on its error (``xplane.clock_offset``);
* ``op_table``: the per-op table (``profiler.collectors.op_table``), from ``step_stats`` of the
  FULL_TRACE steps for TF1 and from the capture's kernel events otherwise; for TF1 the
  capture's own table is ``xplane_op_table`` and ``kernel_coverage`` counts the ops in each;
* ``full_trace`` (TF1): ``steps``, ``first_step``, ``step_median_ns`` and the saved
  ``run_metadata`` files;
* ``spans``: how many spans were kept, for how many steps (``xplane.MAX_SPANS``).

The phase's inflation (its window's median step over the timed window's) is computed from the
windows like every phase's (``profiler.stats.inflation``).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

from profiler.collectors import step_stats, xplane
from profiler.model import FAILED, OK, PhaseRecord, Window, median_ns
from profiler.phases import Budget, Phase, PhaseContext, PhaseUnavailable
from workloads.base import LoopEnded, StepWrapper, WorkloadSpec

#: Host level 2 (TF's default) traces the kernels TensorFlow deems expensive; level 3 added only
#: a few cheap ones here and slowed Keras steps further; python_tracer_level=1 yields nothing
#: on this TF (DESIGN "Facts"); no device tracer on a CPU-only build.
PROFILER_OPTIONS = {"host_tracer_level": 2, "python_tracer_level": 0, "device_tracer_level": 0}
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

    def __init__(self, budget: Budget, options: dict[str, Any] | None = None) -> None:
        super().__init__(budget)
        opts = options or {}
        self.full_trace_steps = int(opts.get("full_trace_steps", FULL_TRACE_STEPS))
        self._running = False
        self._before: set[Path] = set()
        self._start_ns = 0
        self._session_patched: Any = None

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
        t0 = ctx.clock()
        try:
            _start_profiler(ctx.tensorboard_dir)
        except tf.errors.AlreadyExistsError:
            raise PhaseUnavailable(
                "another TensorFlow profiler session is running in this process; stop it "
                "(tf.profiler.experimental.stop) or leave out the framework phase"
            ) from None
        self._start_ns = ctx.clock() - t0
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

    def remove(self, ctx: PhaseContext, window: Window) -> PhaseRecord:
        self._running = False
        t0 = ctx.clock()
        _stop_profiler()
        stop_ns = ctx.clock() - t0
        new = sorted(_xplanes(ctx.tensorboard_dir) - self._before, key=os.path.getmtime)
        run_dir = ctx.tensorboard_dir.parent.parent
        data: dict[str, Any] = {
            "profiler": {
                "options": dict(PROFILER_OPTIONS),
                "start_ns": self._start_ns,
                "stop_ns": stop_ns,
                "xplane": _relative(new[-1], run_dir) if new else None,
                "xplane_bytes": new[-1].stat().st_size if new else 0,
            }
        }
        artefacts: list[str] = []
        if new:
            artefacts.append(os.path.relpath(new[-1], ctx.workload_dir))
        if self._is_tf1(ctx) and self.full_trace_steps > 0:
            try:
                table, full, paths = self._full_trace(ctx)
            except LoopEnded:
                # A user's script ended with the window: no FULL_TRACE steps to run.
                data["full_trace"] = {"steps": 0, "note": "the script ended before them"}
            else:
                data["op_table"] = table
                data["full_trace"] = full
                artefacts.extend(os.path.relpath(p, ctx.workload_dir) for p in paths)
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
        data["steps"] = columns
        data["median_ns"] = xplane.medians(columns)
        data["missing_steps"] = list(capture.missing)
        data["clock"] = {"offset_ns": offset, "uncertainty_ns": uncertainty}
        table = xplane.op_table(capture)
        if "op_table" in data:
            data["xplane_op_table"] = table
            # Steady-state captures hold only the kernels TF deems expensive: say how many.
            data["kernel_coverage"] = {
                "xplane_ops": len(table["rows"]) + table["rows_omitted"],
                "step_stats_ops": len(data["op_table"]["rows"]) + data["op_table"]["rows_omitted"],
            }
        else:
            data["op_table"] = table
        data["notes"] = [
            "in the steady state TensorFlow traces only the kernels it deems expensive: "
            "kernel time from the capture is a lower bound"
        ]
        data["spans"] = {
            "count": len(spans),
            "steps": len({s.step for s in spans}),
            "max_spans": xplane.MAX_SPANS,
        }
        return PhaseRecord(self.name, OK, window, "", tuple(artefacts), spans=spans, data=data)

    def abort(self, ctx: PhaseContext) -> None:
        if self._running:
            self._running = False
            _stop_profiler()
        self._unpatch_session(ctx)

    # --- TF1 FULL_TRACE steps ----------------------------------------------------------------

    @staticmethod
    def _is_tf1(ctx: PhaseContext) -> bool:
        return ctx.loop.info.get("kind") == "tf1" and ctx.loop.info.get("session") is not None

    def _full_trace(self, ctx: PhaseContext) -> tuple[dict[str, Any], dict[str, Any], list[Path]]:
        """Run ``full_trace_steps`` steps with FULL_TRACE; their op table, figures and files.

        The workloads call ``sess.run`` by attribute each step, so an instance attribute that
        adds ``options``/``run_metadata`` reaches every call without touching the workload.
        """
        from tensorflow.core.protobuf import config_pb2

        sess = ctx.loop.info["session"]
        run_options = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
        class_run = type(sess).run
        metadatas: list[tuple[int, Any]] = []
        first = ctx.loop.steps_done

        def traced_run(fetches: Any, feed_dict: Any = None, **_ignored: Any) -> Any:
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
            ctx.loop.run(units, marks, ctx.clock)
        finally:
            self._unpatch_session(ctx)
        paths = step_stats.write_run_metadata(ctx.workload_dir / RUN_METADATA_DIR, metadatas)
        table = step_stats.op_table([md for _s, md in metadatas])
        durations = [b - a for a, b in itertools.pairwise(marks)]
        full = {
            "steps": len(metadatas),
            "first_step": first,
            "step_median_ns": median_ns(durations) if durations else None,
            "run_metadata": [os.path.relpath(p, ctx.workload_dir) for p in paths],
        }
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
