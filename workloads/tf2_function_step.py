"""Seed 000, TF2 ``tf.function`` per step: the eager step traced once, called once per step.

Variant of ``tf2_eager_gd`` (seed 000). The one difference: the same ``train_step`` is wrapped in
one ``tf.function``, so each step is a single call into a traced graph instead of ~20 eager op
dispatches. It shows how much of the eager step was per-op Python/dispatch overhead (~1.5 ms ->
~150 µs); what remains is the per-call cost of entering a function, comparable to a TF1
``session.run``. The first call traces the function (``tracing``, excluded from steady state).
"""

from __future__ import annotations

from profiler.workloads.base import Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    import tensorflow as tf

    from profiler.workloads import tf2_common

    model = tf2_common.Model(params.n)
    train_step = tf.function(model.train_step)
    return model.loop(train_step, tf2_common.work(params.n), mode="function", function=train_step)


WORKLOAD = WorkloadSpec(
    name="tf2_function_step",
    title="TF2 tf.function per step, the seed-000 regression",
    doc=__doc__ or "",
    seed="000",
    framework="tf2",
    # ~250 µs a step here: 3,000 steps are ~0.75 s.
    defaults=Params(steps=3_000, n=1000),
    full_steps=100_000,
    build=build,
)
