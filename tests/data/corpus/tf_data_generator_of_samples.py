# Modelled on the TensorFlow guides "tf.data: Build TensorFlow input pipelines"
# (https://www.tensorflow.org/guide/data, "Consuming Python generators": Dataset.from_generator
# with output_signature) and "Writing a training loop from scratch"
# (https://www.tensorflow.org/guide/keras/writing_a_training_loop_from_scratch: GradientTape loop,
# @tf.function train_step, MLP on MNIST). The per-sample numpy preprocessing in the generator is
# what custom-data tutorials do (scale, standardise, random flip, add channel axis).
# MNIST replaced by random uint8 images of the same shape; 20000 training samples.
import time
import numpy as np
import tensorflow as tf
import keras
from keras import layers

rng = np.random.default_rng(0)
x_train = rng.integers(0, 256, size=(20000, 28, 28), dtype=np.uint8)
y_train = rng.integers(0, 10, size=(20000,)).astype(np.int64)
MEAN, STD = 0.1307, 0.3081


def sample_generator():
    for i in range(len(x_train)):
        img = x_train[i].astype(np.float32) / 255.0
        img = (img - MEAN) / STD
        if np.random.rand() < 0.5:
            img = np.fliplr(img)
        img = np.expand_dims(img, -1)
        yield img, y_train[i]


train_dataset = tf.data.Dataset.from_generator(
    sample_generator,
    output_signature=(tf.TensorSpec(shape=(28, 28, 1), dtype=tf.float32),
                      tf.TensorSpec(shape=(), dtype=tf.int64)))
train_dataset = train_dataset.shuffle(1000).batch(32)

inputs = keras.Input(shape=(28, 28, 1), name="digits")
x = layers.Flatten()(inputs)
x = layers.Dense(64, activation="relu")(x)
x = layers.Dense(64, activation="relu")(x)
outputs = layers.Dense(10, name="predictions")(x)
model = keras.Model(inputs=inputs, outputs=outputs)

optimizer = keras.optimizers.SGD(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_acc_metric = keras.metrics.SparseCategoricalAccuracy()


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))
    train_acc_metric.update_state(y, logits)
    return loss_value


epochs = 3
for epoch in range(epochs):
    print("\nStart of epoch %d" % (epoch,))
    start_time = time.time()

    # Iterate over the batches of the dataset.
    for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
        loss_value = train_step(x_batch_train, y_batch_train)

        # Log every 200 batches.
        if step % 200 == 0:
            print("Training loss (for one batch) at step %d: %.4f"
                  % (step, float(loss_value)))
            print("Seen so far: %d samples" % ((step + 1) * 32))

    # Display metrics at the end of each epoch.
    train_acc = train_acc_metric.result()
    print("Training acc over epoch: %.4f" % (float(train_acc),))

    # Reset training metrics at the end of each epoch
    train_acc_metric.reset_state()
    print("Time taken: %.2fs" % (time.time() - start_time))
