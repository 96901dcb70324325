"""TF1: a variable assigned with a new op every step (tensorflow/tensorflow#4151, #2311; the
same mistake in tensorflow-yolov3#42 and Faster-RCNN_TF#16): `sess.run(w.assign(value))` in the
loop adds ops to the graph each iteration, and the session and graph keep them. Adapted: a
128x64 weight "from a parameter server" (here: its own value, nudged), 120 iterations.

Truth, measured without the profiler (``python tests/data/memory/truth.py
tests/data/memory/tf1_assign_in_loop.py``; TF 2.21 CPU, load average ~8 on 2 cores): 319,247
bytes an iteration (509 -> 556 MB over 120), 29.5 s. With the fix, a placeholder and its assign
op built once before the loop (``--fix 'sess = tf.compat.v1.Session()' 'new_w =
tf.compat.v1.placeholder(tf.float32, (128, 64)); assign_w = w.assign(new_w); sess =
tf.compat.v1.Session()' --fix 'sess.run(w.assign(new_weights))' 'sess.run(assign_w, {new_w:
new_weights})'``): 2,156 bytes an iteration. Profiled with no options once: 106.9 KB a step,
the profiler's step being one session.run (three an iteration: 320,900 bytes an iteration).
"""

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
rng = np.random.default_rng(0)
x_data = rng.normal(size=(256, 128)).astype("float32")
y_data = rng.normal(size=(256, 64)).astype("float32")

x = tf.compat.v1.placeholder(tf.float32, (None, 128))
y = tf.compat.v1.placeholder(tf.float32, (None, 64))
w = tf.Variable(tf.zeros((128, 64)))
loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)

sess = tf.compat.v1.Session()
sess.run(tf.compat.v1.global_variables_initializer())
for step in range(120):  # step
    # weights from a parameter server (here: the same weights, nudged)
    new_weights = sess.run(w) + rng.normal(scale=1e-3, size=(128, 64)).astype("float32")
    sess.run(w.assign(new_weights))
    _, l = sess.run([train, loss], feed_dict={x: x_data, y: y_data})
print("loss", l)
