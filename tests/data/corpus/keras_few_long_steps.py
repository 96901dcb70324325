"""The TensorFlow image-classification tutorial's CNN (flowers, 180x180x3 images, three
Conv2D/MaxPooling2D blocks, Dense(128), batches of 32) trained with Keras ``fit``: a few steps,
each a large convolution workload.

Source: https://www.tensorflow.org/tutorials/images/classification (tensorflow/docs,
site/en/tutorials/images/classification.ipynb: the ``Sequential`` model with ``Rescaling(1./255)``
and Conv2D 16/32/64, compiled with adam and SparseCategoricalCrossentropy(from_logits=True),
trained with ``model.fit(train_ds, validation_data=val_ds, epochs=...)`` on a dataset that is
``cache().shuffle(1000).prefetch(AUTOTUNE)``). Adapted to run offline in ~10-20 s: 288 synthetic
uint8 images of the same shape (5 classes, each class a colour tint over noise) instead of the
3,670 downloaded flower photos, 64 validation images, 2 epochs of 9 batches (18 steps of
~0.5-1 s) instead of 10 epochs of 92.

Truth, measured without the profiler (``python tests/data/corpus/keras_few_long_steps.py
--bench``): see ``truth/keras_few_long_steps.json``. Each step's time is taken by a callback
(``on_train_batch_begin``/``end``); the step's fixed (per-call) part is measured by the same
model on batches of 8 and 32 in alternating blocks (a + b * n), and its arithmetic is counted
from the layer shapes.
"""

import sys
import time

import numpy as np
import tensorflow as tf
from tensorflow.keras import layers
from tensorflow.keras.models import Sequential

batch_size = 32
img_height = 180
img_width = 180
num_classes = 5

rng = np.random.default_rng(123)


def synthetic_images(n):
    labels = rng.integers(0, num_classes, n)
    tint = np.array(
        [[200, 60, 60], [60, 200, 60], [60, 60, 200], [200, 200, 60], [200, 60, 200]]
    )
    noise = rng.integers(0, 256, (n, img_height, img_width, 3))
    images = (0.5 * noise + 0.5 * tint[labels][:, None, None, :]).astype("uint8")
    return images, labels.astype("int32")


train_x, train_y = synthetic_images(288)
val_x, val_y = synthetic_images(64)
train_ds = tf.data.Dataset.from_tensor_slices((train_x, train_y)).batch(batch_size)
val_ds = tf.data.Dataset.from_tensor_slices((val_x, val_y)).batch(batch_size)

AUTOTUNE = tf.data.AUTOTUNE
train_ds = train_ds.cache().shuffle(1000).prefetch(buffer_size=AUTOTUNE)
val_ds = val_ds.cache().prefetch(buffer_size=AUTOTUNE)


def make_model():
    model = Sequential(
        [
            layers.Input((img_height, img_width, 3)),
            layers.Rescaling(1.0 / 255),
            layers.Conv2D(16, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(64, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(128, activation="relu"),
            layers.Dense(num_classes),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def step_flops(batch):
    """Multiply-adds x 2 of the forward pass, x 3 for forward + backward (a standard estimate)."""
    h, w, f = img_height, img_width, 0
    c_in = 3
    for c_out in (16, 32, 64):
        f += 2 * h * w * 9 * c_in * c_out
        h, w, c_in = h // 2, w // 2, c_out
    f += 2 * h * w * c_in * 128 + 2 * 128 * num_classes
    return 3 * f * batch


class StepTimes(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.times = []

    def on_train_batch_begin(self, batch, logs=None):
        self.t = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.times.append(time.perf_counter() - self.t)


def bench(repeats=5):
    # (a) The script's fit, its steps timed by a callback (the first, traced, step apart).
    model = make_model()
    cb = StepTimes()
    t = time.perf_counter()
    model.fit(train_ds, validation_data=val_ds, epochs=2, verbose=0, callbacks=[cb])
    wall = time.perf_counter() - t
    steps = cb.times[1:]
    med = float(np.median(steps))
    gflop = step_flops(batch_size) / 1e9
    print(f"fit: {wall:.1f} s for 2 epochs; a step (batch of 32) {med * 1e3:,.0f} ms median "
          f"(p10-p90 {np.percentile(steps, 10) * 1e3:,.0f}-{np.percentile(steps, 90) * 1e3:,.0f});"
          f" {gflop:.1f} GFLOP a step, {gflop / med:.1f} GFLOP/s; steps in fit "
          f"{sum(cb.times):.1f} s = {sum(cb.times) / wall:.0%} of fit's wall time")
    # (b) Fixed vs per-sample: train_on_batch on 8 and 32 images, alternating blocks.
    x8, y8 = tf.constant(train_x[:8]), tf.constant(train_y[:8])
    x32, y32 = tf.constant(train_x[:32]), tf.constant(train_y[:32])
    model.train_on_batch(x8, y8)
    model.train_on_batch(x32, y32)
    t8, t32 = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(4):
            model.train_on_batch(x8, y8)
        t8.append((time.perf_counter() - t) / 4)
        t = time.perf_counter()
        model.train_on_batch(x32, y32)
        t32.append(time.perf_counter() - t)
    m8, m32 = float(np.median(t8)), float(np.median(t32))
    a = m8 - (m32 - m8) / 24 * 8
    print(f"train_on_batch: 8 images {m8 * 1e3:,.0f} ms, 32 images {m32 * 1e3:,.0f} ms "
          f"({m32 / m8:.2f}x for 4x the images); fixed part a = {a * 1e3:,.1f} ms "
          f"({a / m32:.0%} of a 32-image step)")
    print("steps ms:", " ".join(f"{s * 1e3:,.0f}" for s in cb.times))
    print("8:", " ".join(f"{s * 1e3:,.0f}" for s in t8), "| 32:",
          " ".join(f"{s * 1e3:,.0f}" for s in t32))


if "--bench" in sys.argv:
    bench()
    sys.exit(0)

model = make_model()
model.summary()
epochs = 2
history = model.fit(train_ds, validation_data=val_ds, epochs=epochs)
