# Source: https://www.tensorflow.org/tutorials/quickstart/beginner ("TensorFlow 2 quickstart for beginners")
# Adapted: mnist.load_data() replaced by synthetic uint8 arrays of the same shapes (60000x28x28 train,
#   10000x28x28 test; ~20% non-zero; labels from a fixed linear teacher), then /255.0 as written;
#   epochs=1 instead of 5 (1875 batches of 32); fit(verbose=2) so it prints one line per epoch.
#   Model, the untrained-model prediction cells, compile, fit, evaluate and the probability_model
#   as written.
# Truth: step (Keras fit batch) 4669 us median over runs (5496 us, 4669 us, 4311 us); in one process, alternated: fit batch
#   2591 us vs pure compute of model.train_step (tight tf.range loop) 1025 us = 37%; the rest of the batch
#   is outside the compiled ops (Keras per-batch machinery; not broken down further).
#   Wall 16.3 s (median of 3 standalone runs: 13.7, 16.3, 18.4); 1875 steps. All figures: manifest.json.
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
rng = np.random.RandomState(0)
teacher = rng.randn(784, 10)
x_train = (rng.rand(60000, 28, 28) * 255 * (rng.rand(60000, 28, 28) < 0.2)).astype(np.uint8)
x_test = (rng.rand(10000, 28, 28) * 255 * (rng.rand(10000, 28, 28) < 0.2)).astype(np.uint8)
y_train = np.argmax(x_train.reshape(-1, 784) @ teacher, axis=1).astype(np.uint8)
y_test = np.argmax(x_test.reshape(-1, 784) @ teacher, axis=1).astype(np.uint8)
x_train, x_test = x_train / 255.0, x_test / 255.0

model = tf.keras.models.Sequential([
  tf.keras.layers.Flatten(input_shape=(28, 28)),
  tf.keras.layers.Dense(128, activation='relu'),
  tf.keras.layers.Dropout(0.2),
  tf.keras.layers.Dense(10)
])

predictions = model(x_train[:1]).numpy()
predictions

tf.nn.softmax(predictions).numpy()

loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

loss_fn(y_train[:1], predictions).numpy()

model.compile(optimizer='adam',
              loss=loss_fn,
              metrics=['accuracy'])

model.fit(x_train, y_train, epochs=1, verbose=2)

model.evaluate(x_test,  y_test, verbose=2)

probability_model = tf.keras.Sequential([
  model,
  tf.keras.layers.Softmax()
])

probability_model(x_test[:5])
