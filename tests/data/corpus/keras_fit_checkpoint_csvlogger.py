"""Keras ``fit`` with a ``ModelCheckpoint`` every epoch, a ``CSVLogger`` and ``EarlyStopping``:
the model and checkpoint callback of TensorFlow's tutorial "Save and load models"
(https://www.tensorflow.org/tutorials/keras/save_and_load, "Save checkpoints during training";
source: https://github.com/tensorflow/docs/blob/master/site/en/tutorials/keras/save_and_load.ipynb),
with the two other callbacks as the Keras callbacks API documents them
(https://keras.io/api/callbacks/csv_logger/, https://keras.io/api/callbacks/early_stopping/).

Kept as written: ``create_model`` (Dense 512 relu on 784 inputs, Dropout 0.2, Dense 10),
compile(optimizer="adam", SparseCategoricalCrossentropy(from_logits=True),
SparseCategoricalAccuracy), the first 1,000 training and test samples scaled to [0, 1],
``ModelCheckpoint(filepath=checkpoint_path, save_weights_only=True, verbose=1)`` (a save at
every epoch's end) and ``fit(train_images, train_labels, epochs=..., batch_size=32,
validation_data=(test_images, test_labels), callbacks=[...])``. Added: ``CSVLogger`` and
``EarlyStopping(monitor="loss", patience=3)`` (the API page's example) in the callbacks.
Adapted: synthetic pixel values (no download) with labels a fixed linear function of them,
50 epochs (the tutorial's second checkpoint example; its first runs 10), the files in a
temporary directory, fit's progress bar off (verbose=0).

Truth, measured without the profiler (``python tests/data/corpus/keras_fit_checkpoint_csvlogger.py
--bench``, medians of 3 repeats): an epoch of the fit as written, the same fit without the
callbacks, and without the callbacks and the validation data, each on a fresh model after a
warm-up fit; and the checkpoint's ``save_weights`` alone. Figures: the truth file
(truth/keras_fit_checkpoint_csvlogger.json).
"""

import os
import sys
import tempfile
import time

os.environ["KERAS_BACKEND"] = "tensorflow"

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
pixels = rng.integers(0, 256, (2000, 784)).astype(np.float32) / 255.0
labels = np.argmax(pixels @ rng.standard_normal((784, 10)).astype(np.float32), axis=1)
train_images, train_labels = pixels[:1000], labels[:1000]
test_images, test_labels = pixels[1000:], labels[1000:]


# Define a simple sequential model
def create_model():
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Input(shape=(784,)),
            tf.keras.layers.Dense(512, activation="relu"),
            tf.keras.layers.Dropout(0.2),
            tf.keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[tf.keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


workdir = tempfile.mkdtemp()
checkpoint_path = os.path.join(workdir, "training_1", "cp.weights.h5")
os.makedirs(os.path.dirname(checkpoint_path), exist_ok=True)


def callbacks():
    # Create a callback that saves the model's weights
    cp_callback = tf.keras.callbacks.ModelCheckpoint(
        filepath=checkpoint_path, save_weights_only=True, verbose=1
    )
    csv_logger = tf.keras.callbacks.CSVLogger(os.path.join(workdir, "training.log"))
    early_stopping = tf.keras.callbacks.EarlyStopping(monitor="loss", patience=3)
    return [cp_callback, csv_logger, early_stopping]


def bench():
    """Times without the profiler: see the module's docstring."""
    import contextlib
    import io

    variants = {
        "as written": dict(validation_data=(test_images, test_labels), callbacks=True),
        "no callbacks": dict(validation_data=(test_images, test_labels), callbacks=False),
        "no callbacks, no validation": dict(validation_data=None, callbacks=False),
    }
    runs: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(3):
        for name, v in variants.items():
            model = create_model()
            model.fit(train_images, train_labels, epochs=1, batch_size=32, verbose=0)
            with contextlib.redirect_stdout(io.StringIO()):
                t = time.perf_counter()
                hist = model.fit(
                    train_images,
                    train_labels,
                    epochs=10,
                    batch_size=32,
                    validation_data=v["validation_data"],
                    callbacks=callbacks() if v["callbacks"] else None,
                    verbose=0,
                )
                dt = time.perf_counter() - t
            runs[name].append(dt / len(hist.history["loss"]))
    model = create_model()
    saves = []
    for _ in range(20):
        t = time.perf_counter()
        model.save_weights(checkpoint_path)
        saves.append(time.perf_counter() - t)
    med = {k: float(np.median(v)) * 1e3 for k, v in runs.items()}
    print({k: [round(x * 1e3, 1) for x in v] for k, v in runs.items()})
    w, nc, nv = med["as written"], med["no callbacks"], med["no callbacks, no validation"]
    print(
        f"an epoch (32 batches): as written {w:.1f} ms, without the callbacks {nc:.1f} ms, "
        f"without callbacks and validation {nv:.1f} ms: the callbacks {(w - nc) / w:.0%} of "
        f"the epoch, validation {(nc - nv) / w:.0%}, both {(w - nv) / w:.0%}; save_weights "
        f"alone {np.median(saves) * 1e3:.1f} ms"
    )


if "--bench" in sys.argv:
    bench()
    sys.exit(0)

model = create_model()
# Train the model with the new callbacks
history = model.fit(
    train_images,
    train_labels,
    epochs=50,
    batch_size=32,
    validation_data=(test_images, test_labels),
    callbacks=callbacks(),
    verbose=0,
)
print("epochs run:", len(history.history["loss"]), "final loss:", history.history["loss"][-1])
