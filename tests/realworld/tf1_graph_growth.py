# Source: Stack Overflow Documentation, tensorflow, "How to debug a memory leak in TensorFlow" ->
#   "Use Graph.finalize() to catch nodes being added to the graph" (mirror:
#   http://www.tastones.com/zh-tw/stackoverflow/tensorflow/how-to-debug-a-memory-leak-in-tensorflow/use_graph.finalize_to_catch_nodes_being_added_to_the_graph/):
#   its training loop `sess.run(train_op); loss_sq = tf.square(loss); sess.run(loss_sq)` WITHOUT the
#   sess.graph.finalize() call, i.e. the bug the answer is about; the example's `loss = ...` is the
#   softmax regression of tensorflow/examples/tutorials/mnist/mnist_softmax.py (r1.15).
# Adapted: tensorflow.compat.v1 + disable_eager_execution(); tf.initialize_all_variables ->
#   global_variables_initializer; the train_op needs data, so synthetic MNIST-shaped batches of 100
#   (55000x784 float32, one-hot labels from a fixed linear teacher) are fed; 1000 iterations instead
#   of 1000000; a progress print every 500 iterations.
# Truth: 2 session.run per iteration; per iteration 21.2 ms (fixed file 1.2 ms): sess.run(loss_sq) on the
#   just-created node costs ~19 ms (graph extended, new executor for the new fetch), train_op+tf.square ~2.1 ms;
#   it grows with the graph (first 100 iterations ~14 ms/iter, last 100 ~23-31 ms/iter). FULL_TRACE step_stats
#   (iterations 900-949): kernels only 532 us (train_op) + 280 us (loss_sq) per iteration, ~4% of it.
#   Pathology cost ~20.0 ms per iteration (10.0 ms per session.run step); same losses as the fixed file.
#   Wall 27.6 s (median of 3 standalone runs: 25.4, 27.6, 33.0); 2000 steps. All figures: manifest.json.
import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()

rng = np.random.RandomState(0)
images = (rng.rand(55000, 784) * (rng.rand(55000, 784) < 0.2)).astype(np.float32)
teacher = np.random.RandomState(1234).randn(784, 10).astype(np.float32)
labels = np.eye(10, dtype=np.float32)[np.argmax(images @ teacher, axis=1)]

x = tf.placeholder(tf.float32, [None, 784])
y_ = tf.placeholder(tf.float32, [None, 10])
W = tf.Variable(tf.zeros([784, 10]))
b = tf.Variable(tf.zeros([10]))
y = tf.matmul(x, W) + b
loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))
train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
init = tf.global_variables_initializer()

with tf.Session() as sess:
    sess.run(init)

    for i in range(1000):
        start = (i * 100) % 55000
        feed = {x: images[start:start + 100], y_: labels[start:start + 100]}
        sess.run(train_op, feed_dict=feed)
        loss_sq = tf.square(loss)  # a new node in the graph on every iteration
        l = sess.run(loss_sq, feed_dict=feed)
        if i % 500 == 0:
            print(i, l, len(sess.graph.get_operations()))
    print('final loss^2', l, 'graph ops', len(sess.graph.get_operations()))
