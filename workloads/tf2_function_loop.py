"""Seed 000, TF2 ``tf.function`` with the loop inside: ``k`` steps per call.

Variant of ``tf2_function_step`` (seed 000). The one difference: the training loop itself moves
into the ``tf.function`` (``for _ in tf.range(k)``, which autograph turns into a graph while
loop), so one Python call runs ``k`` steps. It shows the floor of the seed's step when no
Python runs between steps: ~12–15 µs against ~30 µs of kernels per TF1 step. A timed unit is
one call (``k`` steps, default 100; ``WorkDecl.units_per_step = k``).
"""

from __future__ import annotations

from profiler.workloads.base import Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    import tensorflow as tf

    from profiler.workloads import tf2_common

    model = tf2_common.Model(params.n)
    k = params.k

    @tf.function
    def train_k() -> tf.Tensor:
        loss = tf.constant(0.0)
        # tf.range makes autograph build a while loop; a Python range would unroll k copies.
        for _ in tf.range(k):
            loss = model.train_step()
        return loss

    return model.loop(
        train_k,
        tf2_common.work(params.n, k),
        mode="function_loop",
        function=train_k,
        k=k,
    )


WORKLOAD = WorkloadSpec(
    name="tf2_function_loop",
    title="TF2 tf.function with k steps inside, the seed-000 regression",
    doc=__doc__ or "",
    seed="000",
    framework="tf2",
    # ~3 ms per call of 100 steps here: 250 calls are ~0.8 s.
    defaults=Params(steps=250, n=1000, k=100),
    # The seed's 1e5 steps at the default k = 100.
    full_steps=1_000,
    build=build,
)
