"""The TensorFlow DCGAN tutorial, shrunk: a generator and a discriminator trained together in one
``@tf.function`` step with two GradientTapes, each model with its own Adam optimizer.

Source: https://www.tensorflow.org/tutorials/generative/dcgan
(tensorflow/docs, site/en/tutorials/generative/dcgan.ipynb). Kept as written: the two Sequential
models (Dense -> BatchNorm -> LeakyReLU -> Reshape -> Conv2DTranspose x3 / Conv2D x2 with
Dropout -> Dense(1)), the losses, the two Adam(1e-4) optimizers, ``train_step`` and ``train``
(one ``train_step`` per batch of a shuffled, batched tf.data dataset, images generated from a
fixed seed after each epoch). Adapted to run offline in ~10 s: synthetic 16x16x1 images in
[-1, 1] instead of MNIST's 28x28 (the generator starts from 4x4 instead of 7x7), a quarter of
the filters (64/32/16 instead of 256/128/64), 1,024 images in batches of 64, 10 epochs; the
matplotlib plot and the checkpoint every 15 epochs are left out (no display, no files).

Truth, measured without the profiler (``python tests/data/corpus/tf2_dcgan_small.py --bench``;
alternating blocks in one process, medians of 5 repeats; 2 cores, quiet): see TRUTH below and
``truth/tf2_dcgan_small.json``.
"""

import sys
import time

import numpy as np
import tensorflow as tf
from tensorflow.keras import layers

rng = np.random.default_rng(0)
# Synthetic "digits": a few blobs per image, scaled to [-1, 1] as the tutorial scales MNIST.
grid = np.stack(np.meshgrid(np.arange(16), np.arange(16), indexing="ij"), -1).astype("float32")
centres = rng.uniform(3, 13, size=(1024, 3, 2)).astype("float32")
blobs = np.exp(-((grid[None, None] - centres[:, :, None, None]) ** 2).sum(-1) / 4.0).sum(1)
train_images = (np.clip(blobs, 0, 1) * 2 - 1).reshape(1024, 16, 16, 1).astype("float32")

BUFFER_SIZE = 1024
BATCH_SIZE = 64
train_dataset = tf.data.Dataset.from_tensor_slices(train_images).shuffle(BUFFER_SIZE)
train_dataset = train_dataset.batch(BATCH_SIZE)


def make_generator_model():
    model = tf.keras.Sequential()
    model.add(layers.Input((100,)))
    model.add(layers.Dense(4 * 4 * 64, use_bias=False))
    model.add(layers.BatchNormalization())
    model.add(layers.LeakyReLU())
    model.add(layers.Reshape((4, 4, 64)))
    model.add(layers.Conv2DTranspose(32, (5, 5), strides=(1, 1), padding="same", use_bias=False))
    model.add(layers.BatchNormalization())
    model.add(layers.LeakyReLU())
    model.add(layers.Conv2DTranspose(16, (5, 5), strides=(2, 2), padding="same", use_bias=False))
    model.add(layers.BatchNormalization())
    model.add(layers.LeakyReLU())
    model.add(
        layers.Conv2DTranspose(
            1, (5, 5), strides=(2, 2), padding="same", use_bias=False, activation="tanh"
        )
    )
    return model


def make_discriminator_model():
    model = tf.keras.Sequential()
    model.add(layers.Input((16, 16, 1)))
    model.add(layers.Conv2D(16, (5, 5), strides=(2, 2), padding="same"))
    model.add(layers.LeakyReLU())
    model.add(layers.Dropout(0.3))
    model.add(layers.Conv2D(32, (5, 5), strides=(2, 2), padding="same"))
    model.add(layers.LeakyReLU())
    model.add(layers.Dropout(0.3))
    model.add(layers.Flatten())
    model.add(layers.Dense(1))
    return model


generator = make_generator_model()
discriminator = make_discriminator_model()
cross_entropy = tf.keras.losses.BinaryCrossentropy(from_logits=True)


def discriminator_loss(real_output, fake_output):
    real_loss = cross_entropy(tf.ones_like(real_output), real_output)
    fake_loss = cross_entropy(tf.zeros_like(fake_output), fake_output)
    return real_loss + fake_loss


def generator_loss(fake_output):
    return cross_entropy(tf.ones_like(fake_output), fake_output)


generator_optimizer = tf.keras.optimizers.Adam(1e-4)
discriminator_optimizer = tf.keras.optimizers.Adam(1e-4)

EPOCHS = 10
noise_dim = 100
num_examples_to_generate = 16
seed = tf.random.normal([num_examples_to_generate, noise_dim])


def step_body(images):
    noise = tf.random.normal([BATCH_SIZE, noise_dim])
    with tf.GradientTape() as gen_tape, tf.GradientTape() as disc_tape:
        generated_images = generator(noise, training=True)
        real_output = discriminator(images, training=True)
        fake_output = discriminator(generated_images, training=True)
        gen_loss = generator_loss(fake_output)
        disc_loss = discriminator_loss(real_output, fake_output)
    gradients_of_generator = gen_tape.gradient(gen_loss, generator.trainable_variables)
    gradients_of_discriminator = disc_tape.gradient(disc_loss, discriminator.trainable_variables)
    generator_optimizer.apply_gradients(zip(gradients_of_generator, generator.trainable_variables))
    discriminator_optimizer.apply_gradients(
        zip(gradients_of_discriminator, discriminator.trainable_variables)
    )
    return gen_loss, disc_loss


# Notice the use of `tf.function`: this causes the function to be "compiled".
@tf.function
def train_step(images):
    return step_body(images)


def generate_and_save_images(model, epoch, test_input):
    # The tutorial plots these 16 images and saves a PNG per epoch; offline, only the call stays.
    predictions = model(test_input, training=False)
    return float(tf.reduce_mean(predictions))


def train(dataset, epochs):
    for epoch in range(epochs):
        start = time.time()
        for image_batch in dataset:
            gen_loss, disc_loss = train_step(image_batch)
        generate_and_save_images(generator, epoch + 1, seed)
        print(
            f"Time for epoch {epoch + 1} is {time.time() - start:.2f} sec "
            f"(gen {float(gen_loss):.3f}, disc {float(disc_loss):.3f})"
        )


def bench(repeats=5):
    """Truth without the profiler: where a step's time goes, by three counterfactuals."""
    # (a) The step as the tutorial runs it, on batches held in memory (tf.data iteration apart).
    batches = [b for b in train_dataset]
    # (b) k steps inside one tf.function call: removes the per-call cost (Python, the call's
    #     argument handling and executor set-up), k-1 times out of k.
    k = 8

    @tf.function
    def k_steps(stacked):
        for i in tf.range(k):
            g, d = step_body(stacked[i])
        return g, d

    stacked = tf.stack(batches[:k])
    # (c) the dataset iterated alone, per batch.
    for _ in range(3):  # warm-up: traces, first executions
        train_step(batches[0])
        k_steps(stacked)
    one, many, loop, data = [], [], [], []
    for _ in range(repeats):
        t = time.perf_counter()
        for b in batches:
            train_step(b)
        float(generator_optimizer.iterations)
        one.append((time.perf_counter() - t) / len(batches))
        t = time.perf_counter()
        for _ in range(len(batches) // k):
            k_steps(stacked)
        float(generator_optimizer.iterations)
        many.append((time.perf_counter() - t) / (len(batches) // k * k))
        t = time.perf_counter()
        for image_batch in train_dataset:
            train_step(image_batch)
        float(generator_optimizer.iterations)
        loop.append((time.perf_counter() - t) / len(batches))
        t = time.perf_counter()
        for image_batch in train_dataset:
            pass
        data.append((time.perf_counter() - t) / len(batches))
    med = {n: 1e6 * float(np.median(v)) for n, v in (("one", one), ("many", many), ("loop", loop),
                                                      ("data", data))}
    print(f"tutorial loop (tf.data + train_step): {med['loop']:,.0f} us a step")
    print(f"train_step on in-memory batches:      {med['one']:,.0f} us a step")
    print(f"{k} steps per tf.function call:        {med['many']:,.0f} us a step")
    print(f"dataset iterated alone:               {med['data']:,.0f} us a batch")
    print(f"per-call cost: {med['one'] - med['many']:,.0f} us "
          f"({(med['one'] - med['many']) / med['loop']:.0%} of the loop's step); "
          f"in-graph step: {med['many']:,.0f} us ({med['many'] / med['loop']:.0%})")
    for n, v in (("one", one), ("many", many), ("loop", loop), ("data", data)):
        print(n, " ".join(f"{1e6 * x:,.0f}" for x in v))
    # (d) batch size 32 vs 64 vs 128, in alternating blocks: a step that is mostly arithmetic
    #     grows with the batch; per-call and per-op costs do not.
    global BATCH_SIZE
    fns = {}
    for bs in (32, 64, 128):
        BATCH_SIZE = bs  # read when the new function traces
        fns[bs] = (tf.function(step_body), tf.constant(train_images[:bs]))
        for _ in range(3):
            fns[bs][0](fns[bs][1])
    BATCH_SIZE = 64
    times = {bs: [] for bs in fns}
    for _ in range(repeats):
        for bs, (fn, x) in fns.items():
            t = time.perf_counter()
            for _ in range(16):
                fn(x)
            float(generator_optimizer.iterations)
            times[bs].append((time.perf_counter() - t) / 16)
    m = {bs: 1e6 * float(np.median(v)) for bs, v in times.items()}
    print("batch 32/64/128: " + " / ".join(f"{m[bs]:,.0f}" for bs in m) + " us a step; "
          f"128 vs 32: {m[128] / m[32]:.2f}x for 4x the samples; fit a + b*n over 32..128: "
          f"a = {m[32] - (m[128] - m[32]) / 96 * 32:,.0f} us")


if "--bench" in sys.argv:
    bench()
    sys.exit(0)
train(train_dataset, EPOCHS)
