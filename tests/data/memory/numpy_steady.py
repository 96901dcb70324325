"""No growth: a numpy gradient-descent loop that replaces its arrays every step.

Truth, measured without the profiler (``python tests/data/memory/truth.py
tests/data/memory/numpy_steady.py``): 136 bytes a step over 20,000 steps (32.9 -> 36.3 MB,
the allocator settling), 10.3 s.
"""

import numpy as np

rng = np.random.default_rng(0)
x = rng.normal(size=(512, 64))
y = x @ rng.normal(size=(64, 1)) + 0.1 * rng.normal(size=(512, 1))
w = np.zeros((64, 1))
for step in range(20000):  # step
    grad = x.T @ (x @ w - y) / len(x)
    w -= 0.01 * grad
    last_batch = x.copy()  # replaced every step: nothing kept
print(float(((x @ w - y) ** 2).mean()))
