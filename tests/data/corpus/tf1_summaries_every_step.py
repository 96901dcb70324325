"""A TF1 training loop in the style of the TensorFlow 1 tutorials' "mnist_with_summaries": a
small network whose every variable and activation gets a histogram summary, all merged, and
the merged summary fetched and written every step. Synthetic data (offline).

Truth, measured without the profiler (``python tests/data/corpus/tf1_summaries_every_step.py
--bench``): the step with the summaries fetched every step against the same step without them
(the histogram kernels are most of it).
"""

import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
rng = np.random.default_rng(0)
x_all = rng.random((2048, 64), dtype=np.float32)
y_all = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 2048)]

x = tf.compat.v1.placeholder(tf.float32, [None, 64])
y = tf.compat.v1.placeholder(tf.float32, [None, 10])


def layer(inp, n_in, n_out, name):
    with tf.compat.v1.name_scope(name):
        w = tf.Variable(tf.random.truncated_normal([n_in, n_out], stddev=0.1))
        b = tf.Variable(tf.constant(0.1, shape=[n_out]))
        pre = tf.matmul(inp, w) + b
        tf.compat.v1.summary.histogram("weights", w)
        tf.compat.v1.summary.histogram("biases", b)
        tf.compat.v1.summary.histogram("pre_activations", pre)
        act = tf.nn.relu(pre)
        tf.compat.v1.summary.histogram("activations", act)
        return act


h1 = layer(x, 64, 256, "layer1")
h2 = layer(h1, 256, 256, "layer2")
logits = tf.matmul(h2, tf.Variable(tf.zeros([256, 10])))
loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
tf.compat.v1.summary.scalar("loss", loss)
train = tf.compat.v1.train.GradientDescentOptimizer(0.05).minimize(loss)
merged = tf.compat.v1.summary.merge_all()

logdir = tempfile.mkdtemp(prefix="summaries-")
with tf.compat.v1.Session() as sess:
    writer = tf.compat.v1.summary.FileWriter(logdir, sess.graph)
    sess.run(tf.compat.v1.global_variables_initializer())
    if "--bench" in sys.argv:
        for fetches, name in (([merged, train], "with summaries"), ([train], "without")):
            times = []
            for i in range(300):
                b = (i * 32) % 2048
                t = time.perf_counter()
                sess.run(fetches, {x: x_all[b : b + 32], y: y_all[b : b + 32]})
                times.append(time.perf_counter() - t)
            print(f"{name}: {1e6 * sorted(times)[150]:.0f} us a step (median)")
        sys.exit(0)
    for i in range(400):
        b = (i * 32) % 2048
        summary, _ = sess.run([merged, train], {x: x_all[b : b + 32], y: y_all[b : b + 32]})
        writer.add_summary(summary, i)
    writer.close()
print("done")
