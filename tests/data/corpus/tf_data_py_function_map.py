"""A tf.data pipeline whose ``map`` rotates every image by a random angle in Python, through
``tf.py_function``, as the tf.data guide's "Applying arbitrary Python logic" section shows, with
no parallelism and no prefetch, feeding a small Keras model trained by a custom loop.

Sources: https://www.tensorflow.org/guide/data#applying_arbitrary_python_logic (tensorflow/docs,
site/en/guide/data.ipynb: ``random_rotate_image`` with a uniform angle in [-30, 30] degrees and
``tf_random_rotate_image`` wrapping it in ``tf.py_function`` with ``set_shape``, mapped over
128x128 float32 flower images) and https://www.tensorflow.org/guide/keras/writing_a_training_loop_from_scratch
(the ``@tf.function train_step`` with a GradientTape, SGD, SparseCategoricalCrossentropy and
an accuracy metric, ``for step, (x_batch_train, y_batch_train) in enumerate(train_dataset)``).
The shuffle comes before the map (as the tf.data guide shuffles its file list before decoding),
so each batch's 32 rotations run when the loop asks for it.
Adapted to run offline: 960 synthetic 128x128x3 images (5 classes) held in memory instead of the
downloaded, decoded and resized flower photos; the guide's ``scipy.ndimage.rotate`` (scipy is
not a dependency here) is a bilinear rotation about the centre written with numpy, the same
per-image work in kind; a small model (AveragePooling2D(4) -> Flatten -> Dense(64) -> Dense(5));
batches of 32, 3 epochs (90 steps).

Truth, measured without the profiler (``python tests/data/corpus/tf_data_py_function_map.py
--bench``): the loop as written, the dataset iterated alone, and the same training loop on the
rotated batches cached in memory, in alternating blocks; see
``truth/tf_data_py_function_map.json``.
"""

import sys
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import layers

rng = np.random.default_rng(0)
n_images, num_classes = 960, 5
labels = rng.integers(0, num_classes, n_images).astype("int64")
tints = rng.uniform(0.2, 0.8, (num_classes, 3)).astype("float32")
images = (0.5 * rng.random((n_images, 128, 128, 3), dtype="float32") + 0.5 * tints[labels][
    :, None, None, :
]).astype("float32")
images_ds = tf.data.Dataset.from_tensor_slices((images, labels))


def rotate(image, angle):
    """Bilinear rotation of an HxWxC image about its centre (ndimage.rotate, reshape=False)."""
    h, w = image.shape[:2]
    theta = np.deg2rad(angle)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    cy, cx = (h - 1) / 2, (w - 1) / 2
    ys = np.cos(theta) * (yy - cy) - np.sin(theta) * (xx - cx) + cy
    xs = np.sin(theta) * (yy - cy) + np.cos(theta) * (xx - cx) + cx
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    fy, fx = (ys - y0)[..., None], (xs - x0)[..., None]
    out = np.zeros_like(image)
    for dy, dx, wgt in ((0, 0, (1 - fy) * (1 - fx)), (0, 1, (1 - fy) * fx),
                        (1, 0, fy * (1 - fx)), (1, 1, fy * fx)):
        yi, xi = y0 + dy, x0 + dx
        inside = ((yi >= 0) & (yi < h) & (xi >= 0) & (xi < w))[..., None]
        out += np.where(inside, image[yi.clip(0, h - 1), xi.clip(0, w - 1)], 0) * wgt
    return out


def random_rotate_image(image):
    image = rotate(image.numpy(), np.random.uniform(-30, 30))
    return image


def tf_random_rotate_image(image, label):
    im_shape = image.shape
    [image] = tf.py_function(random_rotate_image, [image], [tf.float32])
    image.set_shape(im_shape)
    return image, label


batch_size = 32
rot_ds = images_ds.shuffle(buffer_size=1024).map(tf_random_rotate_image)
train_dataset = rot_ds.batch(batch_size)

model = keras.Sequential(
    [
        keras.Input((128, 128, 3)),
        layers.AveragePooling2D(4),
        layers.Flatten(),
        layers.Dense(64, activation="relu"),
        layers.Dense(num_classes),
    ]
)
optimizer = keras.optimizers.SGD(learning_rate=1e-2)
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


def train(dataset, epochs):
    for epoch in range(epochs):
        print(f"\nStart of epoch {epoch}")
        start_time = time.time()
        for step, (x_batch_train, y_batch_train) in enumerate(dataset):
            loss_value = train_step(x_batch_train, y_batch_train)
            if step % 10 == 0:
                print(f"Training loss (for one batch) at step {step}: {float(loss_value):.4f}")
        train_acc = train_acc_metric.result()
        print(f"Training acc over epoch: {float(train_acc):.4f}")
        train_acc_metric.reset_state()
        print(f"Time taken: {time.time() - start_time:.2f}s")


def bench(blocks=5):
    """Per-step time of: the loop as written; the dataset alone; the loop on cached batches."""
    cached = [b for b in train_dataset]  # rotated once, held in memory
    cached_ds = tf.data.Dataset.from_tensor_slices(
        (np.concatenate([b[0] for b in cached]), np.concatenate([b[1] for b in cached]))
    ).batch(batch_size).prefetch(tf.data.AUTOTUNE)
    n = len(cached)

    def loop(ds):
        for x_batch_train, y_batch_train in ds:
            loss_value = train_step(x_batch_train, y_batch_train)
        float(loss_value)

    def data_alone(ds):
        for _ in ds:
            pass

    runs = {"as written": lambda: loop(train_dataset), "dataset alone": lambda: data_alone(
        train_dataset), "cached + prefetch": lambda: loop(cached_ds)}
    runs["cached + prefetch"]()  # warm-up: the trace
    times = {k: [] for k in runs}
    for _ in range(blocks):
        for k, f in runs.items():
            t = time.perf_counter()
            f()
            times[k].append((time.perf_counter() - t) / n * 1e3)
    m = {k: float(np.median(v)) for k, v in times.items()}
    # One rotation, timed alone (the py_function's body per element).
    one = []
    for i in range(64):
        t = time.perf_counter()
        rotate(images[i], 17.0)
        one.append(time.perf_counter() - t)
    rot_ms = float(np.median(one)) * 1e3
    w = m["as written"]
    print(f"a step as written: {w:,.1f} ms; the dataset alone: {m['dataset alone']:,.1f} ms a "
          f"batch ({m['dataset alone'] / w:.0%} of the step); the same loop on cached batches: "
          f"{m['cached + prefetch']:,.1f} ms ({w / m['cached + prefetch']:.1f}x faster)")
    print(f"one rotation in numpy: {rot_ms:.2f} ms x {batch_size} = {rot_ms * batch_size:,.1f} ms "
          "a batch")
    for k, v in times.items():
        print(k, " ".join(f"{x:,.1f}" for x in v))


if "--bench" in sys.argv:
    bench()
    sys.exit(0)
train(train_dataset, epochs=3)
