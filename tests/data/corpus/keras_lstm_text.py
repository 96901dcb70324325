"""A 2-layer bidirectional LSTM sentiment classifier on IMDB-shaped token sequences, trained with
fit: the keras-io example "Bidirectional LSTM on IMDB" (fchollet,
https://keras.io/examples/nlp/bidirectional_lstm_imdb/; source:
https://github.com/keras-team/keras-io/blob/master/examples/nlp/bidirectional_lstm_imdb.py).

Kept as written: max_features 20,000, maxlen 200, the model (Input (None,) int32 ->
Embedding(20000, 128) -> Bidirectional(LSTM(64, return_sequences=True)) ->
Bidirectional(LSTM(64)) -> Dense(1, sigmoid)), compile(adam, binary_crossentropy, accuracy),
fit(batch_size=32, epochs=2, validation_data=...). Adapted: ``imdb.load_data`` (a download) is
replaced by synthetic reviews of the same shape after ``pad_sequences(maxlen=200)`` (int32
token ids below 20,000, zero-padded at the front to lengths drawn from 30-200, labels 0/1),
512 training and 128 validation reviews instead of 25,000 each (16 batches an epoch), and
model.summary() and the progress bar are off.

Truth, measured without the profiler (``python tests/data/corpus/keras_lstm_text.py --bench``,
this machine, 2 cores, medians of 3 repeats): a training batch of this model, against the same
model with LSTM(8) (1/64 of the recurrent arithmetic: what the step costs beyond the LSTM's
matmuls), and against this model compiled with jit_compile=True (XLA); and the epoch boundaries of
a 3-epoch fit with the validation data (one-off trace against the steady validation cost).
Figures: the truth file
(truth/keras_lstm_text.json).
"""

import sys
import time

import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

max_features = 20000  # Only consider the top 20k words
maxlen = 200  # Only consider the first 200 words of each movie review


def build(units=64, jit_compile="auto"):
    # Input for variable-length sequences of integers
    inputs = keras.Input(shape=(None,), dtype="int32")
    # Embed each integer in a 128-dimensional vector
    x = layers.Embedding(max_features, 128)(inputs)
    # Add 2 bidirectional LSTMs
    x = layers.Bidirectional(layers.LSTM(units, return_sequences=True))(x)
    x = layers.Bidirectional(layers.LSTM(units))(x)
    # Add a classifier
    outputs = layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer="adam",
        loss="binary_crossentropy",
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    return model


def reviews(n, rng):
    """Token-id reviews as pad_sequences(maxlen=200) leaves them: zeros, then the words."""
    x = np.zeros((n, maxlen), dtype="int32")
    for i, length in enumerate(rng.integers(30, maxlen + 1, n)):
        x[i, maxlen - length :] = rng.integers(1, max_features, length)
    return x, rng.integers(0, 2, n)


rng = np.random.default_rng(0)
x_train, y_train = reviews(512, rng)
x_val, y_val = reviews(128, rng)
print(len(x_train), "Training sequences")
print(len(x_val), "Validation sequences")

if "--bench" in sys.argv:
    xs, ys = x_train[:320], y_train[:320]  # 10 batches
    variants = {"lstm64": build(), "lstm8": build(units=8), "lstm64_xla": build(jit_compile=True)}
    runs: dict[str, list[float]] = {k: [] for k in variants}
    for m in variants.values():
        m.fit(xs, ys, batch_size=32, epochs=1, verbose=0)
    for _ in range(3):
        for name, m in variants.items():
            t = time.perf_counter()
            m.fit(xs, ys, batch_size=32, epochs=1, verbose=0)
            runs[name].append((time.perf_counter() - t) / 10)
    ms = {k: float(np.median(v)) * 1e3 for k, v in runs.items()}
    print(
        f"a batch: LSTM(64) {ms['lstm64']:.1f} ms, LSTM(8) {ms['lstm8']:.1f} ms "
        f"({ms['lstm8'] / ms['lstm64']:.0%} of it), LSTM(64) with XLA "
        f"{ms['lstm64_xla']:.1f} ms ({ms['lstm64'] / ms['lstm64_xla']:.1f}x faster)"
    )
    print({k: [round(v * 1e3, 1) for v in vs] for k, vs in runs.items()})

    # The epoch boundary: validation_data as written, 3 epochs of 10 batches; the time from
    # one batch's end to the next batch's end, the epochs' first batches against the others.
    class Gaps(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            gaps.append((batch, time.perf_counter()))

    gaps: list = []
    m = build()
    m.fit(
        xs,
        ys,
        batch_size=32,
        epochs=3,
        validation_data=(x_val, y_val),
        verbose=0,
        callbacks=[Gaps()],
    )
    d = [(b, t - gaps[i - 1][1]) for i, (b, t) in enumerate(gaps) if i]
    first = [round(dt, 2) for b, dt in d if b == 0]
    rest = float(np.median([dt for b, dt in d if b]))
    print(
        f"epoch boundaries (validation of {len(x_val)} reviews + the epoch's first batch): "
        f"{first} s, against {rest:.2f} s a batch: the first holds the evaluation function's "
        f"one-off trace; the second is the steady cost, {first[-1] - rest:.2f} s an epoch "
        f"({(first[-1] - rest) / (first[-1] + 15 * rest):.0%} of a 16-batch epoch)"
    )
    sys.exit(0)

model = build()
model.fit(x_train, y_train, batch_size=32, epochs=2, validation_data=(x_val, y_val), verbose=0)
print("val accuracy", model.evaluate(x_val, y_val, verbose=0)[1])
