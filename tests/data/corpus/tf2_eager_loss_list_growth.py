"""A TF2 eager training loop (GradientTape, no tf.function) that keeps every step's loss tensor
in a Python list to plot later: the list holds one EagerTensor a step, and the process grows
with it for the whole run (a memory-growth pattern Q&A posts report: "out of memory with
gradient tape, but only when I append to a list").

Source: https://e-learn.cn/topic/4021299 (the asker's loop: for epoch / for x, y_true in
train_dataset / tf.GradientTape / model(x, training=True) / tape.gradient / apply_gradients,
appending a tensor to a list every step); adapted: a small dense model on synthetic features
(the question's data set is (1000, 3253)), and the tensor kept is the step's loss.

Truth, measured without the profiler (``python tf2_eager_loss_list_growth.py --bench``): the
resident size (/proc/self/statm) before and after blocks of steps, with the loss tensor
appended (as written) and with float(loss) appended (the fix), alternating; and the step's time
in each.
"""

import os
import sys
import time

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
features = rng.normal(size=(1024, 64)).astype(np.float32)
targets = rng.integers(0, 2, size=(1024, 1)).astype(np.float32)
train_dataset = tf.data.Dataset.from_tensor_slices((features, targets)).batch(32)

model = tf.keras.Sequential(
    [
        tf.keras.layers.Input((64,)),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(1),
    ]
)
los_func = tf.keras.losses.BinaryCrossentropy(from_logits=True)
opti_func = tf.keras.optimizers.SGD(0.01)


def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _step(x, y_true):
    with tf.GradientTape() as tape:
        y_pred = model(x, training=True)
        loss = los_func(y_true, y_pred)
    gradients = tape.gradient(loss, model.trainable_variables)
    opti_func.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
    return loss


def train(epochs, keep):
    """The loop below, with what it keeps passed in (for the bench)."""
    for _epoch in range(epochs):
        for x, y_true in train_dataset:
            with tf.GradientTape() as tape:
                y_pred = model(x, training=True)
                loss = los_func(y_true, y_pred)
            gradients = tape.gradient(loss, model.trainable_variables)
            opti_func.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
            keep(loss)


if "--bench" in sys.argv:
    # 3 alternating repeats of 20 epochs (640 steps) each way; growth = RSS after - before.
    kept_tensors, kept_floats = [], []
    train(5, kept_floats.append)  # warm-up
    res = {"tensor": [], "float": []}
    for _ in range(3):
        for name, keep in (
            ("tensor", kept_tensors.append),
            ("float", lambda v: kept_floats.append(float(v))),
        ):
            r0, t0 = rss(), time.perf_counter()
            train(20, keep)
            dt, dr = time.perf_counter() - t0, rss() - r0
            res[name].append((dr / 640, dt / 640 * 1e6))
    # The step's time eager (as written) against the same step in a tf.function (3 alternating
    # repeats of 10 epochs each): what Python and per-op dispatch cost.
    step_fn = tf.function(lambda x, y: _step(x, y))
    for x, y in train_dataset:
        step_fn(x, y)
    for _ in range(3):
        for name, fn in (("eager step", _step), ("tf.function step", step_fn)):
            t0 = time.perf_counter()
            for _ in range(10):
                for x, y in train_dataset:
                    fn(x, y)
            res.setdefault(name, []).append((0, (time.perf_counter() - t0) / 320 * 1e6))
    for name, v in res.items():
        b = sorted(x[0] for x in v)
        s = sorted(x[1] for x in v)
        print(f"{name}: {b[1]:,.0f} bytes a step ({[round(x) for x in b]}); {s[1]:,.0f} us a step")
    sys.exit()

epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 150
losses = []
for epoch in range(epochs):
    for x, y_true in train_dataset:
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = los_func(y_true, y_pred)
        gradients = tape.gradient(loss, model.trainable_variables)
        opti_func.apply_gradients(zip(gradients, model.trainable_variables))
        losses.append(loss)
print(f"{len(losses)} steps, last loss {float(losses[-1]):.4f}")
