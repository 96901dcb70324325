"""A small MultiWorkerMirroredStrategy training loop, one process per worker (TF_CONFIG).

Environment (test and bench knobs, read by every worker; each acts on its own task index):
  MW_STEPS         steps to run (default 400)
  MW_SLOW_WORKER   the task index that sleeps MW_SLOW_MS milliseconds after every step
  MW_SLOW_MS       the injected straggler's delay per step
  MW_RAISE_WORKER  the task index that raises RuntimeError at step MW_RAISE_AT
  MW_RAISE_AT      the step at which it raises (default 50)
  MW_HANG_WORKER   the task index that stops (sleeps for good) at step MW_HANG_AT
  MW_HANG_AT       the step at which it hangs (default 50)
  MW_PROFILER_PORT start TensorFlow's profiler server on this port + the task index
  MW_KERAS         1: train a small Keras model (Dense layers) instead of the linear model
"""

import json
import os
import time

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
# Without TF_CONFIG: one worker, task 0.
index = json.loads(os.environ.get("TF_CONFIG") or '{"task": {"index": 0}}')["task"]["index"]
steps = int(os.environ.get("MW_STEPS", "400"))
slow_s = (
    float(os.environ.get("MW_SLOW_MS", "0")) / 1e3
    if os.environ.get("MW_SLOW_WORKER") == str(index)
    else 0.0
)
raise_at = (
    int(os.environ.get("MW_RAISE_AT", "50"))
    if os.environ.get("MW_RAISE_WORKER") == str(index)
    else -1
)


hang_at = (
    int(os.environ.get("MW_HANG_AT", "50"))
    if os.environ.get("MW_HANG_WORKER") == str(index)
    else -1
)


def profiler_server():
    # Started once the step is built, as a job does before it trains.
    if os.environ.get("MW_PROFILER_PORT"):
        tf.profiler.experimental.server.start(int(os.environ["MW_PROFILER_PORT"]) + index)


rng = np.random.default_rng(0)
x = rng.random((4096, 32), dtype=np.float32)
y = x.sum(axis=1, keepdims=True).astype(np.float32)
ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64)

with strategy.scope():
    if os.environ.get("MW_KERAS") == "1":
        # Keras 3's fit does not take a MultiWorkerMirroredStrategy's batches (TensorFlow 2.21:
        # "Attempt to convert a value (PerReplica...)", the TF tutorial's own main.py included),
        # so a Keras model trains in a custom loop, as the TF custom-training-loop tutorial does.
        model = tf.keras.Sequential(
            [tf.keras.Input((32,)), tf.keras.layers.Dense(16, "relu"), tf.keras.layers.Dense(1)]
        )
        variables = model.trainable_variables

        def predict(xb):
            return model(xb, training=True)

    else:
        w = tf.Variable(tf.zeros((32, 1)))
        variables = [w]

        def predict(xb):
            return xb @ w

    opt = tf.keras.optimizers.SGD(0.01)
it = iter(strategy.experimental_distribute_dataset(ds))


@tf.function
def train_step(iterator):
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((predict(xb) - yb) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
        return loss

    xb, yb = next(iterator)
    return strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(step, (xb, yb)), None)


profiler_server()
for i in range(steps):
    if i == raise_at:
        raise RuntimeError(f"worker {index} failed at step {i}")
    if i == hang_at:
        time.sleep(10**6)
    loss = train_step(it)
    if slow_s:
        time.sleep(slow_s)
print(f"worker {index}: loss {float(loss):.6f}")
