"""Keras fit on a tf.data pipeline with tf.image augmentation in a serial map: shuffle ->
map(augment: resize-and-rescale, pad, random crop, random flip, random brightness, clip) ->
batch, with no num_parallel_calls and no prefetch, feeding the tutorial's small CNN.

Source: https://www.tensorflow.org/tutorials/images/data_augmentation ("Using tf.image":
``augment`` with ``resize_and_rescale``, ``tf.image.resize_with_crop_or_pad``,
``tf.image.stateless_random_crop``, ``stateless_random_brightness``, ``tf.clip_by_value``, and the
Sequential model of Conv2D/MaxPooling2D blocks); adapted: synthetic uint8 images (tf_flowers is
not downloaded), 64x64 instead of 180x180 so that an epoch fits on a 2-core CPU, the stateful
tf.image.random_* ops in place of the stateless ones with a seed counter, and the pipeline
written as the naive baseline of the tf.data performance guide (a plain ``.map(augment)``, no
prefetch), as Q&A posts about a slow fit do.

Truth, measured without the profiler (``python tf_data_image_augment_map.py --bench``): an
epoch of fit on the pipeline as written, an epoch of fit on the same number of augmented
batches taken once and cached in memory (the model alone), and the pipeline iterated alone
(medians of 5 alternating repeats).
"""

import sys
import time

import numpy as np
import tensorflow as tf
from tensorflow.keras import layers

IMG_SIZE = 64
batch_size = 32
num_classes = 5
AUTOTUNE = tf.data.AUTOTUNE

rng = np.random.default_rng(0)
images = rng.integers(0, 256, size=(1024, 80, 80, 3), dtype=np.uint8)
labels = rng.integers(0, num_classes, size=1024)
train_ds = tf.data.Dataset.from_tensor_slices((images, labels))


def resize_and_rescale(image, label):
    image = tf.cast(image, tf.float32)
    image = tf.image.resize(image, [IMG_SIZE, IMG_SIZE])
    image = image / 255.0
    return image, label


def augment(image, label):
    image, label = resize_and_rescale(image, label)
    # Add 6 pixels of padding
    image = tf.image.resize_with_crop_or_pad(image, IMG_SIZE + 6, IMG_SIZE + 6)
    # Random crop back to the original size
    image = tf.image.random_crop(image, size=[IMG_SIZE, IMG_SIZE, 3])
    image = tf.image.random_flip_left_right(image)
    # Random brightness
    image = tf.image.random_brightness(image, max_delta=0.5)
    image = tf.clip_by_value(image, 0, 1)
    return image, label


train_ds = train_ds.shuffle(1000).map(augment).batch(batch_size)

model = tf.keras.Sequential(
    [
        layers.Input((IMG_SIZE, IMG_SIZE, 3)),
        layers.Conv2D(16, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(),
        layers.Flatten(),
        layers.Dense(128, activation="relu"),
        layers.Dense(num_classes),
    ]
)
model.compile(
    optimizer="adam",
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=["accuracy"],
)

if "--bench" in sys.argv:
    model.fit(train_ds, epochs=1, verbose=0)  # warm-up: traces, first epoch
    cached = (
        tf.data.Dataset.from_tensor_slices(
            tuple(
                np.concatenate(a)
                for a in zip(*[(x.numpy(), y.numpy()) for x, y in train_ds], strict=True)
            )
        )
        .batch(batch_size)
        .cache()
    )
    list(cached)  # fill the cache
    res = {"pipeline": [], "cached": [], "iterate": []}
    for _ in range(5):  # alternating: pipeline, cached, iterate alone
        t0 = time.perf_counter()
        model.fit(train_ds, epochs=1, verbose=0)
        res["pipeline"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        model.fit(cached, epochs=1, verbose=0)
        res["cached"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in train_ds:
            pass
        res["iterate"].append(time.perf_counter() - t0)
    for k, v in res.items():
        v.sort()
        print(f"{k}: {v[2]:.3f} s an epoch of 32 batches ({[round(x, 3) for x in v]})")
    p, c = res["pipeline"][2], res["cached"][2]
    print(f"input share (pipeline - cached) / pipeline: {100 * (p - c) / p:.0f}%")
    sys.exit()

model.fit(train_ds, epochs=int(sys.argv[1]) if len(sys.argv) > 1 else 8)
