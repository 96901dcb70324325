"""A user's TF2 training loop: a small MLP trained by a tf.function step on in-memory batches."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x_all = rng.normal(size=(4096, 32)).astype("float32")
y_all = (x_all[:, :4].sum(axis=1, keepdims=True) > 0).astype("float32")

model = tf.keras.Sequential(
    [tf.keras.Input((32,)), tf.keras.layers.Dense(256, activation="relu"),
     tf.keras.layers.Dense(256, activation="relu"), tf.keras.layers.Dense(1)]
)
opt = tf.keras.optimizers.SGD(0.01)
loss_fn = tf.keras.losses.BinaryCrossentropy(from_logits=True)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


batch = 128
for epoch in range(40):
    for i in range(0, len(x_all), batch):
        loss = train_step(x_all[i : i + batch], y_all[i : i + batch])
    if epoch % 10 == 0:
        print(f"epoch {epoch}: loss {float(loss):.4f}")
print("done")
