"""A numpy softmax classifier trained by mini-batch gradient descent that evaluates its accuracy
on a held-out set every 10th iteration, as course notebooks do (synthetic data, offline).

Truth, measured without the profiler (``python tests/data/corpus/numpy_eval_every_10.py
--bench``): a training iteration's time and an evaluating iteration's, and the evaluating
iterations' share of the loop.
"""

import sys
import time

import numpy as np

rng = np.random.default_rng(0)
n_features, n_classes = 100, 10
X_train = rng.normal(size=(4000, n_features))
y_train = rng.integers(0, n_classes, 4000)
X_test = rng.normal(size=(4000, n_features))
y_test = rng.integers(0, n_classes, 4000)
W = np.zeros((n_features, n_classes))
lr, batch = 0.1, 64


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


bench = "--bench" in sys.argv
train_t, eval_t = [], []
for it in range(3000):
    t = time.perf_counter()
    idx = rng.integers(0, len(X_train), batch)
    xb, yb = X_train[idx], y_train[idx]
    p = softmax(xb @ W)
    p[np.arange(batch), yb] -= 1
    W -= lr * xb.T @ p / batch
    if it % 10 == 0:
        acc = (softmax(X_test @ W).argmax(axis=1) == y_test).mean()
        if it % 1000 == 0:
            print(f"iteration {it}: test accuracy {acc:.3f}")
        eval_t.append(time.perf_counter() - t)
    else:
        train_t.append(time.perf_counter() - t)
if bench:
    tr, ev = np.median(train_t) * 1e6, np.median(eval_t) * 1e6
    share = sum(eval_t) / (sum(eval_t) + sum(train_t))
    print(f"train {tr:.0f} us, evaluating {ev:.0f} us ({ev / tr:.1f}x), {share:.0%} of the loop")
