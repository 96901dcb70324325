# Source: https://www.tensorflow.org/guide/data_performance ("Better performance with the tf.data API"):
#   the "Sequential mapping" baseline, dataset.map(mapped_function) where mapped_function does "some
#   hard pre-processing" in a tf.py_function, with no parallelism, no cache and no prefetch.
# Adapted: the guide's simulated parts are made real: ArtificialDataset -> from_tensor_slices over
#   synthetic uint8 64x64x3 images (3200; 10 classes; each = 0.6*noise + 0.4*a fixed class template);
#   the py_function's time.sleep(0.03) -> real numpy pre-processing (per-image standardisation + 5x5
#   box blur, a few ms of CPU); the simulated training step time.sleep(0.01) -> a cheap Keras model
#   (Flatten -> Dense(10)) trained with fit on batches of 32 for 3 epochs (300 steps).
# Truth: input-bound: step 51.6 ms median; the pipeline alone (no model) takes 37-48 ms per batch (32 sequential
#   py_function calls of ~1.2-1.5 ms each), the model's pure compute 1946 us (3%). Fixed file: 4631 us per step
#   (cached epochs). Pathology cost 47.3 ms per step. Measured per change: num_parallel_calls alone is SLOWER
#   here (47-61 vs 36-40 ms; 2 cores, and py_function runs Python under the GIL), prefetch alone gains
#   nothing (only a ~2 ms model to overlap), cache() is what helps (epochs 2-3: ~3 ms/step). Same losses.
#   Wall 20.9 s (median of 3 standalone runs: 33.1, 20.9, 19.3); 300 steps. All figures: manifest.json.
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
rng = np.random.RandomState(0)
templates = rng.randint(0, 256, size=(10, 64, 64, 3))
labels = rng.randint(0, 10, size=(3200,)).astype(np.int64)
images = (0.6 * rng.randint(0, 256, size=(3200, 64, 64, 3)) + 0.4 * templates[labels]).astype(np.uint8)


def hard_preprocessing(image):
    x = image.numpy().astype(np.float32) / 255.0
    x = (x - x.mean()) / (x.std() + 1e-6)
    acc = np.zeros_like(x)
    for dy in range(-2, 3):
        for dx in range(-2, 3):
            acc += np.roll(np.roll(x, dy, axis=0), dx, axis=1)
    return acc / 25.0


def mapped_function(image, label):
    # Do some hard pre-processing
    image = tf.py_function(hard_preprocessing, [image], tf.float32)
    image.set_shape((64, 64, 3))
    return image, label


dataset = tf.data.Dataset.from_tensor_slices((images, labels))
dataset = dataset.map(mapped_function).batch(32)

model = tf.keras.Sequential([
    tf.keras.Input(shape=(64, 64, 3)),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(10),
])
model.compile(optimizer='adam',
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=['accuracy'])
model.fit(dataset, epochs=3, verbose=2)
