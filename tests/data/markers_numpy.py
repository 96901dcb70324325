"""A numpy mini-batch loop that names its steps with the markers API."""

import numpy as np

import profiler

rng = np.random.default_rng(0)
x = rng.uniform(0, 1, 4096)
y = 3 * x + 2
w = b = 0.0
batch = 64
for step in range(3000):
    i = (step * batch) % x.size
    xb, yb = x[i : i + batch], y[i : i + batch]
    with profiler.step(samples=batch, updates=1):
        err = w * xb + b - yb
        w -= 0.1 * 2 * float(np.mean(err * xb))
        b -= 0.1 * 2 * float(np.mean(err))
    if step % 100 == 0:
        profiler.metric(loss=float(np.mean((w * x + b - y) ** 2)))
print(f"w={w:.3f} b={b:.3f}")
