"""Seed 000 in TensorFlow 2: the model and training step shared by the three ``tf2_*`` workloads.

Not a registered workload (it defines no ``WORKLOAD``). ``Model`` holds the seed's regression as
TF2 state: float32 ``tf.Variable`` ``W`` (1, 1) and ``b`` (1,) at 0, the data as float32 tensors
converted once, and ``train_step``, the seed's step written with a ``GradientTape`` and plain
``assign_sub(lr * grad)``. The three workloads differ only in how they call that one step: eagerly
(``tf2_eager_gd``), wrapped in one ``tf.function`` (``tf2_function_step``) or ``k`` times inside
one ``tf.function`` (``tf2_function_loop``). The loss expression is the TF1 graph's, op for op
(``reduce_sum((Y - (X W + b)) ** 2 / n)``), so the kernels and the trajectory match ``tf1_gd``.

Imported only from inside a workload's ``build`` (it imports TensorFlow at module level).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

from profiler.model import WorkDecl
from profiler.workloads import tf1_gd
from profiler.workloads.base import (
    SEED000_B0,
    SEED000_LR,
    SEED000_W0,
    TF2,
    Loop,
    LoopInfo,
    seed000_data,
    seed000_loss,
)


class Model:
    """The seed's linear regression as TF2 variables, data and one training step.

    Args:
        n: training samples (the seed's 1000).
    """

    def __init__(self, n: int) -> None:
        x_data_input, y_data_input = seed000_data(n)
        self.n_samples = x_data_input.shape[0]
        self.eval_loss = seed000_loss(x_data_input, y_data_input)
        # Converted to float32 tensors once: in TF2 there is no feed, so per-step conversion
        # would be a cost the TF1 workloads' feed_dict has and these do not claim to have.
        self.X = tf.constant(x_data_input.reshape(-1, 1), dtype=tf.float32)
        self.Y = tf.constant(y_data_input.reshape(-1, 1), dtype=tf.float32)
        self.W = tf.Variable(np.full((1, 1), SEED000_W0, np.float32), name="weights")
        self.b = tf.Variable(np.full((1,), SEED000_B0, np.float32), name="bias")
        self.lr = tf.constant(SEED000_LR, dtype=tf.float32)

    def train_step(self) -> tf.Tensor:
        """One full-batch gradient-descent step; returns the loss before the update."""
        with tf.GradientTape() as tape:
            Y_pred = tf.matmul(self.X, self.W) + self.b
            loss = tf.reduce_sum((self.Y - Y_pred) ** 2 / self.n_samples)
        dW, db = tape.gradient(loss, [self.W, self.b])
        self.W.assign_sub(self.lr * dW)
        self.b.assign_sub(self.lr * db)
        return loss

    def current(self) -> dict[str, float]:
        return {"W": float(self.W.numpy()[0, 0]), "b": float(self.b.numpy()[0])}

    def loop(
        self,
        step: Callable[[], Any],
        work: WorkDecl,
        *,
        mode: str,
        function: Any = None,
        k: int | None = None,
    ) -> Loop:
        """The ``Loop`` driving ``step``, with this model's parameters and evaluation loss."""
        return Loop(
            step=step,
            work=work,
            params=self.current,
            eval_loss=self.eval_loss,
            info=LoopInfo(kind=TF2, mode=mode, model=self, function=function, k=k),
        )


def work(n: int, k: int = 1) -> WorkDecl:
    """Declared work per timed unit of ``k`` steps: the same arithmetic as the TF1 graph."""
    return tf1_gd.work(n, k)
