"""A Keras ``PyDataset`` that scales and augments its images in numpy in ``__getitem__`` (random
flips and Gaussian noise), as the ``keras.utils.PyDataset`` reference's ``CIFAR10PyDataset``
example (https://keras.io/api/utils/python_utils/#pydataset-class) with the augmentation many
tutorials add to it, feeding a small conv net's ``fit``.

Kept as written: the reference's class shape (``__init__`` calling ``super().__init__(**kwargs)``,
``__len__`` by ``math.ceil``, ``__getitem__`` slicing ``x`` and ``y`` by the batch index) and its
default ``workers=1``. Adapted: CIFAR-10's images are synthetic uint8 arrays of the same shape
(4,096 of them, offline), the file reading and resizing of the reference become the scaling, the
flips and the noise, and the model is one convolution, one pooling and a dense layer.

Keras 3 runs ``__getitem__`` inside tf.data's ``from_generator`` (a ``PyFunc`` on tf.data's
thread), prefetched, beside the steps: the steps wait for part of it and share the cores and the
GIL with the rest.

Truth, measured without the profiler (``python tests/data/corpus/keras_pydataset_augment.py
--bench``, this machine, 2 cores): ms a batch over 2 epochs of fit, as written against the same
batches made once beforehand (a PyDataset returning them from a list) and against workers=2.
Figures: see the truth file (truth/keras_pydataset_augment.json).
"""

import math
import sys
import time

import keras
import numpy as np


class CIFAR10PyDataset(keras.utils.PyDataset):
    def __init__(self, x_set, y_set, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y = x_set, y_set
        self.batch_size = batch_size

    def __len__(self):
        return math.ceil(len(self.x) / self.batch_size)

    def __getitem__(self, idx):
        low = idx * self.batch_size
        high = min(low + self.batch_size, len(self.x))
        batch_x = self.x[low:high].astype("float32") / 255.0
        flip = np.random.rand(len(batch_x)) < 0.5
        batch_x[flip] = batch_x[flip, :, ::-1]
        batch_x = batch_x + np.random.normal(0, 0.01, batch_x.shape).astype("float32")
        return batch_x, self.y[low:high]


rng = np.random.default_rng(0)
x = rng.integers(0, 255, size=(4096, 32, 32, 3), dtype=np.uint8)
y = rng.integers(0, 10, size=(4096,))
train = CIFAR10PyDataset(x, y, batch_size=64)
model = keras.Sequential(
    [
        keras.Input((32, 32, 3)),
        keras.layers.Conv2D(16, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ]
)
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))

if "--bench" in sys.argv:
    batches = [train[i] for i in range(len(train))]

    class Made(keras.utils.PyDataset):
        def __len__(self):
            return len(batches)

        def __getitem__(self, i):
            return batches[i]

    variants = {
        "as written": train,
        "batches made once": Made(),
        "workers=2": CIFAR10PyDataset(x, y, 64, workers=2),
    }
    for v in variants.values():
        model.fit(v, epochs=1, verbose=0)
    ms = {k: [] for k in variants}
    for _ in range(5):
        for k, v in variants.items():
            t = time.perf_counter()
            model.fit(v, epochs=2, verbose=0)
            ms[k].append((time.perf_counter() - t) / (2 * len(train)) * 1e3)
    t = time.perf_counter()
    for i in range(len(train)):
        train[i]
    alone = (time.perf_counter() - t) / len(train) * 1e3
    for k, v in ms.items():
        print(f"{k}: {np.median(v):.1f} ms a batch (repeats {', '.join(f'{a:.1f}' for a in v)})")
    print(f"__getitem__ alone: {alone:.1f} ms a batch")
    sys.exit(0)
model.fit(train, epochs=4, verbose=2)
