"""The "Celsius to Fahrenheit" first model of Udacity's Intro to TensorFlow for Deep Learning:
one Dense unit trained with ``model.fit(celsius_q, fahrenheit_a, epochs=500)`` on 7 samples,
so every epoch is one batch
(https://github.com/tensorflow/examples/blob/master/courses/udacity_intro_to_tensorflow_for_deep_learning/l02c01_celsius_to_fahrenheit.ipynb).

Kept as written: the data (the notebook's own 7 pairs; nothing to download), the model
(``Dense(units=1, input_shape=[1])``, as ``keras.Input([1])`` for Keras 3), the compile
(mean squared error, Adam(0.1)) and ``fit(celsius_q, fahrenheit_a, epochs=500,
verbose=False)``, then ``predict([100.0])``. Adapted: nothing else (the loop is already 500
epochs of one batch; it runs for 10-30 s on this machine).

Truth, measured without the profiler (``python tests/data/corpus/keras_one_batch_epochs.py
--bench``, this machine, 2 cores, medians of 3 repeats): fit(epochs=200) on the 7 samples
(200 epochs of one batch) against one fit making the same 200 updates in one epoch (the 7
samples tiled 200 times, batch_size=7, epochs=1, shuffle=False), and against that fit with
steps_per_execution=50 (which helps a per-batch cost, not a per-epoch one). Figures: the truth
file (truth/keras_one_batch_epochs.json).
"""

import sys
import time

import numpy as np
import tensorflow as tf

celsius_q = np.array([-40, -10, 0, 8, 15, 22, 38], dtype=float)
fahrenheit_a = np.array([-40, 14, 32, 46, 59, 72, 100], dtype=float)

for i, c in enumerate(celsius_q):
    print(f"{c} degrees Celsius = {fahrenheit_a[i]} degrees Fahrenheit")


def build(steps_per_execution=1):
    l0 = tf.keras.layers.Dense(units=1)
    model = tf.keras.Sequential([tf.keras.Input([1]), l0])
    model.compile(
        loss="mean_squared_error",
        optimizer=tf.keras.optimizers.Adam(0.1),
        steps_per_execution=steps_per_execution,
    )
    return model


if "--bench" in sys.argv:
    N = 200  # updates compared (the script's fit makes 500)
    xs, ys = np.tile(celsius_q, N), np.tile(fahrenheit_a, N)
    runs: dict[str, list[float]] = {"epochs": [], "one_epoch": [], "one_epoch_spe50": []}
    for _ in range(3):
        for name in runs:
            model = build(50 if name.endswith("spe50") else 1)
            model.fit(celsius_q, fahrenheit_a, epochs=2, verbose=False)  # tracing
            t = time.perf_counter()
            if name == "epochs":
                model.fit(celsius_q, fahrenheit_a, epochs=N, verbose=False)
            else:
                model.fit(xs, ys, batch_size=7, epochs=1, shuffle=False, verbose=False)
            runs[name].append(time.perf_counter() - t)
    m = {k: float(np.median(v)) for k, v in runs.items()}
    print(
        f"{N} updates: {N} one-batch epochs {m['epochs']:.2f} s "
        f"({m['epochs'] / N * 1e3:.2f} ms an update); one {N}-batch epoch "
        f"{m['one_epoch']:.2f} s ({m['one_epoch'] / N * 1e3:.2f} ms); the same with "
        f"steps_per_execution=50 {m['one_epoch_spe50']:.2f} s: the per-epoch cost is "
        f"{(m['epochs'] - m['one_epoch']) / N * 1e3:.2f} ms an epoch, "
        f"{(m['epochs'] - m['one_epoch']) / m['epochs']:.0%} of the {N}-epoch fit"
    )
    print({k: [round(x, 2) for x in v] for k, v in runs.items()})
    sys.exit(0)

model = build()
history = model.fit(celsius_q, fahrenheit_a, epochs=500, verbose=False)
print("Finished training the model")
print(model.predict(np.array([100.0]), verbose=0))
