# Source: https://www.tensorflow.org/tensorboard/get_started (fixed version of tf2_eager_tensorboard.py; "Using TensorBoard with other methods";
#   notebook https://github.com/tensorflow/tensorboard/blob/master/docs/get_started.ipynb)
# Adapted: mnist.load_data() (download) replaced by smaller synthetic uint8 arrays of the same
#   per-sample shape (20000x28x28 train / 5000 test instead of 60000/10000; ~20% non-zero; labels
#   uint8 from a fixed linear teacher), then /255.0 as written; logs go to a temp dir instead of
#   ./logs; reset_states() -> reset_state() (Keras 3); EPOCHS = 5 as written (5 x 313 train steps).
#   FIX of tf2_eager_tensorboard.py: train_step/test_step decorated with @tf.function (what the
#   advanced quickstart the page follows does). Everything else as in the broken file.
# Truth: tf.function step 6261 us median (broken eager file: 41.3 ms). Pure compute (same ops, tight tf.range
#   loop, in-process alternation): 2348 us, 53% of the step measured alongside it; the rest is outside the
#   compiled ops (iterator, call; not broken down). Epoch 1 identical to the broken file.
#   Wall 19.8 s (median of 3 standalone runs: 15.2, 21.3, 19.8); 1565 steps. All figures: manifest.json.
import datetime
import os
import tempfile

import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
rng = np.random.RandomState(0)
teacher = rng.randn(784, 10)
x_train = (rng.rand(20000, 28, 28) * 255 * (rng.rand(20000, 28, 28) < 0.2)).astype(np.uint8)
x_test = (rng.rand(5000, 28, 28) * 255 * (rng.rand(5000, 28, 28) < 0.2)).astype(np.uint8)
y_train = np.argmax(x_train.reshape(-1, 784) @ teacher, axis=1).astype(np.uint8)
y_test = np.argmax(x_test.reshape(-1, 784) @ teacher, axis=1).astype(np.uint8)
x_train, x_test = x_train / 255.0, x_test / 255.0

def create_model():
  return tf.keras.models.Sequential([
    tf.keras.layers.Flatten(input_shape=(28, 28), name='layers_flatten'),
    tf.keras.layers.Dense(512, activation='relu', name='layers_dense'),
    tf.keras.layers.Dropout(0.2, name='layers_dropout'),
    tf.keras.layers.Dense(10, activation='softmax', name='layers_dense_2')
  ])

train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
test_dataset = tf.data.Dataset.from_tensor_slices((x_test, y_test))

train_dataset = train_dataset.shuffle(60000).batch(64)
test_dataset = test_dataset.batch(64)

loss_object = tf.keras.losses.SparseCategoricalCrossentropy()
optimizer = tf.keras.optimizers.Adam()

# Define our metrics
train_loss = tf.keras.metrics.Mean('train_loss', dtype=tf.float32)
train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy('train_accuracy')
test_loss = tf.keras.metrics.Mean('test_loss', dtype=tf.float32)
test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy('test_accuracy')

@tf.function  # FIX
def train_step(model, optimizer, x_train, y_train):
  with tf.GradientTape() as tape:
    predictions = model(x_train, training=True)
    loss = loss_object(y_train, predictions)
  grads = tape.gradient(loss, model.trainable_variables)
  optimizer.apply_gradients(zip(grads, model.trainable_variables))

  train_loss(loss)
  train_accuracy(y_train, predictions)

@tf.function  # FIX
def test_step(model, x_test, y_test):
  predictions = model(x_test)
  loss = loss_object(y_test, predictions)

  test_loss(loss)
  test_accuracy(y_test, predictions)

logdir = tempfile.mkdtemp()
current_time = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
train_log_dir = os.path.join(logdir, 'gradient_tape', current_time, 'train')
test_log_dir = os.path.join(logdir, 'gradient_tape', current_time, 'test')
train_summary_writer = tf.summary.create_file_writer(train_log_dir)
test_summary_writer = tf.summary.create_file_writer(test_log_dir)

model = create_model() # reset our model

EPOCHS = 5

for epoch in range(EPOCHS):
  for (x_train, y_train) in train_dataset:
    train_step(model, optimizer, x_train, y_train)
  with train_summary_writer.as_default():
    tf.summary.scalar('loss', train_loss.result(), step=epoch)
    tf.summary.scalar('accuracy', train_accuracy.result(), step=epoch)

  for (x_test, y_test) in test_dataset:
    test_step(model, x_test, y_test)
  with test_summary_writer.as_default():
    tf.summary.scalar('loss', test_loss.result(), step=epoch)
    tf.summary.scalar('accuracy', test_accuracy.result(), step=epoch)

  template = 'Epoch {}, Loss: {}, Accuracy: {}, Test Loss: {}, Test Accuracy: {}'
  print (template.format(epoch+1,
                         train_loss.result(),
                         train_accuracy.result()*100,
                         test_loss.result(),
                         test_accuracy.result()*100))

  # Reset metrics every epoch
  train_loss.reset_state()
  test_loss.reset_state()
  train_accuracy.reset_state()
  test_accuracy.reset_state()
