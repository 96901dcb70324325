"""TF2: a tf.function given the decayed learning rate as a Python float, so it is traced again
at every step and its cache keeps every concrete function (retracing that fills a function
cache, issue 26; TensorFlow's "retracing" warning). Adapted: a linear model, 80 steps.

Truth, measured without the profiler (``python tests/data/memory/truth.py
tests/data/memory/tf2_retrace_python_lr.py``): 285,957 bytes a step (508 -> 533 MB), 58.6 s
under a load average of ~8 (0.7 s a trace). With the fix (``--fix 'loss = train_step(x, y, lr)'
'loss = train_step(x, y, tf.constant(lr, tf.float32))'``): 154 bytes a step. Profiled with no
options once: 262,144 bytes a step (8% under), the cause train_step's traces (0.93 a step).
"""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = tf.constant(rng.normal(size=(256, 8)).astype("float32"))
y = tf.constant(rng.normal(size=(256, 1)).astype("float32"))
w = tf.Variable(tf.zeros((8, 1)))


@tf.function
def train_step(x, y, lr):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    w.assign_sub(lr * tape.gradient(loss, w))
    return loss


for step in range(80):  # step
    lr = 0.1 * 0.999**step
    loss = train_step(x, y, lr)
print(float(loss))
