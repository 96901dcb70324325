"""A Keras fit over a few epochs (step auto-detection test: one step per batch)."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.uniform(0, 1, (640, 1)).astype("float32")
y = 3 * x + 2
model = tf.keras.Sequential([tf.keras.layers.Dense(1)])
model.compile(loss="mse", optimizer=tf.keras.optimizers.Adam(0.05))
history = model.fit(x, y, batch_size=32, epochs=8, verbose=0)
model.evaluate(x, y, verbose=0)
print(f"loss {history.history['loss'][-1]:.4f}")
