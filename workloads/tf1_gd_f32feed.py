"""Seed 000, TF1 variant: the feeds are float32 arrays, cast once when the loop is built.

Variant of ``tf1_gd`` (seed 000). The one difference: ``feed_dict`` gets ``x_data`` and
``y_data`` already cast to the placeholders' float32, so ``session.run`` no longer converts two
float64 arrays each step. It tests the guess that the dtype cast is what makes the TF1 step slow:
measured, it saves ~1–2 µs of ~190 (the feed's other costs, ``np_asarray`` and the copies, stay).
"""

from __future__ import annotations

from profiler.workloads import tf1_gd
from profiler.workloads.base import Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    import numpy as np

    g = tf1_gd.Graph(params.n)
    sess, opt_operation, loss, X, Y = g.sess, g.opt_operation, g.loss, g.X, g.Y
    x_data = g.x_data.astype(np.float32)
    y_data = g.y_data.astype(np.float32)

    def step() -> None:
        # tf1_gd's loop body; only the feeds' dtype differs.
        _, loss_val_tmp = sess.run([opt_operation, loss], feed_dict={X: x_data, Y: y_data})

    return g.loop(
        step,
        tf1_gd.work(params.n),
        fetches=2,
        feeds=2,
        feed_arrays=(x_data, y_data),
    )


WORKLOAD = WorkloadSpec(
    name="tf1_gd_f32feed",
    title="TF1 session.run, feeds pre-cast to float32",
    doc=__doc__ or "",
    seed="000",
    framework="tf1",
    defaults=Params(steps=2_000, n=1000),
    full_steps=100_000,
    build=build,
)
