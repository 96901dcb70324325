"""Arithmetic per step and this machine's peak: what a compute-bound step is measured against.

Place in the pipeline: the framework phase (``profiler.capture.phases.framework``) calls these
once, after its capture, in the measured process (TensorFlow is loaded there):

* ``peak_gflops``: a 1024 x 1024 float32 matmul timed a few times in a ``tf.function`` (the
  median), on this machine, now: the achieved fraction of a compute-bound step is against it;
* ``graph_flops``: TensorFlow's own float-op count of a graph (``tf.compat.v1.profiler`` with
  ``float_operation()``), for the ops one step runs: a TF1 step's from a FULL_TRACE step's
  ``RunMetadata``, a ``tf.function``'s (Keras ``fit``'s train function included) from its last
  concrete function's graph. Ops with unknown shapes count nothing, so it is a lower bound.

Everything here is best effort: a failure returns None, and the phase says so.
"""

from __future__ import annotations

import contextlib
import time
from contextlib import AbstractContextManager
from typing import Any

PEAK_SIZE = 1024
PEAK_REPEATS = 5


def peak_gflops() -> float | None:
    """Float32 matmul GFLOP/s of this machine (median of ``PEAK_REPEATS``)."""
    try:
        import tensorflow as tf

        a = tf.random.normal((PEAK_SIZE, PEAK_SIZE))
        b = tf.random.normal((PEAK_SIZE, PEAK_SIZE))
        mm = tf.function(tf.linalg.matmul)
        mm(a, b).numpy()
        times = []
        for _ in range(PEAK_REPEATS):
            t0 = time.perf_counter()
            mm(a, b).numpy()
            times.append(time.perf_counter() - t0)
        return 2 * PEAK_SIZE**3 / sorted(times)[len(times) // 2] / 1e9
    except Exception:
        return None


def graph_flops(graph: Any, run_metadata: Any = None) -> int | None:
    """TensorFlow's float-op count of ``graph`` (of the ops ``run_metadata`` ran, if given)."""
    try:
        import tensorflow as tf

        opts = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        opts["output"] = "none"
        # TF's flops registry calls a deprecated TF1 helper: its warning is printed once per
        # process, so silenced here (not printed and not marked printed) a script that counts
        # flops itself still gets it.
        with _deprecation_silenced():
            prof = tf.compat.v1.profiler.profile(graph, run_meta=run_metadata, options=opts)
        return int(prof.total_float_ops) or None
    except Exception:
        return None


def _deprecation_silenced() -> AbstractContextManager[Any]:
    try:
        from tensorflow.python.util import deprecation
    except ImportError:
        return contextlib.nullcontext()
    return deprecation.silence()  # type: ignore[no-any-return]


def function_flops(function: Any) -> int | None:
    """Float ops of one call of a ``tf.function``: its last concrete function's graph."""
    try:
        concrete = function._list_all_concrete_functions()
    except Exception:
        return None
    if not concrete:
        return None
    return graph_flops(concrete[-1].graph)
