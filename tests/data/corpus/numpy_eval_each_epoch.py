"""A numpy two-layer network trained for 10 epochs of 300 mini-batches, evaluating the held-out
set one sample at a time after each epoch, as course code does (synthetic data, offline). The
evaluations run between two steps of the loop, once an epoch.

Truth, measured without the profiler (``python tests/data/corpus/numpy_eval_each_epoch.py
--bench``): the evaluations' share of the loop's time, an evaluation's time and a step's.
"""

import sys
import time

import numpy as np

rng = np.random.default_rng(0)
X = rng.normal(size=(38_400, 100))
y = (X @ rng.normal(size=100) > 0).astype(float)
X_test = rng.normal(size=(3000, 100))
y_test = (X_test @ rng.normal(size=100) > 0).astype(float)
W1 = rng.normal(scale=0.1, size=(100, 256))
w2 = np.zeros(256)
lr, batch = 0.05, 128
bench = "--bench" in sys.argv
spent: list[float] = []


def evaluate(W1, w2):
    correct = 0
    for i in range(len(X_test)):  # one sample at a time
        h = np.maximum(X_test[i] @ W1, 0)
        correct += int((h @ w2 > 0) == y_test[i])
    return correct / len(X_test)


def train_step(xb, yb):
    global W1, w2
    h = np.maximum(xb @ W1, 0)
    p = 1 / (1 + np.exp(-(h @ w2)))
    g = (p - yb) / batch
    dh = np.outer(g, w2) * (h > 0)
    w2 = w2 - lr * h.T @ g
    W1 = W1 - lr * xb.T @ dh


start = time.perf_counter()
for epoch in range(10):
    order = rng.permutation(len(X))
    for b in range(300):
        idx = order[b * batch : (b + 1) * batch]
        train_step(X[idx], y[idx])
    t = time.perf_counter()
    acc = evaluate(W1, w2)
    spent.append(time.perf_counter() - t)
    print(f"epoch {epoch}: accuracy {acc:.3f}")
total = time.perf_counter() - start
if bench:
    step_us = 1e6 * (total - sum(spent)) / 3000
    print(
        f"evaluations {100 * sum(spent) / total:.1f}% of the loop; an evaluation "
        f"{1e3 * sorted(spent)[len(spent) // 2]:.1f} ms, a step {step_us:.0f} µs"
    )
