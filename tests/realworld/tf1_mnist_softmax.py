# Source: https://github.com/tensorflow/tensorflow/blob/r1.15/tensorflow/examples/tutorials/mnist/mnist_softmax.py
# Adapted: tensorflow -> tensorflow.compat.v1 + disable_eager_execution(); input_data.read_data_sets
#   (download) replaced by synthetic arrays of the same shape/dtype (55000x784 float32 in [0,1], ~20%
#   non-zero; one-hot float32 labels from a fixed linear teacher) behind a next_batch(100) that
#   reshuffles per epoch like the DataSet class; argparse/tf.app.run removed (data_dir unused
#   offline); 8000 steps instead of 1000 so the run lasts >= 8 s. Model, loss,
#   GradientDescentOptimizer(0.5), batch 100, the sess.run(train_step, feed_dict=...) loop and the
#   final accuracy eval as written.
# Truth: step (back-to-back session.run) 825 us median; FULL_TRACE step_stats (calls 6000-6199, copy):
#   kernels sum 490 us per step (op_end_rel_nanos-op_start_rel_nanos; node all_end_rel_nanos sum 568 us, span 646 us),
#   i.e. 59% of the step; an untraced session.run takes 654 us, so ~171 us per step is Python outside
#   session.run (next_batch, the loop) and ~164 us is inside it but not in kernels (feeds, executor).
#   Wall 13.5 s (median of 3 standalone runs: 13.4, 13.5, 15.0); 8000 steps. All figures: manifest.json.
from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()


class SyntheticMnist(object):
  """Stand-in for input_data.read_data_sets(...).train / .test (no download)."""

  def __init__(self, n, seed):
    rng = np.random.RandomState(seed)
    self.images = (rng.rand(n, 784) * (rng.rand(n, 784) < 0.2)).astype(np.float32)
    teacher = np.random.RandomState(1234).randn(784, 10).astype(np.float32)
    self.labels = np.eye(10, dtype=np.float32)[np.argmax(self.images @ teacher, axis=1)]
    self._n, self._pos, self._rng = n, 0, rng

  def next_batch(self, batch_size):
    if self._pos + batch_size > self._n:
      perm = self._rng.permutation(self._n)
      self.images, self.labels, self._pos = self.images[perm], self.labels[perm], 0
    start, self._pos = self._pos, self._pos + batch_size
    return self.images[start:self._pos], self.labels[start:self._pos]


def main(_):
  train, test = SyntheticMnist(55000, 0), SyntheticMnist(10000, 1)

  # Create the model
  x = tf.placeholder(tf.float32, [None, 784])
  W = tf.Variable(tf.zeros([784, 10]))
  b = tf.Variable(tf.zeros([10]))
  y = tf.matmul(x, W) + b

  # Define loss and optimizer
  y_ = tf.placeholder(tf.float32, [None, 10])

  # The raw formulation of cross-entropy,
  #
  #   tf.reduce_mean(-tf.reduce_sum(y_ * tf.log(tf.nn.softmax(y)),
  #                                 reduction_indices=[1]))
  #
  # can be numerically unstable.
  #
  # So here we use tf.nn.softmax_cross_entropy_with_logits on the raw
  # outputs of 'y', and then average across the batch.
  cross_entropy = tf.reduce_mean(
      tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))
  train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)

  sess = tf.InteractiveSession()
  tf.global_variables_initializer().run()
  # Train
  for _ in range(8000):
    batch_xs, batch_ys = train.next_batch(100)
    sess.run(train_step, feed_dict={x: batch_xs, y_: batch_ys})

  # Test trained model
  correct_prediction = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
  accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
  print(sess.run(accuracy, feed_dict={x: test.images,
                                      y_: test.labels}))


if __name__ == '__main__':
  main(None)
