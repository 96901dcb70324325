"""A TF2 custom loop that sleeps in each step (a throttle)."""
import time
import tensorflow as tf

model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(1)])
opt = tf.keras.optimizers.SGD(0.01)
x = tf.random.normal((256, 32))
y = tf.random.normal((256, 1))


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss


for step in range(1500):
    loss = train_step(x, y)
    time.sleep(0.004)
print("loss", float(loss))
