"""Seed 000, TF1 variant: ``k`` training steps inside one ``session.run`` via ``tf.while_loop``.

Variant of ``tf1_gd`` (seed 000). The one difference: the training step (forward pass, loss,
``GradientDescentOptimizer(1e-4)`` update) is the body of a ``tf.while_loop`` run ``k`` times
(default 100) per ``session.run``; the placeholders are fed the float64 arrays once per call and
the loop's counter and last loss are fetched once per call, exactly as ``tf1_gd`` does per step.
It shows that the Python side of ``session.run`` (feed, fetch, the session's Python), not the
kernels, is most of a TF1 step: ~190 -> ~30–44 µs a step. A timed unit is one call (``k``
steps; ``WorkDecl.units_per_step = k``).
"""

from __future__ import annotations

from profiler.workloads import tf1_gd
from profiler.workloads.base import SEED000_LR, Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    import tensorflow as tf

    tf1 = tf.compat.v1
    # The placeholders, variables and session of tf1_gd's graph; its top-level loss and train op
    # stay in the graph unused, and the loop below builds its own per iteration.
    g = tf1_gd.Graph(params.n)
    X, Y, W, b = g.X, g.Y, g.W, g.b
    n_samples = g.x_data.shape[0]
    k = params.k
    with g.graph.as_default():
        opt = tf1.train.GradientDescentOptimizer(learning_rate=SEED000_LR)

        def body(i: tf.Tensor, _loss: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            # The seed's step, built inside the loop so every iteration reads the variables
            # the previous one updated.
            Y_pred = tf.matmul(X, W) + b
            loss = tf.reduce_sum((Y - Y_pred) ** 2 / n_samples)
            train = opt.minimize(loss, var_list=[W, b], name="GDO")
            # The counter waits for the update, so the next iteration starts after it.
            with tf.control_dependencies([train]):
                return i + 1, tf.identity(loss)

        loop_op = tf1.while_loop(
            lambda i, _loss: i < k,
            body,
            [tf.constant(0), tf.constant(0.0)],
            # Iterations are sequential anyway (each reads what the last one wrote); saying so
            # costs nothing measurable and does not lean on the executor's scheduling.
            parallel_iterations=1,
            name="train_loop",
        )
    sess = g.sess
    x_data, y_data = g.x_data, g.y_data

    def step() -> None:
        # tf1_gd's loop body with the k-step loop as the fetch: one feed and fetch per k steps.
        _, loss_val_tmp = sess.run(loop_op, feed_dict={X: x_data, Y: y_data})

    return g.loop(step, tf1_gd.work(params.n, k), fetches=2, feeds=2, k=k)


WORKLOAD = WorkloadSpec(
    name="tf1_gd_whileloop",
    title="TF1 tf.while_loop, k steps per session.run",
    doc=__doc__ or "",
    seed="000",
    framework="tf1",
    defaults=Params(steps=200, n=1000, k=100),
    # The seed's 1e5 steps at the default k = 100.
    full_steps=1_000,
    build=build,
)
