"""The GAN of eriklindernoren/Keras-GAN (``gan/gan.py``): at every iteration the generator's
``predict`` on a batch of noise, then the discriminator's ``train_on_batch`` on the real and
the generated images and the combined model's ``train_on_batch``
(https://github.com/eriklindernoren/Keras-GAN/blob/master/gan/gan.py).

Kept as written: the generator (Dense 256-512 with LeakyReLU and BatchNormalization, tanh
output reshaped to 28x28x1) and the discriminator (Dense 512-256, sigmoid), Adam(0.0002, 0.5),
the combined model with the discriminator frozen, batch 32, the training iteration.
Adapted: 6,000 uniform random images in [-1, 1] stand in for MNIST (no download), the generator
without its third hidden layer, ``ITERATIONS`` iterations (it runs for 30-50 s on this
machine), Keras 3's ``keras.Input`` for ``input_shape``.

Truth, measured without the profiler (``python tests/data/corpus/keras_gan_train_on_batch.py
--bench``, this machine, 2 cores, another process beside it, medians of 3 repeats of 40
iterations): an iteration as written against the same with ``generator.predict_on_batch``;
see the truth file for the figures. ``predict`` sets up a data pipeline and its callbacks at
every call: the iteration's three ``train_on_batch`` calls are a small part of it.
"""

import statistics
import sys
import time

import numpy as np
import tensorflow as tf
from tensorflow.keras import Input, Model, Sequential, layers

ITERATIONS = 400
img_shape = (28, 28, 1)
latent = 100


def build_generator():
    return Sequential(
        [
            Input((latent,)),
            layers.Dense(256),
            layers.LeakyReLU(0.2),
            layers.BatchNormalization(momentum=0.8),
            layers.Dense(512),
            layers.LeakyReLU(0.2),
            layers.Dense(int(np.prod(img_shape)), activation="tanh"),
            layers.Reshape(img_shape),
        ]
    )


def build_discriminator():
    return Sequential(
        [
            Input(img_shape),
            layers.Flatten(),
            layers.Dense(512),
            layers.LeakyReLU(0.2),
            layers.Dense(256),
            layers.LeakyReLU(0.2),
            layers.Dense(1, activation="sigmoid"),
        ]
    )


discriminator = build_discriminator()
discriminator.compile(
    loss="binary_crossentropy",
    optimizer=tf.keras.optimizers.Adam(0.0002, 0.5),
    metrics=["accuracy"],
)
generator = build_generator()
z = Input((latent,))
img = generator(z)
discriminator.trainable = False
combined = Model(z, discriminator(img))
combined.compile(loss="binary_crossentropy", optimizer=tf.keras.optimizers.Adam(0.0002, 0.5))
X_train = np.random.default_rng(0).uniform(-1, 1, (6000, 28, 28, 1)).astype("float32")
batch_size = 32
valid = np.ones((batch_size, 1))
fake = np.zeros((batch_size, 1))


def iteration(epoch, on_batch=False):
    idx = np.random.randint(0, X_train.shape[0], batch_size)
    imgs = X_train[idx]
    noise = np.random.normal(0, 1, (batch_size, latent))
    if on_batch:
        gen_imgs = generator.predict_on_batch(noise)
    else:
        gen_imgs = generator.predict(noise, verbose=0)
    d_loss_real = discriminator.train_on_batch(imgs, valid)
    d_loss_fake = discriminator.train_on_batch(gen_imgs, fake)
    d_loss = 0.5 * np.add(d_loss_real, d_loss_fake)
    noise = np.random.normal(0, 1, (batch_size, latent))
    g_loss = combined.train_on_batch(noise, valid)
    if epoch % 100 == 0:
        print(f"{epoch} [D loss: {d_loss[0]:f}, acc.: {100 * d_loss[1]:.2f}%] [G loss: {g_loss:f}]")


def bench():
    for on_batch in (False, True):
        iteration(1, on_batch)
    times = {False: [], True: []}
    for _ in range(3):
        for on_batch in (False, True):
            t0 = time.perf_counter()
            for i in range(40):
                iteration(i + 1, on_batch)
            times[on_batch].append((time.perf_counter() - t0) / 40)
    for on_batch, name in ((False, "predict"), (True, "predict_on_batch")):
        xs = times[on_batch]
        mid, low, high = (1e3 * x for x in (statistics.median(xs), min(xs), max(xs)))
        print(f"iteration with {name}: median {mid:.1f} ms ({low:.1f}-{high:.1f})")


if __name__ == "__main__":
    if "--bench" in sys.argv:
        bench()
    else:
        for epoch in range(ITERATIONS):
            iteration(epoch)
