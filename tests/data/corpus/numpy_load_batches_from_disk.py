"""A numpy training loop that reads each batch from its own .npy file inside the loop, as scripts
whose data set is saved in shards do (``np.load`` per step, the files in the page cache)."""
import os
import tempfile

import numpy as np

rng = np.random.default_rng(0)
folder = tempfile.mkdtemp()
w_true = rng.standard_normal(64)
for i in range(32):
    X = rng.standard_normal((2048, 64))
    np.save(os.path.join(folder, f"x{i:03d}.npy"), X)
    np.save(os.path.join(folder, f"y{i:03d}.npy"), X @ w_true)

w = np.zeros(64)
for step in range(3000):
    X = np.load(os.path.join(folder, f"x{step % 32:03d}.npy"))
    y = np.load(os.path.join(folder, f"y{step % 32:03d}.npy"))
    err = X[:256] @ w - y[:256]
    w -= 0.05 * X[:256].T @ err / 256
print("error", float(np.abs(w - w_true).max()))
