"""A numpy training loop fed by a loader thread through a queue (a hand-made DataLoader): the
thread builds each batch in Python (per-sample augmentation), the loop takes it with get()."""
import queue
import threading

import numpy as np

rng = np.random.default_rng(0)
data = rng.standard_normal((4096, 32))
labels = (data[:, 0] > 0).astype(np.float64)


def make_batch(idx):
    rows = []
    for i in idx:  # per-sample augmentation in Python
        x = data[i].copy()
        x += 0.01 * float(i % 7)
        rows.append(x)
    return np.stack(rows), labels[idx]


def loader(q, n):
    r = np.random.default_rng(1)
    for _ in range(n):
        q.put(make_batch(r.integers(0, len(data), 128)))
    q.put(None)


q = queue.Queue(maxsize=4)
threading.Thread(target=loader, args=(q, 3000), daemon=True).start()
w = np.zeros(32)
step = 0
while True:
    batch = q.get()
    if batch is None:
        break
    X, y = batch
    p = 1 / (1 + np.exp(-(X @ w)))
    w -= 0.1 * X.T @ (p - y) / len(y)
    step += 1
print("steps", step, "w0", round(float(w[0]), 3))
