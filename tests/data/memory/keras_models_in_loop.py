"""Keras: a new model built, compiled and fitted at every trial of a loop without
keras.backend.clear_session() (keras-team/keras#2102, where clear_session was added for this;
tensorflow/tensorflow#43702, #61791: a hyper-parameter or k-fold loop). Adapted: a small
regression model, 20 trials of one epoch on 64 samples.

Truth, measured without the profiler (``python tests/data/memory/truth.py
tests/data/memory/keras_models_in_loop.py``; Keras 3.15, TF 2.21 CPU, load average ~8):
5,378,197 bytes a trial (502.6 -> 637.9 MB over 20), 198 s under that load. With the fix
(``--fix 'for trial in range(20):  # step' 'for trial in range(20):  # step
    tf.keras.backend.clear_session()'``): 3,727,099 bytes a
trial (502.7 -> 600.6 MB), 195 s: clear_session removes a third of the growth on these
versions, not all of it (as tensorflow#61791 reports for TF 2.11-2.15). Not profiled in the
tests (a trial takes ~10 s under load).
"""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.normal(size=(64, 10)).astype("float32")
y = rng.normal(size=(64, 1)).astype("float32")

for trial in range(20):  # step
    model = tf.keras.Sequential([tf.keras.Input((10,)), tf.keras.layers.Dense(32, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    model.fit(x, y, epochs=1, batch_size=32, verbose=0)
print(model.count_params())
