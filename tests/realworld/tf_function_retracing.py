# Source: https://github.com/tensorflow/tensorflow/issues/32157 ("[TF 2.0] non-tensor argument to target of
#   tf.function logging slows down training": a @tf.function train_step that logs
#   tf.summary.scalar(..., step=step) and is called with the Python int step; the same pattern as the
#   tf.summary docs example quoted in https://github.com/tensorflow/tensorflow/issues/34481), here in the
#   model/SGD/batch-64 training loop of https://keras.io/guides/writing_a_training_loop_from_scratch/
#   (tf.keras 2020 version, section "Speeding-up your training step with tf.function").
# Adapted: keras.datasets.mnist.load_data() replaced by synthetic uint8 arrays (12800 train / 3200 val
#   instead of 50000/10000, so one epoch = 200 steps; ~20% non-zero; labels from a fixed linear
#   teacher); the summary writer writes to a temp dir; 1 epoch instead of 2.
# Truth: every train_step call retraces (experimental_get_tracing_count() = 200 after 200 steps; fixed: 1):
#   step 110.9 ms median vs 1519 us in the fixed file; pure compute of the step (tight tf.range loop) 733 us,
#   <1% of it: the step is Python tracing/graph building + function instantiation. Pathology cost 108.9 ms
#   per step; epoch-0 loss/accuracies identical to the fixed file.
#   Wall 28.9 s (median of 3 standalone runs: 28.4, 28.9, 32.1); 200 steps. All figures: manifest.json.
import tempfile

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

keras.utils.set_random_seed(0)

inputs = keras.Input(shape=(784,), name="digits")
x1 = layers.Dense(64, activation="relu")(inputs)
x2 = layers.Dense(64, activation="relu")(x1)
outputs = layers.Dense(10, name="predictions")(x2)
model = keras.Model(inputs=inputs, outputs=outputs)

# Instantiate an optimizer.
optimizer = keras.optimizers.SGD(learning_rate=1e-3)
# Instantiate a loss function.
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

# Prepare the training dataset.
batch_size = 64
rng = np.random.RandomState(0)
x_all = (rng.rand(16000, 784) * 255 * (rng.rand(16000, 784) < 0.2)).astype(np.uint8)
y_all = np.argmax((x_all / 255.0) @ rng.randn(784, 10), axis=1).astype(np.uint8)
x_train, y_train = x_all[:-3200], y_all[:-3200]
x_val, y_val = x_all[-3200:], y_all[-3200:]
train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
train_dataset = train_dataset.shuffle(buffer_size=1024).batch(batch_size)

# Prepare the validation dataset.
val_dataset = tf.data.Dataset.from_tensor_slices((x_val, y_val))
val_dataset = val_dataset.batch(64)

# Prepare the metrics.
train_acc_metric = keras.metrics.SparseCategoricalAccuracy()
val_acc_metric = keras.metrics.SparseCategoricalAccuracy()
writer = tf.summary.create_file_writer(tempfile.mkdtemp())


@tf.function
def train_step(x, y, step):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))
    train_acc_metric.update_state(y, logits)
    with writer.as_default():
        tf.summary.scalar("train_loss", loss_value, step=step)
    return loss_value


@tf.function
def test_step(x, y):
    val_logits = model(x, training=False)
    val_acc_metric.update_state(y, val_logits)


epochs = 1
global_step = 0
for epoch in range(epochs):
    print("\nStart of epoch %d" % (epoch,))

    # Iterate over the batches of the dataset.
    for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
        loss_value = train_step(x_batch_train, y_batch_train, global_step)
        global_step += 1

        # Log every 200 batches.
        if step % 200 == 0:
            print("Training loss (for one batch) at step %d: %.4f" % (step, float(loss_value)))

    # Display metrics at the end of each epoch.
    train_acc = train_acc_metric.result()
    print("Training acc over epoch: %.4f" % (float(train_acc),))

    # Reset training metrics at the end of each epoch
    train_acc_metric.reset_state()

    # Run a validation loop at the end of each epoch.
    for x_batch_val, y_batch_val in val_dataset:
        test_step(x_batch_val, y_batch_val)
    val_acc = val_acc_metric.result()
    val_acc_metric.reset_state()
    print("Validation acc: %.4f" % (float(val_acc),))
