# Source: https://www.tensorflow.org/tutorials/images/cnn ("Convolutional Neural Network (CNN)", CIFAR-10)
# Adapted: datasets.cifar10.load_data() replaced by synthetic uint8 arrays of the same per-sample shape
#   (9600x32x32x3 train / 2000 test instead of 50000/10000; labels (N,1) uint8; each image =
#   0.6*noise + 0.4*a fixed random template of its class), then /255.0 as written; epochs=1 instead
#   of 10 (300 batches of 32); fit/evaluate verbose=2; plotting removed. The model (Conv 32-64-64,
#   Dense 64-10), Adam, fit with validation_data and evaluate as written.
# Truth: compute-bound: step 16.7 ms median. TF profiler trace (steps 100-149): TF ops busy 22.2 ms of a 25.1 ms
#   traced step (88%), the train_function call 24.3 ms (97%); top kernels Conv2DBackpropFilter 11.5 ms,
#   MaxPoolGrad 6.3, Conv2DBackpropInput 5.8, _FusedConv2D 5.4 ms. Tight-loop model.train_step: 16.5 ms vs
#   17.8 ms real step in the same process = 95% compute. No fix: the kernels are the step.
#   Wall 18.3 s (median of 3 standalone runs: 22.0, 18.3, 17.7); 300 steps. All figures: manifest.json.
import numpy as np
import tensorflow as tf

from tensorflow.keras import datasets, layers, models

tf.keras.utils.set_random_seed(0)
rng = np.random.RandomState(0)
templates = rng.randint(0, 256, size=(10, 32, 32, 3))  # one random "class image" per label


def synthetic_cifar(n):
    """Stand-in for datasets.cifar10.load_data() (no download)."""
    labels = rng.randint(0, 10, size=(n, 1)).astype(np.uint8)
    noise = rng.randint(0, 256, size=(n, 32, 32, 3))
    images = (0.6 * noise + 0.4 * templates[labels[:, 0]]).astype(np.uint8)
    return images, labels


(train_images, train_labels), (test_images, test_labels) = synthetic_cifar(9600), synthetic_cifar(2000)

# Normalize pixel values to be between 0 and 1
train_images, test_images = train_images / 255.0, test_images / 255.0

model = models.Sequential()
model.add(layers.Conv2D(32, (3, 3), activation='relu', input_shape=(32, 32, 3)))
model.add(layers.MaxPooling2D((2, 2)))
model.add(layers.Conv2D(64, (3, 3), activation='relu'))
model.add(layers.MaxPooling2D((2, 2)))
model.add(layers.Conv2D(64, (3, 3), activation='relu'))

model.add(layers.Flatten())
model.add(layers.Dense(64, activation='relu'))
model.add(layers.Dense(10))

model.compile(optimizer='adam',
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=['accuracy'])

history = model.fit(train_images, train_labels, epochs=1, verbose=2,
                    validation_data=(test_images, test_labels))

test_loss, test_acc = model.evaluate(test_images,  test_labels, verbose=2)

print(test_acc)
