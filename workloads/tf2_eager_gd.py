"""Seed 000, TF2 eager: the seed's regression with ``GradientTape``, op by op from Python.

Baseline of the TF2 family (seed 000): what the seed's loop becomes when written the TF2 way
without ``tf.function``. Each step executes ~20 ops eagerly, each a separate trip from Python
through TensorFlow's eager C fast path, so a step costs ~1.5 ms for ~30 µs of kernels: it shows
that dropping the ``Session`` for eager execution makes the per-op dispatch, not the feed, the
cost. Compared with ``tf1_gd``, the data are tensors converted once (no feed) and nothing is
fetched to numpy; the arithmetic and the trajectory are the same (``workloads.tf2_common``).
"""

from __future__ import annotations

from profiler.workloads.base import Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    from profiler.workloads import tf2_common

    model = tf2_common.Model(params.n)
    return model.loop(model.train_step, tf2_common.work(params.n), mode="eager")


WORKLOAD = WorkloadSpec(
    name="tf2_eager_gd",
    title="TF2 eager GradientTape step, the seed-000 regression",
    doc=__doc__ or "",
    seed="000",
    framework="tf2",
    # ~1.3–1.5 ms a step: 500 steps keep the timed window under a second.
    defaults=Params(steps=500, n=1000),
    full_steps=100_000,
    build=build,
)
