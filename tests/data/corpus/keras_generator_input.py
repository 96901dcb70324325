"""A Keras model fed by a ``keras.utils.Sequence`` data generator that loads every sample of a
batch from its own .npy file, as in "A detailed example of how to use data generators with
Keras" (Afshine and Shervine Amidi,
https://stanford.edu/~shervine/blog/keras-how-to-generate-data-on-the-fly; the same
``DataGenerator`` is reproduced in many repositories, e.g. https://github.com/SB-Jr/tldr_keras).

Kept as written: the ``DataGenerator`` class (``__len__``, ``__getitem__``, ``on_epoch_end``
shuffling, ``__data_generation`` filling a float64 ``np.empty`` batch with one ``np.load`` per
ID and one-hot labels through ``to_categorical``) and the blog's parameters (dim (32, 32, 32),
batch_size 64, n_classes 6, n_channels 1, shuffle). Adapted: the .npy files are synthetic
float32 volumes written to a temporary directory at start (800 IDs, 100 MB; the blog's
``data/`` folder), the model the blog leaves open is a small MLP over the volume averaged
along one axis (Keras's Conv3D and AveragePooling3D take 0.1-20 s a batch on this CPU), and
``fit_generator(..., use_multiprocessing=True, workers=6)`` is Keras 3's ``fit(generator,
...)`` (fit no longer takes workers; a Sequence then runs in the main thread, inside tf.data's
``from_generator``); validation_data is dropped.

Truth, measured without the profiler (``python tests/data/corpus/keras_generator_input.py
--bench``, this machine, 2 cores, medians of 3 repeats): building one 64-sample batch in
``__getitem__`` (64 np.load + float64 copies + to_categorical) against one ``train_on_batch``
on a ready batch, and an epoch of fit over the Sequence against an epoch of fit over the same
data preloaded in memory (the input cost removed). Figures: see the truth file
(truth/keras_generator_input.json).
"""

import shutil
import sys
import tempfile
import time
from pathlib import Path

import keras
import numpy as np


class DataGenerator(keras.utils.Sequence):
    "Generates data for Keras"

    def __init__(
        self,
        list_IDs,
        labels,
        batch_size=32,
        dim=(32, 32, 32),
        n_channels=1,
        n_classes=10,
        shuffle=True,
    ):
        "Initialization"
        super().__init__()
        self.dim = dim
        self.batch_size = batch_size
        self.labels = labels
        self.list_IDs = list_IDs
        self.n_channels = n_channels
        self.n_classes = n_classes
        self.shuffle = shuffle
        self.on_epoch_end()

    def __len__(self):
        "Denotes the number of batches per epoch"
        return int(np.floor(len(self.list_IDs) / self.batch_size))

    def __getitem__(self, index):
        "Generate one batch of data"
        # Generate indexes of the batch
        indexes = self.indexes[index * self.batch_size : (index + 1) * self.batch_size]

        # Find list of IDs
        list_IDs_temp = [self.list_IDs[k] for k in indexes]

        # Generate data
        X, y = self.__data_generation(list_IDs_temp)

        return X, y

    def on_epoch_end(self):
        "Updates indexes after each epoch"
        self.indexes = np.arange(len(self.list_IDs))
        if self.shuffle == True:  # noqa: E712 (as written)
            np.random.shuffle(self.indexes)

    def __data_generation(self, list_IDs_temp):
        "Generates data containing batch_size samples"  # X : (n_samples, *dim, n_channels)
        # Initialization
        X = np.empty((self.batch_size, *self.dim, self.n_channels))
        y = np.empty((self.batch_size), dtype=int)

        # Generate data
        for i, ID in enumerate(list_IDs_temp):
            # Store sample
            X[i,] = np.load(DATA + "/" + ID + ".npy")

            # Store class
            y[i] = self.labels[ID]

        return X, keras.utils.to_categorical(y, num_classes=self.n_classes)


# The blog's data/ folder: one .npy file per sample (synthetic volumes, written once).
DATA = tempfile.mkdtemp(prefix="generator_data_")
rng = np.random.default_rng(0)
ids = [f"id-{i}" for i in range(800)]
labels = {ID: int(rng.integers(0, 6)) for ID in ids}
for ID in ids:
    np.save(Path(DATA) / f"{ID}.npy", rng.normal(size=(32, 32, 32, 1)).astype("float32"))
partition = {"train": ids}

# Parameters
params = {"dim": (32, 32, 32), "batch_size": 64, "n_classes": 6, "n_channels": 1, "shuffle": True}

# Generators
training_generator = DataGenerator(partition["train"], labels, **params)

# Design model
model = keras.Sequential(
    [
        keras.Input((32, 32, 32, 1)),
        keras.layers.Reshape((32 * 32, 32)),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(6, activation="softmax"),
    ]
)
model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=["accuracy"])

try:
    if "--bench" in sys.argv:
        make, step, gen_epoch, mem_epoch = [], [], [], []
        X0, y0 = training_generator[0]
        model.train_on_batch(X0, y0)
        Xall = np.concatenate([training_generator[i][0] for i in range(len(training_generator))])
        yall = np.concatenate([training_generator[i][1] for i in range(len(training_generator))])
        model.fit(training_generator, epochs=1, verbose=0)
        model.fit(Xall, yall, batch_size=64, epochs=1, verbose=0)
        for _ in range(3):
            for i in range(len(training_generator)):
                t = time.perf_counter()
                X, y = training_generator[i]
                make.append(time.perf_counter() - t)
                t = time.perf_counter()
                model.train_on_batch(X, y)
                step.append(time.perf_counter() - t)
            t = time.perf_counter()
            model.fit(training_generator, epochs=1, verbose=0)
            gen_epoch.append(time.perf_counter() - t)
            t = time.perf_counter()
            model.fit(Xall, yall, batch_size=64, epochs=1, verbose=0)
            mem_epoch.append(time.perf_counter() - t)
        mk, st = np.median(make) * 1e3, np.median(step) * 1e3
        ge, me = np.median(gen_epoch), np.median(mem_epoch)
        n = len(training_generator)
        print(
            f"__getitem__ {mk:.1f} ms a batch, train_on_batch {st:.1f} ms "
            f"(batch making {mk / (mk + st):.0%} of the two)"
        )
        print(
            f"fit epoch ({n} batches): Sequence {ge:.2f} s ({ge / n * 1e3:.1f} ms a batch), "
            f"preloaded arrays {me:.2f} s ({me / n * 1e3:.1f} ms a batch): "
            f"input {(ge - me) / ge:.0%} of the Sequence's epoch"
        )
        print(
            "epochs (Sequence):",
            [round(v, 2) for v in gen_epoch],
            "(arrays):",
            [round(v, 2) for v in mem_epoch],
        )
        sys.exit(0)

    # Train model on dataset
    model.fit(training_generator, epochs=6, verbose=2)
finally:
    shutil.rmtree(DATA, ignore_errors=True)
