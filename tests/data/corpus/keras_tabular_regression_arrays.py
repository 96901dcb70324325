# In the style of TensorFlow's "Basic regression: Predict fuel efficiency" tutorial:
# a small tabular set, a Normalization layer, fit for 100 epochs with validation_split.
import numpy as np
import tensorflow as tf
from tensorflow import keras

rng = np.random.default_rng(0)
n = 392
features = rng.normal(size=(n, 9)).astype("float32") * [1, 50, 100, 1000, 3, 5, 1, 1, 1]
labels = (features @ rng.normal(size=(9,)).astype("float32") + rng.normal(size=n)).astype("float32")
train_features, test_features = features[:314], features[314:]
train_labels, test_labels = labels[:314], labels[314:]

normalizer = keras.layers.Normalization(axis=-1)
normalizer.adapt(train_features)


def build_and_compile_model(norm):
    model = keras.Sequential([
        norm,
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(1),
    ])
    model.compile(loss="mean_absolute_error", optimizer=keras.optimizers.Adam(0.001))
    return model


dnn_model = build_and_compile_model(normalizer)
history = dnn_model.fit(
    train_features, train_labels, validation_split=0.2, verbose=0, epochs=100
)
print("final loss", history.history["loss"][-1], "val", history.history["val_loss"][-1])
print("test", dnn_model.evaluate(test_features, test_labels, verbose=0))
