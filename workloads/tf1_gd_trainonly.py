"""Seed 000, TF1 variant: each step fetches only the train op, not the loss.

Variant of ``tf1_gd`` (seed 000). The one difference: ``sess.run(opt_operation, feed_dict=...)``
instead of ``sess.run([opt_operation, loss], ...)``, so no tensor comes back to numpy and the
fetch handler has one op (no value) to resolve. It shows the cost of fetching a scalar loss every
step, which the seed never uses: ~190 -> ~172 µs a step.
"""

from __future__ import annotations

from profiler.workloads import tf1_gd
from profiler.workloads.base import Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    g = tf1_gd.Graph(params.n)
    sess, opt_operation, X, Y = g.sess, g.opt_operation, g.X, g.Y
    x_data, y_data = g.x_data, g.y_data

    def step() -> None:
        # tf1_gd's loop body with the train op as the only fetch.
        sess.run(opt_operation, feed_dict={X: x_data, Y: y_data})

    return g.loop(step, tf1_gd.work(params.n), fetches=1, feeds=2)


WORKLOAD = WorkloadSpec(
    name="tf1_gd_trainonly",
    title="TF1 session.run fetching only the train op",
    doc=__doc__ or "",
    seed="000",
    framework="tf1",
    defaults=Params(steps=2_000, n=1000),
    full_steps=100_000,
    build=build,
)
