"""A custom training loop under ``tf.distribute.MirroredStrategy``, as TensorFlow's tutorial
"Custom training with tf.distribute.Strategy" writes it
(https://www.tensorflow.org/tutorials/distribute/custom_training; source:
https://github.com/tensorflow/docs/blob/master/site/en/tutorials/distribute/custom_training.ipynb).

Kept as written: the strategy (here one CPU replica), the datasets shuffled, batched to the
global batch size and distributed with ``strategy.experimental_distribute_dataset``, the
tutorial's CNN (Conv2D 32, MaxPooling, Conv2D 64, MaxPooling, Flatten, Dense 64, Dense 10)
built in ``strategy.scope()``, ``compute_loss`` with ``tf.nn.compute_average_loss``,
``train_step``/``test_step`` run by ``strategy.run`` inside the ``@tf.function``
``distributed_train_step``/``distributed_test_step`` (losses reduced with SUM), the epoch loop
with its test pass, a checkpoint every 2 epochs and the per-epoch print. Adapted: synthetic
28x28 images (no download), 3,840 train and 640 test images instead of 60,000 and 10,000, 4
epochs instead of 10, the checkpoints in a temporary directory.

Truth, measured without the profiler (``python
tests/data/corpus/tf_distribute_mirrored_custom_loop.py --bench``, medians of 3 repeats): an
epoch's train steps through the strategy against the same steps as a plain ``@tf.function`` on
a model built without a strategy, the kernels alone (16 steps inside one ``tf.function``), both
datasets iterated alone, and the test pass and the checkpoint against the epoch. Figures: the
truth file (truth/tf_distribute_mirrored_custom_loop.json).
"""

import os
import sys
import tempfile
import time

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
train_images = rng.random((3840, 28, 28, 1), dtype=np.float32)
train_labels = rng.integers(0, 10, 3840).astype(np.int64)
test_images = rng.random((640, 28, 28, 1), dtype=np.float32)
test_labels = rng.integers(0, 10, 640).astype(np.int64)

strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
print(f"Number of devices: {strategy.num_replicas_in_sync}")

BUFFER_SIZE = len(train_images)
BATCH_SIZE_PER_REPLICA = 64
GLOBAL_BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync
EPOCHS = 4

train_dataset = (
    tf.data.Dataset.from_tensor_slices((train_images, train_labels))
    .shuffle(BUFFER_SIZE)
    .batch(GLOBAL_BATCH_SIZE)
)
test_dataset = tf.data.Dataset.from_tensor_slices((test_images, test_labels)).batch(
    GLOBAL_BATCH_SIZE
)
train_dist_dataset = strategy.experimental_distribute_dataset(train_dataset)
test_dist_dataset = strategy.experimental_distribute_dataset(test_dataset)


def create_model():
    regularizer = tf.keras.regularizers.L2(1e-5)
    return tf.keras.Sequential(
        [
            tf.keras.layers.Conv2D(
                32, 3, activation="relu", kernel_regularizer=regularizer, input_shape=(28, 28, 1)
            ),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(64, 3, activation="relu", kernel_regularizer=regularizer),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(64, activation="relu", kernel_regularizer=regularizer),
            tf.keras.layers.Dense(10, kernel_regularizer=regularizer),
        ]
    )


checkpoint_dir = tempfile.mkdtemp()
checkpoint_prefix = os.path.join(checkpoint_dir, "ckpt")

with strategy.scope():
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE
    )

    def compute_loss(labels, predictions, model_losses):
        per_example_loss = loss_object(labels, predictions)
        loss = tf.nn.compute_average_loss(per_example_loss)
        if model_losses:
            loss += tf.nn.scale_regularization_loss(tf.add_n(model_losses))
        return loss

    test_loss = tf.keras.metrics.Mean(name="test_loss")
    train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
    test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="test_accuracy")
    model = create_model()
    optimizer = tf.keras.optimizers.Adam(learning_rate=0.001)
    checkpoint = tf.train.Checkpoint(optimizer=optimizer, model=model)


def train_step(inputs):
    images, labels = inputs
    with tf.GradientTape() as tape:
        predictions = model(images, training=True)
        loss = compute_loss(labels, predictions, model.losses)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))
    train_accuracy.update_state(labels, predictions)
    return loss


def test_step(inputs):
    images, labels = inputs
    predictions = model(images, training=False)
    t_loss = loss_object(labels, predictions)
    test_loss.update_state(t_loss)
    test_accuracy.update_state(labels, predictions)


@tf.function
def distributed_train_step(dataset_inputs):
    per_replica_losses = strategy.run(train_step, args=(dataset_inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)


@tf.function
def distributed_test_step(dataset_inputs):
    return strategy.run(test_step, args=(dataset_inputs,))


def bench():
    """Times without the profiler: see the module's docstring."""
    plain = create_model()
    plain_opt = tf.keras.optimizers.Adam(learning_rate=0.001)
    plain_loss = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE
    )

    @tf.function
    def plain_step(images, labels):
        with tf.GradientTape() as tape:
            predictions = plain(images, training=True)
            loss = tf.nn.compute_average_loss(plain_loss(labels, predictions))
            loss += tf.nn.scale_regularization_loss(tf.add_n(plain.losses))
        gradients = tape.gradient(loss, plain.trainable_variables)
        plain_opt.apply_gradients(zip(gradients, plain.trainable_variables, strict=True))
        return loss

    xb = tf.constant(train_images[:64])
    yb = tf.constant(train_labels[:64])

    @tf.function
    def kernels16():
        for _ in tf.range(16):
            plain_step(xb, yb)

    batches = list(train_dataset)
    for b in batches[:3]:
        distributed_train_step(b)
        plain_step(*b)
    kernels16()
    for b in test_dist_dataset:
        distributed_test_step(b)
    checkpoint.save(checkpoint_prefix)
    runs: dict[str, list[float]] = {
        k: [] for k in ("dist", "plain", "kernels", "test", "ckpt", "it_dist", "it_plain")
    }
    for _ in range(3):
        t = time.perf_counter()
        for x in train_dist_dataset:
            distributed_train_step(x)
        runs["dist"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for x, y in train_dataset:
            plain_step(x, y)
        runs["plain"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(60 // 16 + 1):
            kernels16()
        runs["kernels"].append((time.perf_counter() - t) / 64 * 60)
        t = time.perf_counter()
        for x in test_dist_dataset:
            distributed_test_step(x)
        runs["test"].append(time.perf_counter() - t)
        t = time.perf_counter()
        checkpoint.save(checkpoint_prefix)
        runs["ckpt"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for _batch in train_dist_dataset:
            pass
        runs["it_dist"].append(time.perf_counter() - t)
        t = time.perf_counter()
        for _batch in train_dataset:
            pass
        runs["it_plain"].append(time.perf_counter() - t)
    med = {k: float(np.median(v)) for k, v in runs.items()}
    n = len(batches)
    per_epoch = med["test"] + med["ckpt"] / 2
    print({k: [round(v, 3) for v in vs] for k, vs in runs.items()})
    print(
        f"an epoch of {n} steps: strategy {med['dist']:.2f} s ({med['dist'] / n * 1e3:.1f} ms a "
        f"step), plain tf.function {med['plain']:.2f} s ({med['plain'] / n * 1e3:.1f} ms), "
        f"kernels alone {med['kernels']:.2f} s ({med['kernels'] / med['dist']:.0%} of the "
        f"strategy's); test pass {med['test']:.2f} s, checkpoint {med['ckpt']:.3f} s "
        f"(every 2 epochs: {per_epoch / (med['dist'] + per_epoch):.0%} "
        "of an epoch with them); the distributed dataset iterated alone "
        f"{med['it_dist']:.2f} s an epoch, the plain one {med['it_plain']:.2f} s"
    )


if "--bench" in sys.argv:
    bench()
    sys.exit(0)

for epoch in range(EPOCHS):
    # TRAIN LOOP
    total_loss = 0.0
    num_batches = 0
    for x in train_dist_dataset:
        total_loss += distributed_train_step(x)
        num_batches += 1
    train_loss = total_loss / num_batches

    # TEST LOOP
    for x in test_dist_dataset:
        distributed_test_step(x)

    if epoch % 2 == 0:
        checkpoint.save(checkpoint_prefix)

    template = "Epoch {}, Loss: {}, Accuracy: {}, Test Loss: {}, Test Accuracy: {}"
    print(
        template.format(
            epoch + 1,
            train_loss,
            train_accuracy.result() * 100,
            test_loss.result(),
            test_accuracy.result() * 100,
        )
    )

    test_loss.reset_state()
    train_accuracy.reset_state()
    test_accuracy.reset_state()
