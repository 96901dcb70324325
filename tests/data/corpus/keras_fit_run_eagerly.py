"""A Keras classifier compiled with run_eagerly=True, as debugging advice on Q&A sites suggests
and scripts then keep (synthetic data, offline).

Truth, measured without the profiler (``python tests/data/corpus/keras_fit_run_eagerly.py
--bench``): an epoch's time with run_eagerly=True against the same model compiled without it.
"""

import sys
import time

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 32)).astype("float32")
y = (x[:, 0] > 0).astype("float32")


def model(eager):
    m = tf.keras.Sequential(
        [tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"),
         tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(1)]
    )
    m.compile(optimizer="adam", loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
              run_eagerly=eager)
    return m


if "--bench" in sys.argv:
    for eager in (True, False):
        m = model(eager)
        m.fit(x, y, batch_size=32, epochs=1, verbose=0)
        t = time.perf_counter()
        m.fit(x, y, batch_size=32, epochs=1, verbose=0)
        print(f"run_eagerly={eager}: {time.perf_counter() - t:.2f} s an epoch of 64 batches")
    sys.exit(0)
m = model(True)
m.fit(x, y, batch_size=32, epochs=2, verbose=0)
print("loss", float(m.evaluate(x, y, verbose=0)))
