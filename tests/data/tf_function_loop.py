"""A TF2 training loop with one tf.function call per step (step auto-detection test)."""

import sys

import numpy as np
import tensorflow as tf

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 400
x = tf.constant(np.linspace(0, 1, 256, dtype=np.float32)[:, None])
y = 3 * x + 1
w = tf.Variable([[0.0]])
b = tf.Variable([0.0])


@tf.function
def train_step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((y - (x @ w + b)) ** 2)
    dw, db = tape.gradient(loss, [w, b])
    w.assign_sub(0.1 * dw)
    b.assign_sub(0.1 * db)
    return loss


for _ in range(steps):
    loss = train_step()
print(f"loss {float(loss):.4f} after {steps} steps")
