"""Seed 000, TensorFlow side: the same regression as a TF1 graph run with ``session.run``.

The seed's first script: float32 placeholders ``X``, ``Y`` of shape (n, 1); variables ``W`` (1, 1)
and ``b`` (1,) initialised to 0 in scope ``linear-regression``; ``loss = reduce_sum((Y - XW - b)**2
/ n)``; ``GradientDescentOptimizer(1e-4).minimize``; every step runs
``sess.run([opt_operation, loss], feed_dict={X: x_data, Y: y_data})`` with the float64 arrays, so
TensorFlow converts both feeds to float32 and fetches the loss each step. It shows where ~190 µs
of a step go when the arithmetic is ~30 µs of kernels: feed conversion, fetch handling, the
session's Python and the executor's dispatch.

The graph is built in its own ``tf.Graph`` (graph mode) rather than by disabling eager execution
for the whole process, so TF1 and TF2 loops can share one process in experiments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profiler.model import WorkDecl
from profiler.workloads.base import (
    SEED000_B0,
    SEED000_LR,
    SEED000_W0,
    TF1,
    Loop,
    LoopInfo,
    Params,
    WorkloadSpec,
    seed000_data,
    seed000_loss,
)

#: Graph arithmetic per sample: forward matmul 2, add 1, subtract 1, pow 1, divide 1, sum 1;
#: backward divide 1, pow gradient 3, negate 1, bias sum 1, matmul gradient 2.
FLOPS_PER_SAMPLE = 15
#: float32 elements read + written per sample by those ops, 4 bytes each (feeds included).
BYTES_PER_SAMPLE = 30 * 4


def work(n: int, k: int = 1) -> WorkDecl:
    return WorkDecl(
        samples_per_step=n * k,
        updates_per_step=k,
        steps_per_epoch=1,
        flops_per_step=FLOPS_PER_SAMPLE * n * k,
        bytes_per_step=BYTES_PER_SAMPLE * n * k,
        units_per_step=k,
    )


class Graph:
    """The seed's TF1 graph, built in a fresh ``tf.Graph`` (shared by the tf1 variants)."""

    def __init__(self, n: int, data_in_graph: bool = False) -> None:
        import tensorflow as tf

        tf1 = tf.compat.v1
        x_data_input, y_data_input = seed000_data(n)
        n_samples = x_data_input.shape[0]
        self.x_data = x_data_input.reshape(n_samples, 1)
        self.y_data = y_data_input.reshape(n_samples, 1)
        self.eval_loss = seed000_loss(x_data_input, y_data_input)
        self.graph = tf.Graph()
        with self.graph.as_default():
            if data_in_graph:
                self.X = tf.constant(self.x_data, dtype=tf.float32, name="tf_x_data")
                self.Y = tf.constant(self.y_data, dtype=tf.float32, name="tf_y_data")
            else:
                self.X = tf1.placeholder(tf.float32, shape=(n_samples, 1), name="tf_x_data")
                self.Y = tf1.placeholder(tf.float32, shape=(n_samples, 1), name="tf_y_data")
            with tf1.variable_scope("linear-regression", reuse=tf1.AUTO_REUSE):
                self.W = tf1.get_variable(
                    "weights", (1, 1), initializer=tf1.constant_initializer(SEED000_W0)
                )
                self.b = tf1.get_variable(
                    "bias", (1,), initializer=tf1.constant_initializer(SEED000_B0)
                )
            Y_pred = tf.matmul(self.X, self.W) + self.b
            self.loss = tf.reduce_sum((self.Y - Y_pred) ** 2 / n_samples)
            with tf1.variable_scope("linear-regression", reuse=tf1.AUTO_REUSE):
                opt = tf1.train.GradientDescentOptimizer(learning_rate=SEED000_LR)
                self.opt_operation = opt.minimize(self.loss, name="GDO")
            self.init = tf1.global_variables_initializer()
        self.sess = tf1.Session(graph=self.graph)
        self.sess.run(self.init)

    def current(self) -> dict[str, float]:
        W_val, b_val = self.sess.run([self.W, self.b])
        return {"W": float(W_val[0, 0]), "b": float(b_val[0])}

    def loop(
        self,
        step: Callable[[], Any],
        work: WorkDecl,
        *,
        fetches: int,
        feeds: int,
        feed_arrays: tuple[Any, ...] | None = None,
        k: int | None = None,
    ) -> Loop:
        """The Loop around ``step``; its info tells phases what the step feeds and fetches.

        ``feed_arrays`` (the arrays fed each step, for the hooks phase's measurement of the
        dtype cast) defaults to the float64 data when the step feeds anything.
        """
        if feed_arrays is None:
            feed_arrays = (self.x_data, self.y_data) if feeds else ()
        info = LoopInfo(
            kind=TF1,
            session=self.sess,
            graph=self.graph,
            fetches=fetches,
            feeds=feeds,
            feed_arrays=feed_arrays,
            # Every seed-000 step feeds the same two arrays.
            same_feeds=True if feeds else None,
            k=k,
        )
        return Loop(
            step=step,
            work=work,
            params=self.current,
            eval_loss=self.eval_loss,
            close=self.sess.close,
            info=info,
        )


def build(params: Params) -> Loop:
    g = Graph(params.n)
    sess, opt_operation, loss, X, Y = g.sess, g.opt_operation, g.loss, g.X, g.Y
    x_data, y_data = g.x_data, g.y_data

    def step() -> None:
        # The seed's loop body: a fresh feed_dict of float64 arrays, both fetches, every step.
        _, loss_val_tmp = sess.run([opt_operation, loss], feed_dict={X: x_data, Y: y_data})

    return g.loop(step, work(params.n), fetches=2, feeds=2)


WORKLOAD = WorkloadSpec(
    name="tf1_gd",
    title="TF1 session.run with feed_dict, the seed-000 loop",
    doc=__doc__ or "",
    seed="000",
    framework="tf1",
    defaults=Params(steps=2_000, n=1000),
    full_steps=100_000,
    build=build,
)
