"""A numpy character-level model's loop that samples text every 50th step, as min-char-rnn
prints a sample every 100 iterations: each step a forward and backward pass over a batch, each
sample 16 characters drawn one at a time (synthetic data, offline).

Truth, measured without the profiler (``python tests/data/corpus/numpy_sample_every_50.py
--bench``): the samples' share of the loop's time, a sample's time and a normal step's.
"""

import sys
import time

import numpy as np

rng = np.random.default_rng(0)
H, V, B = 64, 40, 32
Wxh = rng.normal(scale=0.01, size=(V, H))
Whh = rng.normal(scale=0.01, size=(H, H))
Why = rng.normal(scale=0.01, size=(H, V))
X = rng.integers(0, V, size=(4000, B))
bench = "--bench" in sys.argv
spent: list[float] = []


def sample(n: int) -> list[int]:
    h, x, out = np.zeros(H), 0, []
    for _ in range(n):
        h = np.tanh(Wxh[x] + h @ Whh)
        p = np.exp(h @ Why)
        x = int(rng.choice(V, p=p / p.sum()))
        out.append(x)
    return out


lr = 0.01
text: list[int] = []
start = time.perf_counter()
for step in range(6000):
    xs = X[step % len(X)]
    h = np.tanh(Wxh[xs] + np.zeros((B, H)) @ Whh)
    logits = h @ Why
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    dlogits = p.copy()
    dlogits[np.arange(B), xs] -= 1
    Why -= lr * h.T @ dlogits / B
    dh = dlogits @ Why.T * (1 - h * h)
    np.add.at(Wxh, xs, -lr * dh / B)
    if step % 50 == 0:
        t = time.perf_counter()
        text = sample(16)
        spent.append(time.perf_counter() - t)
total = time.perf_counter() - start
print("sampled", len(text), "characters")
if bench:
    step_us = 1e6 * (total - sum(spent)) / 6000
    each_us = 1e6 * sorted(spent)[len(spent) // 2]
    print(
        f"samples {100 * sum(spent) / total:.1f}% of the loop; a sample {each_us:.0f} µs, "
        f"a normal step {step_us:.0f} µs"
    )
