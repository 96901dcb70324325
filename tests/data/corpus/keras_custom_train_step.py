"""A ``keras.Model`` subclass that overrides ``train_step``, trained with ``fit``: the first
example of the Keras guide "Customizing what happens in fit() with TensorFlow" (fchollet,
https://keras.io/guides/custom_train_step_in_tensorflow/; source:
https://github.com/keras-team/keras-io/blob/master/guides/custom_train_step_in_tensorflow.py).

Kept as written: ``CustomModel.train_step`` (unpack ``(x, y)``, forward pass under a
GradientTape, ``self.compute_loss``, gradients, ``self.optimizer.apply``, the metrics loop,
the returned dict), the functional model (Input (32,) -> Dense(1)), compile(optimizer="adam",
loss="mse", metrics=["mae"]), random inputs of shape (N, 32) and targets (N, 1), and
``fit(x, y, epochs=3)`` with the default batch size (32). Adapted: N is 64,000 instead of
1,000 (3 epochs of 2,000 batches, so the run lasts seconds), and the progress bar is off
(verbose=0).

Truth, measured without the profiler (``python tests/data/corpus/keras_custom_train_step.py
--bench``, this machine, 2 cores, medians of 3 repeats): an epoch of this fit against the same
epoch compiled with steps_per_execution=32 (fit's per-batch machinery paid once per 32
batches), and the kernels of one batch alone (the same train_step's arithmetic 32 times
inside one tf.function, per batch). Figures: the truth file
(truth/keras_custom_train_step.json).
"""

import os
import sys
import time

os.environ["KERAS_BACKEND"] = "tensorflow"

import keras
import numpy as np
import tensorflow as tf


class CustomModel(keras.Model):
    def train_step(self, data):
        # Unpack the data. Its structure depends on your model and
        # on what you pass to `fit()`.
        x, y = data

        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)  # Forward pass
            # Compute the loss value
            # (the loss function is configured in `compile()`)
            loss = self.compute_loss(y=y, y_pred=y_pred)

        # Compute gradients
        trainable_vars = self.trainable_variables
        gradients = tape.gradient(loss, trainable_vars)

        # Update weights
        self.optimizer.apply(gradients, trainable_vars)

        # Update metrics (includes the metric that tracks the loss)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)

        # Return a dict mapping metric names to current value
        return {m.name: m.result() for m in self.metrics}


def build(steps_per_execution=1):
    # Construct and compile an instance of CustomModel
    inputs = keras.Input(shape=(32,))
    outputs = keras.layers.Dense(1)(inputs)
    model = CustomModel(inputs, outputs)
    model.compile(
        optimizer="adam", loss="mse", metrics=["mae"], steps_per_execution=steps_per_execution
    )
    return model


# Just use `fit` as usual
x = np.random.random((64000, 32))
y = np.random.random((64000, 1))

if "--bench" in sys.argv:
    xs, ys = x[:32000], y[:32000]  # 1,000 batches an epoch
    runs: dict[str, list[float]] = {"fit": [], "fit_spe32": [], "kernels": []}
    models = {"fit": build(), "fit_spe32": build(32)}
    for m in models.values():
        m.fit(xs, ys, epochs=1, verbose=0)
    km = build()
    km.fit(xs[:64], ys[:64], epochs=1, verbose=0)
    xb = tf.constant(xs[:32], tf.float32)
    yb = tf.constant(ys[:32], tf.float32)

    @tf.function
    def steps32():
        for _ in tf.range(32):
            km.train_step((xb, yb))

    steps32()
    for _ in range(3):
        for name, m in models.items():
            t = time.perf_counter()
            m.fit(xs, ys, epochs=1, verbose=0)
            runs[name].append((time.perf_counter() - t) / 1000)
        t = time.perf_counter()
        for _ in range(1000 // 32):
            steps32()
        runs["kernels"].append((time.perf_counter() - t) / (1000 // 32 * 32))
    us = {k: float(np.median(v)) * 1e6 for k, v in runs.items()}
    print(
        f"a batch: fit {us['fit']:.0f} us, fit with steps_per_execution=32 "
        f"{us['fit_spe32']:.0f} us ({us['fit'] / us['fit_spe32']:.1f}x), train_step alone "
        f"in a tf.function loop {us['kernels']:.0f} us: fit's per-batch machinery is "
        f"{(us['fit'] - us['fit_spe32']) / us['fit']:.0%} of a batch"
    )
    print({k: [round(v * 1e6) for v in vs] for k, vs in runs.items()})
    sys.exit(0)

model = build()
model.fit(x, y, epochs=3, verbose=0)
print("loss", float(model.evaluate(x[:1000], y[:1000], verbose=0)[0]))
