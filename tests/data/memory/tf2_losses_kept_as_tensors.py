"""TF2: a training loop that keeps each step's per-example losses as tensors in a list (the
"history of losses kept as tensors" of issue 26; the TF form of PyTorch's `total_loss += loss`):
every step's 1024x1 float32 tensor stays alive. Adapted: a two-layer regression on synthetic
data, 3,000 steps.

Truth, measured without the profiler (``python tests/data/memory/truth.py
tests/data/memory/tf2_losses_kept_as_tensors.py``): 5,033 bytes a step (508 -> 534 MB), 51.5 s
under a load average of ~8. With the fix (``--fix 'history.append(per_example)'
'history.append(float(tf.reduce_mean(per_example)))'``): 182 bytes a step.
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
    history.append(per_example)  # kept as a tensor: 4 KB a step
print(float(tf.reduce_mean(history[-1])))
