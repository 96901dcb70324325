"""Keras model trained with model.train_on_batch in a hand-written Python loop over numpy batches,
re-shuffling the WHOLE training set (np.random.permutation + fancy indexing) before taking
every single batch.

Modelled on the manual train_on_batch loops of Stack Overflow answers and Keras GAN examples
(e.g. eriklindernoren/Keras-GAN: `idx = np.random.randint(0, X_train.shape[0], batch_size)`;
Stack Overflow "Keras train_on_batch with shuffled mini-batches": `perm =
np.random.permutation(len(X)); X, y = X[perm], y[perm]`), where the shuffle landed inside the
batch loop instead of once per epoch. Synthetic MNIST-shaped data (60000 x 784 float32), MLP
784-128-10, batch 128.
"""
import numpy as np
import keras
from keras import layers

rng = np.random.default_rng(0)
X_train = rng.random((60000, 784), dtype=np.float32)
y_train = rng.integers(0, 10, size=60000).astype("int32")

model = keras.Sequential([
    keras.Input(shape=(784,)),
    layers.Dense(128, activation="relu"),
    layers.Dense(10, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])

batch_size = 128
n_steps = 250
for step in range(n_steps):
    perm = np.random.permutation(len(X_train))
    X_shuf, y_shuf = X_train[perm], y_train[perm]
    x_batch = X_shuf[:batch_size]
    y_batch = y_shuf[:batch_size]
    loss, acc = model.train_on_batch(x_batch, y_batch)
    if step % 50 == 0:
        print("step %d loss %.4f acc %.3f" % (step, loss, acc))
