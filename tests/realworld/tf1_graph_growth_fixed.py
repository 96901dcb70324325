# Source: Stack Overflow Documentation, tensorflow, "How to debug a memory leak in TensorFlow" ->
#   "Use Graph.finalize() to catch nodes being added to the graph" (mirror:
#   http://www.tastones.com/zh-tw/stackoverflow/tensorflow/how-to-debug-a-memory-leak-in-tensorflow/use_graph.finalize_to_catch_nodes_being_added_to_the_graph/):
#   FIXED version of tf1_graph_growth.py, as the answer prescribes: loss_sq = tf.square(loss) is built
#   once before the loop and sess.graph.finalize() makes the graph read-only; the example's
#   `loss = ...` is the softmax regression of tensorflow/examples/tutorials/mnist/mnist_softmax.py.
# Adapted: tensorflow.compat.v1 + disable_eager_execution(); tf.initialize_all_variables ->
#   global_variables_initializer; the train_op needs data, so synthetic MNIST-shaped batches of 100
#   (55000x784 float32, one-hot labels from a fixed linear teacher) are fed; 4000 iterations instead
#   of 1000000 (the broken file: 1000; this one needs 4000 to last >= 8 s); a progress print every
#   500 iterations.
# Truth: 2 session.run per iteration, 570 us per session.run step median, flat over 4000 iterations (graph stays
#   104 ops). FULL_TRACE step_stats (iterations 900-949): kernels 341 us (train_op) and 216 us (loss_sq) per call;
#   untraced calls 592 us / 498 us. Same loss^2 values as tf1_graph_growth.py at iterations 0 and 500.
#   Wall 11.4 s (median of 3 standalone runs: 9.9, 11.4, 16.0); 8000 steps. All figures: manifest.json.
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
loss_sq = tf.square(loss)  # FIX: built once, before the loop

with tf.Session() as sess:
    sess.run(init)
    sess.graph.finalize()  # FIX: Graph is read-only after this statement.

    for i in range(4000):
        start = (i * 100) % 55000
        feed = {x: images[start:start + 100], y_: labels[start:start + 100]}
        sess.run(train_op, feed_dict=feed)
        l = sess.run(loss_sq, feed_dict=feed)
        if i % 500 == 0:
            print(i, l, len(sess.graph.get_operations()))
    print('final loss^2', l, 'graph ops', len(sess.graph.get_operations()))
