"""A course's TF1 logistic regression (softmax on 784 features, mini-batches through feed_dict),
on synthetic data in place of MNIST so that it runs offline."""

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
rng = np.random.default_rng(0)
train_x = rng.random((5500, 784), dtype=np.float32)
labels = rng.integers(0, 10, 5500)
train_y = np.eye(10, dtype=np.float32)[labels]

learning_rate = 0.01
training_epochs = 6
batch_size = 100

x = tf.compat.v1.placeholder(tf.float32, [None, 784])
y = tf.compat.v1.placeholder(tf.float32, [None, 10])
W = tf.Variable(tf.zeros([784, 10]))
b = tf.Variable(tf.zeros([10]))
pred = tf.nn.softmax(tf.matmul(x, W) + b)
cost = tf.reduce_mean(-tf.reduce_sum(y * tf.math.log(pred + 1e-9), axis=1))
optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate).minimize(cost)
init = tf.compat.v1.global_variables_initializer()

with tf.compat.v1.Session() as sess:
    sess.run(init)
    for epoch in range(training_epochs):
        avg_cost = 0.0
        total_batch = len(train_x) // batch_size
        for i in range(total_batch):
            batch_xs = train_x[i * batch_size : (i + 1) * batch_size]
            batch_ys = train_y[i * batch_size : (i + 1) * batch_size]
            _, c = sess.run([optimizer, cost], feed_dict={x: batch_xs, y: batch_ys})
            avg_cost += c / total_batch
        if (epoch + 1) % 2 == 0:
            print("Epoch:", "%04d" % (epoch + 1), "cost=", "{:.9f}".format(avg_cost))
    print("Optimization Finished!")
