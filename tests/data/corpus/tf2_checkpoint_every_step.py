"""A TF2 custom training loop that writes a ``tf.train.CheckpointManager`` checkpoint every 10
steps, as TensorFlow's "Training checkpoints" guide does
(https://www.tensorflow.org/guide/checkpoint, "Train and checkpoint the model";
source: https://github.com/tensorflow/docs/blob/master/site/en/guide/checkpoint.ipynb).

Kept as written: ``Net`` (one Dense(5)), ``toy_dataset`` (10 inputs, labels ``5x + range(5)``,
repeated, batches of 2), ``train_step``, Adam(0.1), the ``tf.train.Checkpoint`` holding step,
optimizer, net and the dataset iterator, ``CheckpointManager(max_to_keep=3)``, and
``train_and_checkpoint`` saving when ``int(ckpt.step) % 10 == 0``. Adapted: ``train_step`` is
decorated with ``@tf.function`` (the guide runs it eagerly; a compiled step is what loops do
once they leave the notebook), the loop runs 2,000 steps instead of 50 (200 checkpoints), the
checkpoints go to a temporary directory, and the per-save prints are kept for every 100th
checkpoint only.

Truth, measured without the profiler (``python tests/data/corpus/tf2_checkpoint_every_step.py
--bench``, this machine, 2 cores, medians of 3 repeats): the loop's steps timed one by one
(a step without a save against a step that saves), and the whole loop against the same loop
with the save removed. Figures: the truth file (truth/tf2_checkpoint_every_step.json).
"""

import shutil
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf


class Net(tf.keras.Model):
    """A simple linear model."""

    def __init__(self):
        super().__init__()
        self.l1 = tf.keras.layers.Dense(5)

    def call(self, x):
        return self.l1(x)


def toy_dataset():
    inputs = tf.range(10.0)[:, None]
    labels = inputs * 5.0 + tf.range(5.0)[None, :]
    return tf.data.Dataset.from_tensor_slices(dict(x=inputs, y=labels)).repeat().batch(2)


@tf.function
def train_step(net, example, optimizer):
    """Trains `net` on `example` using `optimizer`."""
    with tf.GradientTape() as tape:
        output = net(example["x"])
        loss = tf.reduce_mean(tf.abs(output - example["y"]))
    variables = net.trainable_variables
    gradients = tape.gradient(loss, variables)
    optimizer.apply_gradients(zip(gradients, variables, strict=True))
    return loss


net = Net()
opt = tf.keras.optimizers.Adam(0.1)
dataset = toy_dataset()
iterator = iter(dataset)
ckpt = tf.train.Checkpoint(step=tf.Variable(1), optimizer=opt, net=net, iterator=iterator)
ckpt_dir = tempfile.mkdtemp(prefix="tf_ckpts_")
manager = tf.train.CheckpointManager(ckpt, ckpt_dir, max_to_keep=3)


def train_and_checkpoint(net, manager, steps=2000, save=True, times=None):
    ckpt.restore(manager.latest_checkpoint)
    if manager.latest_checkpoint:
        print(f"Restored from {manager.latest_checkpoint}")
    else:
        print("Initializing from scratch.")

    for _ in range(steps):
        t0 = time.perf_counter()
        example = next(iterator)
        t1 = time.perf_counter()
        loss = train_step(net, example, opt)
        t2 = time.perf_counter()
        ckpt.step.assign_add(1)
        if int(ckpt.step) % 10 == 0 and save:
            t3 = time.perf_counter()
            save_path = manager.save()
            if int(ckpt.step) % 1000 == 0:
                print(f"Saved checkpoint for step {int(ckpt.step)}: {save_path}")
                print(f"loss {loss.numpy():1.2f}")
        else:
            t3 = time.perf_counter()
        if times is not None:
            t4 = time.perf_counter()
            times.append(
                (save and int(ckpt.step) % 10 == 0, t4 - t0, t1 - t0, t2 - t1, t3 - t2, t4 - t3)
            )


try:
    if "--bench" in sys.argv:
        train_and_checkpoint(net, manager, steps=100)  # warm-up: tracing, first saves
        steps, with_save, without = [], [], []
        for _ in range(3):
            times: list = []
            t = time.perf_counter()
            train_and_checkpoint(net, manager, steps=1000, times=times)
            with_save.append(time.perf_counter() - t)
            steps += times
            t = time.perf_counter()
            train_and_checkpoint(net, manager, steps=1000, save=False)
            without.append(time.perf_counter() - t)
        plain = np.median([x[1:] for x in steps if not x[0]], axis=0) * 1e6
        saving = np.median([x[1:] for x in steps if x[0]], axis=0) * 1e6
        w, wo = np.median(with_save), np.median(without)
        print(
            f"step without a save {plain[0]:.0f} us (next(iterator) {plain[1]:.0f}, train_step "
            f"{plain[2]:.0f}, step counter {plain[3]:.0f}); a step that saves {saving[0]:.0f} us "
            f"({saving[0] / plain[0]:.0f}x; manager.save() {saving[4]:.0f}); 1000 steps: "
            f"{w:.2f} s with the saves, {wo:.2f} s without: the saves are {(w - wo) / w:.0%} of "
            "the loop"
        )
        print(
            "1000 steps with saves:",
            [round(v, 2) for v in with_save],
            "without:",
            [round(v, 2) for v in without],
        )
        sys.exit(0)
    train_and_checkpoint(net, manager)
finally:
    shutil.rmtree(ckpt_dir, ignore_errors=True)
