"""adam_minibatch's update is Keras's Adam: the same step on one identical batch."""

from __future__ import annotations

import time

import numpy as np
import pytest

from profiler.workloads import adam_minibatch, get, seed004
from profiler.workloads.base import Params

pytestmark = pytest.mark.tf
SEED = 3


def keras_one_update(
    x: np.ndarray, y: np.ndarray, w0: float, b0: float, dtype: str
) -> tuple[float, float]:
    """``Dense(1)`` at ``(w0, b0)``, one ``Adam.apply_gradients`` on the batch's mean MSE."""
    import keras
    import tensorflow as tf

    layer = keras.layers.Dense(1, dtype=dtype)
    layer.build((None, 1))
    layer.set_weights([np.array([[w0]]), np.array([b0])])
    opt = keras.optimizers.Adam(learning_rate=adam_minibatch.LR)
    with tf.GradientTape() as tape:
        loss = keras.losses.MeanSquaredError()(y, layer(x[:, None].astype(dtype)))
    variables = layer.trainable_variables
    opt.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
    kernel, bias = layer.get_weights()
    return float(kernel[0, 0]), float(bias[0])


def test_first_step_of_the_workload_matches_keras():
    # n = 32: the first step's batch is the whole data set, in some order (the mean ignores it).
    x, y = seed004.data(32, SEED)
    loop = get("adam_minibatch").build(Params(steps=1, n=32, seed=SEED))
    loop.run(1, [], time.perf_counter_ns)
    assert sorted(loop.probes["batch_indices"]()) == list(range(32))
    assert loop.probes["optimizer_step"]() == 1
    got = loop.params()
    # From w = b = 0 the weights are the update itself; Keras's default dtype is float32.
    for dtype in ("float32", "float64"):
        w, b = keras_one_update(x, y, 0.0, 0.0, dtype)
        assert got["w"] == pytest.approx(w, rel=1e-5), dtype
        assert got["b"] == pytest.approx(b, rel=1e-5), dtype


def test_epsilon_is_applied_as_keras_does_near_the_optimum():
    # Near the batch's least-squares fit the gradient is ~1e-4 and epsilon's placement shows:
    # Keras's sqrt(v) + eps against the textbook sqrt(v_hat) + eps differ by ~3% in the step.
    x, y = seed004.data(32, SEED)
    w_ls, b_ls = np.polyfit(x, y, 1)
    w0, b0 = float(w_ls + 5e-5), float(b_ls - 5e-5)
    r = y - (w0 * x + b0)
    gw, gb = -2.0 * float(x.dot(r)) / 32, -2.0 * float(r.sum()) / 32
    assert 1e-5 < abs(gw) < 1e-3 and 1e-5 < abs(gb) < 1e-3
    update = adam_minibatch.adam()
    w, _, _ = update(w0, 0.0, 0.0, gw, 1)
    b, _, _ = update(b0, 0.0, 0.0, gb, 1)
    kw, kb = keras_one_update(x, y, w0, b0, "float64")
    assert w - w0 == pytest.approx(kw - w0, rel=1e-5)
    assert b - b0 == pytest.approx(kb - b0, rel=1e-5)
    # The test can tell: textbook Adam (epsilon on the bias-corrected sqrt(v)) misses.
    textbook = -1e-3 * gw / (abs(gw) + adam_minibatch.EPSILON)
    assert textbook != pytest.approx(kw - w0, rel=1e-3)


def test_epochs_are_permutations_and_the_counter_counts_updates():
    n = 96  # 3 batches an epoch
    loop = get("adam_minibatch").build(Params(steps=1, n=n, seed=SEED))
    assert loop.work.steps_per_epoch == 3 and loop.work.samples_per_step == 32
    epochs = []
    for _ in range(2):
        seen = []
        for _ in range(3):
            loop.run(1, [], time.perf_counter_ns)
            seen.extend(loop.probes["batch_indices"]())
        epochs.append(seen)
    assert sorted(epochs[0]) == sorted(epochs[1]) == list(range(n))
    assert epochs[0] != epochs[1]  # reshuffled
    assert loop.probes["optimizer_step"]() == 6


def test_short_last_batch_as_keras():
    loop = get("adam_minibatch").build(Params(steps=1, n=70, seed=SEED))
    assert loop.work.steps_per_epoch == 3
    sizes = []
    for _ in range(3):
        loop.run(1, [], time.perf_counter_ns)
        sizes.append(len(loop.probes["batch_indices"]()))
    assert sizes == [32, 32, 6]
