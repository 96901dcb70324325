"""No growth: tf2_losses_kept_as_tensors.py with its fix, each step's mean loss kept as a
Python float (a 24-byte float and an 8-byte list slot a step).

Truth, measured without the profiler (``python tests/data/memory/truth.py
tests/data/memory/tf2_losses_as_floats.py``): 177 bytes a step (508 -> 520 MB over 3,000
steps, most of it before step 300), 66.9 s under a load average of ~8.
"""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = tf.constant(rng.normal(size=(1024, 16)).astype("float32"))
y = tf.constant(rng.normal(size=(1024, 1)).astype("float32"))
w1 = tf.Variable(rng.normal(scale=0.25, size=(16, 16)).astype("float32"))
w2 = tf.Variable(rng.normal(scale=0.25, size=(16, 1)).astype("float32"))


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        per_example = tf.square(tf.nn.relu(x @ w1) @ w2 - y)
        loss = tf.reduce_mean(per_example)
    g1, g2 = tape.gradient(loss, [w1, w2])
    w1.assign_sub(0.01 * g1)
    w2.assign_sub(0.01 * g2)
    return per_example


history = []
for step in range(3000):  # step
    per_example = train_step(x, y)
    history.append(float(tf.reduce_mean(per_example)))  # a Python float: 24 bytes a step
print(history[-1])
