"""Seed 000, TF1 variant: the data live in the graph as constants; nothing is fed.

Variant of ``tf1_gd`` (seed 000). The one difference: ``X`` and ``Y`` are float32 constants in
the graph (``tf1_gd.Graph(n, data_in_graph=True)``) instead of placeholders, so each step is
``sess.run([opt_operation, loss])`` without a ``feed_dict``. It shows the whole cost of feeding
(conversion, shape checks, copies into the runtime): ~190 -> ~117 µs a step.
"""

from __future__ import annotations

from profiler.workloads import tf1_gd
from profiler.workloads.base import Loop, Params, WorkloadSpec


def build(params: Params) -> Loop:
    g = tf1_gd.Graph(params.n, data_in_graph=True)
    sess, opt_operation, loss = g.sess, g.opt_operation, g.loss

    def step() -> None:
        # tf1_gd's loop body without the feed_dict.
        _, loss_val_tmp = sess.run([opt_operation, loss])

    return g.loop(step, tf1_gd.work(params.n), fetches=2, feeds=0)


WORKLOAD = WorkloadSpec(
    name="tf1_gd_nofeed",
    title="TF1 session.run, data as graph constants (no feed)",
    doc=__doc__ or "",
    seed="000",
    framework="tf1",
    defaults=Params(steps=2_000, n=1000),
    full_steps=100_000,
    build=build,
)
