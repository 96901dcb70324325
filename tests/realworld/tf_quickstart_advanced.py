# Source: https://www.tensorflow.org/tutorials/quickstart/advanced ("TensorFlow 2 quickstart for experts")
# Adapted: mnist.load_data() replaced by synthetic uint8 arrays of the same per-sample shape (16000
#   train / 4000 test instead of 60000/10000; ~20% non-zero; labels from a fixed linear teacher), then
#   /255.0 and [..., tf.newaxis].astype("float32") as written; EPOCHS = 1 instead of 5 (500 train steps).
#   MyModel (Conv2D 32x3x3 -> Flatten -> Dense 128 -> Dense 10), Adam, the @tf.function
#   train_step/test_step, shuffle(10000).batch(32) and the loop as written.
# Truth: step 29.5 ms median (noisy: runs 34.8 ms, 29.5 ms, 20.6 ms). Pure compute of train_step (tight tf.range loop)
#   20.0 ms vs 23.6 ms for real steps in the same process: 87% of the step is the compiled ops
#   (Conv2D 32x3x3 -> Flatten -> Dense 128 -> Dense 10 + Adam; not broken down per op); the rest is outside them.
#   Wall 27.0 s (median of 3 standalone runs: 26.5, 27.0, 27.8); 500 steps. All figures: manifest.json.
import numpy as np
import tensorflow as tf

from tensorflow.keras.layers import Dense, Flatten, Conv2D
from tensorflow.keras import Model

tf.keras.utils.set_random_seed(0)
rng = np.random.RandomState(0)
teacher = rng.randn(784, 10)
x_train = (rng.rand(16000, 28, 28) * 255 * (rng.rand(16000, 28, 28) < 0.2)).astype(np.uint8)
x_test = (rng.rand(4000, 28, 28) * 255 * (rng.rand(4000, 28, 28) < 0.2)).astype(np.uint8)
y_train = np.argmax(x_train.reshape(-1, 784) @ teacher, axis=1).astype(np.uint8)
y_test = np.argmax(x_test.reshape(-1, 784) @ teacher, axis=1).astype(np.uint8)
x_train, x_test = x_train / 255.0, x_test / 255.0

# Add a channels dimension
x_train = x_train[..., tf.newaxis].astype("float32")
x_test = x_test[..., tf.newaxis].astype("float32")

train_ds = tf.data.Dataset.from_tensor_slices(
    (x_train, y_train)).shuffle(10000).batch(32)

test_ds = tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(32)

class MyModel(Model):
  def __init__(self):
    super().__init__()
    self.conv1 = Conv2D(32, 3, activation='relu')
    self.flatten = Flatten()
    self.d1 = Dense(128, activation='relu')
    self.d2 = Dense(10)

  def call(self, x):
    x = self.conv1(x)
    x = self.flatten(x)
    x = self.d1(x)
    return self.d2(x)

# Create an instance of the model
model = MyModel()

loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

optimizer = tf.keras.optimizers.Adam()

train_loss = tf.keras.metrics.Mean(name='train_loss')
train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='train_accuracy')

test_loss = tf.keras.metrics.Mean(name='test_loss')
test_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='test_accuracy')

@tf.function
def train_step(images, labels):
  with tf.GradientTape() as tape:
    # training=True is only needed if there are layers with different
    # behavior during training versus inference (e.g. Dropout).
    predictions = model(images, training=True)
    loss = loss_object(labels, predictions)
  gradients = tape.gradient(loss, model.trainable_variables)
  optimizer.apply_gradients(zip(gradients, model.trainable_variables))

  train_loss(loss)
  train_accuracy(labels, predictions)

@tf.function
def test_step(images, labels):
  # training=False is only needed if there are layers with different
  # behavior during training versus inference (e.g. Dropout).
  predictions = model(images, training=False)
  t_loss = loss_object(labels, predictions)

  test_loss(t_loss)
  test_accuracy(labels, predictions)

EPOCHS = 1

for epoch in range(EPOCHS):
  # Reset the metrics at the start of the next epoch
  train_loss.reset_state()
  train_accuracy.reset_state()
  test_loss.reset_state()
  test_accuracy.reset_state()

  for images, labels in train_ds:
    train_step(images, labels)

  for test_images, test_labels in test_ds:
    test_step(test_images, test_labels)

  print(
    f'Epoch {epoch + 1}, '
    f'Loss: {train_loss.result():0.2f}, '
    f'Accuracy: {train_accuracy.result() * 100:0.2f}, '
    f'Test Loss: {test_loss.result():0.2f}, '
    f'Test Accuracy: {test_accuracy.result() * 100:0.2f}'
  )
