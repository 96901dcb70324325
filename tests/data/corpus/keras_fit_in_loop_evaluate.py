# Q&A pattern: calling model.fit(epochs=1) inside a Python loop, evaluating after each epoch
import os, time
import numpy as np
import tensorflow as tf
import keras
from keras import layers

rng = np.random.default_rng(0)
x_train = rng.normal(size=(1024, 32)).astype("float32")
y_train = (x_train[:, :4].sum(axis=1) > 0).astype("float32")
x_val = rng.normal(size=(512, 32)).astype("float32")
y_val = (x_val[:, :4].sum(axis=1) > 0).astype("float32")

model = keras.Sequential([
    keras.Input(shape=(32,)),
    layers.Dense(64, activation="relu"),
    layers.Dense(64, activation="relu"),
    layers.Dense(1, activation="sigmoid"),
])
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])

EPOCHS = 60
t0 = time.perf_counter()
for epoch in range(EPOCHS):
    hist = model.fit(x_train, y_train, epochs=1, batch_size=32, verbose=0)
    val_loss, val_acc = model.evaluate(x_val, y_val, verbose=0)
    print(f"epoch {epoch+1}: loss={hist.history['loss'][0]:.4f} val_loss={val_loss:.4f} val_acc={val_acc:.3f}")
print(f"LOOP_TIME {time.perf_counter() - t0:.3f}")
