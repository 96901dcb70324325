"""A TF2 custom training loop that writes ``tf.summary`` histograms of every weight and
gradient at every step: the custom-loop part of TensorBoard's "Get started" guide
(https://github.com/tensorflow/tensorboard/blob/master/docs/get_started.ipynb: a
``tf.function`` ``train_step`` on a Keras ``Sequential``, ``tf.summary.create_file_writer``,
``tf.summary.scalar`` of the loss), with ``tf.summary.histogram`` of each variable and its
gradient added inside the step, as TF1 scripts did with ``tf.summary.histogram`` on every
variable and a merged summary fetched each step.

Adapted: random data shaped like the guide's MNIST input flattened to 64 features (no
download), the log directory a temporary one, 5 epochs of 200 batches of 32.

Truth, measured without the profiler (``python tests/data/corpus/tf2_summary_histograms_
every_step.py --bench``, this machine, 2 cores, medians of 3 repeats): the same loop with the
summaries and without them (the truth file, truth/tf2_summary_histograms_every_step.json).
"""

import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

x = np.random.rand(6400, 64).astype("float32")
y = np.random.randint(0, 10, 6400)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
model = tf.keras.Sequential(
    [
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(10),
    ]
)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
opt = tf.keras.optimizers.Adam()
writer = tf.summary.create_file_writer(tempfile.mkdtemp(prefix="summaries-"))


def make_step(summaries):
    @tf.function
    def train_step(xb, yb, step):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        if summaries:
            with writer.as_default(step=step):
                tf.summary.scalar("loss", loss)
                for v, g in zip(model.trainable_variables, grads):
                    tf.summary.histogram(v.name, v)
                    tf.summary.histogram(v.name + "/grad", g)
        return loss

    return train_step


def train(train_step, epochs=5):
    step = tf.Variable(0, dtype=tf.int64)
    for epoch in range(epochs):
        for xb, yb in ds:
            loss = train_step(xb, yb, step)
            step.assign_add(1)
    return float(loss)


if "--bench" in sys.argv:
    steps = {True: make_step(True), False: make_step(False)}
    for s in steps.values():
        train(s, epochs=1)
    runs = {True: [], False: []}
    for _ in range(3):
        for k, s in steps.items():
            t = time.perf_counter()
            train(s, epochs=2)
            runs[k].append((time.perf_counter() - t) / 400 * 1e3)
    with_, without = float(np.median(runs[True])), float(np.median(runs[False]))
    print(
        f"a step: {with_:.2f} ms with the summaries, {without:.2f} ms without "
        f"({with_ / without:.1f}x): the summaries are {1 - without / with_:.0%} of the step"
    )
    print({str(k): [round(v, 2) for v in vs] for k, vs in runs.items()})
    sys.exit(0)

print("final loss", train(make_step(True)))
