"""Softmax regression by minibatch SGD whose samples are kept in a Python list (as read or
augmented one at a time) and converted whole with ``np.array(samples)`` (and the labels with
``np.append``) at every batch before the batch is sliced: a pattern of Stack Overflow
questions asking why training gets slower with more data (synthetic data, offline).

Truth, measured without the profiler (``python tests/data/corpus/numpy_whole_list_to_array.py``,
its last line; ``FIX=1`` converts once before the loop): the conversion holds 93-98% of the
loop's time; converting once makes the loop 100-170x faster.
"""
import os, sys, time
import numpy as np

FIX = os.environ.get("FIX") == "1"     # convert once before the loop
rng = np.random.default_rng(1)
N, D, NCLS, B = 20000, 256, 10, 64
samples = [rng.standard_normal(D).astype(np.float32) for _ in range(N)]
labels = [int(v) for v in rng.integers(0, NCLS, N)]
W = np.zeros((D, NCLS), np.float32); b = np.zeros(NCLS, np.float32)
if FIX:
    X_all = np.array(samples); y_all = np.array(labels)
conv_t = 0.0
t0 = time.perf_counter()
step = 0
for epoch in range(3):
    for i in range(0, N, B):
        tc = time.perf_counter()
        if not FIX:
            X_all = np.array(samples)                 # whole dataset, every batch
            y_all = np.append([], labels).astype(int)
        conv_t += time.perf_counter() - tc
        xb = X_all[i:i+B]; yb = y_all[i:i+B]
        s = xb @ W + b
        s -= s.max(1, keepdims=True); e = np.exp(s); p = e / e.sum(1, keepdims=True)
        loss = -np.log(p[np.arange(len(yb)), yb] + 1e-9).mean()
        p[np.arange(len(yb)), yb] -= 1; p /= len(yb)
        W -= 0.1 * (xb.T @ p); b -= 0.1 * p.sum(0)
        step += 1
    print(f"epoch {epoch} loss {loss:.4f}", flush=True)
tot = time.perf_counter() - t0
print(f"total {tot:.2f}s conversion {conv_t:.2f}s share {conv_t/tot:.1%} steps {step}")
