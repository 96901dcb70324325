# TF2 custom training loop; the @tf.function train step is (accidentally) defined inside the epoch loop
import os, time
import numpy as np
import tensorflow as tf
import keras
from keras import layers

rng = np.random.default_rng(2)
x = rng.normal(size=(2048, 20)).astype("float32")
y = (x @ rng.normal(size=(20, 1)) + 0.1 * rng.normal(size=(2048, 1))).astype("float32")
ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048).batch(64)

model = keras.Sequential([keras.Input(shape=(20,)), layers.Dense(64, activation="relu"),
                          layers.Dense(64, activation="relu"), layers.Dense(1)])
optimizer = keras.optimizers.Adam(1e-3)
loss_fn = keras.losses.MeanSquaredError()

t0 = time.perf_counter()
for epoch in range(25):
    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            pred = model(xb, training=True)
            loss = loss_fn(yb, pred)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    total = 0.0
    for xb, yb in ds:
        loss = train_step(xb, yb)
        total += float(loss)
    print(f"epoch {epoch}: mean loss {total / 32:.4f}")
print(f"LOOP_TIME {time.perf_counter() - t0:.3f}")
