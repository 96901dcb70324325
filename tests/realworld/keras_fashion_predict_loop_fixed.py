# Source: https://www.tensorflow.org/tutorials/keras/classification ("Basic classification: Classify images
#   of clothing"), section "Use the trained model": its single-image recipe
#   `img = (np.expand_dims(img,0)); predictions_single = probability_model.predict(img)` applied to
#   every test image in a Python loop (fixed version of keras_fashion_predict_loop.py).
# Adapted: fashion_mnist.load_data() replaced by synthetic uint8 arrays of the same per-sample shape
#   (6000x28x28 train instead of 60000 / 10000 test; each image = 0.6*noise + 0.4*a fixed template of
#   its class), then /255.0 as written; epochs=1 instead of 10; fit/evaluate verbose=2; plotting
#   removed; the loop covers the first 2000 test images (the broken file: 200) so it lasts >= 8 s.
#   FIX of keras_fashion_predict_loop.py, as the Model.predict docstring says: call the model
#   directly, probability_model(img, training=False), instead of predict() per image.
# Truth: 4246 us per loop iteration median (broken file with predict(): 128.1 ms): an eager call of a 2-layer
#   Sequential + .numpy(); the model's own compute is only 30 us (tight loop), the rest is eager Keras
#   call overhead. Same fit results and per-image predictions as the broken file.
#   Wall 14.4 s (median of 3 standalone runs: 14.4, 14.2, 17.1); 2000 steps. All figures: manifest.json.
import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
rng = np.random.RandomState(0)
templates = rng.randint(0, 256, size=(10, 28, 28))


def synthetic_fashion(n):
    """Stand-in for fashion_mnist.load_data() (no download)."""
    labels = rng.randint(0, 10, size=(n,)).astype(np.uint8)
    images = (0.6 * rng.randint(0, 256, size=(n, 28, 28)) + 0.4 * templates[labels]).astype(np.uint8)
    return images, labels


(train_images, train_labels), (test_images, test_labels) = synthetic_fashion(6000), synthetic_fashion(10000)

class_names = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat',
               'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot']

train_images = train_images / 255.0

test_images = test_images / 255.0

model = tf.keras.Sequential([
    tf.keras.layers.Flatten(input_shape=(28, 28)),
    tf.keras.layers.Dense(128, activation='relu'),
    tf.keras.layers.Dense(10)
])

model.compile(optimizer='adam',
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=['accuracy'])

model.fit(train_images, train_labels, epochs=1, verbose=2)

test_loss, test_acc = model.evaluate(test_images,  test_labels, verbose=2)

print('\nTest accuracy:', test_acc)

probability_model = tf.keras.Sequential([model,
                                         tf.keras.layers.Softmax()])

predicted = []
for i in range(2000):
    # Grab an image from the test dataset.
    img = test_images[i]
    # Add the image to a batch where it's the only member.
    img = (np.expand_dims(img,0))
    predictions_single = probability_model(img, training=False).numpy()  # FIX: direct call
    predicted.append(np.argmax(predictions_single[0]))

print('per-image predictions agree with labels:', np.mean(np.array(predicted) == test_labels[:2000]))
