"""The TensorFlow guide's first training loop: a scalar linear model ``w * x + b`` fitted with
GradientTape and ``assign_sub``, run eagerly (no tf.function), one full-batch update per "epoch".

Source: https://www.tensorflow.org/guide/basic_training_loops (tensorflow/docs,
site/en/guide/basic_training_loops.ipynb: ``MyModel(tf.Module)``, ``loss``, ``train`` and
``training_loop`` as written there, on 1,000 points around y = 3x + 2). Adapted: 6,000 epochs
instead of 10 so the loop runs ~5-10 s, the progress line printed every 1,000 epochs instead of
every epoch, and no plots. Each epoch keeps the guide's tracking: ``model.w.numpy()``,
``model.b.numpy()`` and the loss recomputed after the update.

Truth, measured without the profiler (``python tests/data/corpus/tf_eager_tiny_steps.py
--bench``): an epoch of the guide's loop as written (eager) against the same loop with
``train`` decorated with ``@tf.function``, in alternating blocks in one process; see
``truth/tf_eager_tiny_steps.json``. A step is a dozen tiny ops on 1,000 floats: nearly all of
it is Python and per-op dispatch.
"""

import sys
import time

import numpy as np
import tensorflow as tf

# The actual line
TRUE_W = 3.0
TRUE_B = 2.0

NUM_EXAMPLES = 1000

# A vector of random x values
x = tf.random.normal(shape=[NUM_EXAMPLES])

# Generate some noise
noise = tf.random.normal(shape=[NUM_EXAMPLES])

# Calculate y
y = x * TRUE_W + TRUE_B + noise


class MyModel(tf.Module):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Initialize the weights to `5.0` and the bias to `0.0`
        # In practice, these should be randomly initialized
        self.w = tf.Variable(5.0)
        self.b = tf.Variable(0.0)

    def __call__(self, x):
        return self.w * x + self.b


# This computes a single loss value for an entire batch
def loss(target_y, predicted_y):
    return tf.reduce_mean(tf.square(target_y - predicted_y))


# Given a callable model, inputs, outputs, and a learning rate...
def train(model, x, y, learning_rate):
    with tf.GradientTape() as t:
        # Trainable variables are automatically tracked by GradientTape
        current_loss = loss(y, model(x))

    # Use GradientTape to calculate the gradients with respect to W and b
    dw, db = t.gradient(current_loss, [model.w, model.b])

    # Subtract the gradient scaled by the learning rate
    model.w.assign_sub(learning_rate * dw)
    model.b.assign_sub(learning_rate * db)


model = MyModel()

# Collect the history of W-values and b-values to plot later
weights = []
biases = []
epochs = range(6000)


# Define a training loop
def report(model, loss):
    return f"W = {model.w.numpy():1.2f}, b = {model.b.numpy():1.2f}, loss={loss:2.5f}"


def training_loop(model, x, y, train_fn=train, epochs=epochs, verbose=True):
    for epoch in epochs:
        # Update the model with the single giant batch
        train_fn(model, x, y, learning_rate=0.1)

        # Track this before I update
        weights.append(model.w.numpy())
        biases.append(model.b.numpy())
        current_loss = loss(y, model(x))

        if verbose and epoch % 1000 == 0:
            print(f"Epoch {epoch:2d}:")
            print("    ", report(model, current_loss))


def bench(blocks=7, per_block=1000):
    """Epochs of the loop as written (eager) against the same loop with a tf.function train."""
    fn_train = tf.function(train)
    variants = {"eager": train, "tf.function": fn_train}
    for f in variants.values():  # warm-up (and the one trace)
        training_loop(model, x, y, train_fn=f, epochs=range(200), verbose=False)
    times = {n: [] for n in variants}
    for _ in range(blocks):
        for n, f in variants.items():
            t = time.perf_counter()
            training_loop(model, x, y, train_fn=f, epochs=range(per_block), verbose=False)
            times[n].append((time.perf_counter() - t) / per_block * 1e6)
    # The update alone, without the guide's per-epoch tracking (two .numpy() and a loss).
    alone = {n: [] for n in variants}
    for _ in range(blocks):
        for n, f in variants.items():
            t = time.perf_counter()
            for _ in range(per_block):
                f(model, x, y, learning_rate=0.1)
            float(model.w.numpy())
            alone[n].append((time.perf_counter() - t) / per_block * 1e6)
    m = {n: float(np.median(v)) for n, v in times.items()}
    a = {n: float(np.median(v)) for n, v in alone.items()}
    print(f"epoch as written (eager train): {m['eager']:,.0f} us; with @tf.function train: "
          f"{m['tf.function']:,.0f} us; {m['eager'] / m['tf.function']:.2f}x "
          f"({m['eager'] - m['tf.function']:,.0f} us less, "
          f"{(m['eager'] - m['tf.function']) / m['eager']:.0%} of the epoch)")
    print(f"train() alone: eager {a['eager']:,.0f} us, tf.function {a['tf.function']:,.0f} us "
          f"({a['eager'] / a['tf.function']:.2f}x); the epoch's tracking (2 .numpy(), a loss): "
          f"{m['eager'] - a['eager']:,.0f} us")
    for n in variants:
        print(n, "epoch:", " ".join(f"{v:,.0f}" for v in times[n]),
              "| train alone:", " ".join(f"{v:,.0f}" for v in alone[n]))


if "--bench" in sys.argv:
    bench()
    sys.exit(0)

current_loss = loss(y, model(x))

print("Starting:")
print("    ", report(model, current_loss))

training_loop(model, x, y)
