"""A user's numpy gradient-descent loop: linear regression, 20,000 full-batch steps (~1 s)."""

import numpy as np

rng = np.random.default_rng(0)
X = rng.normal(size=(256, 8))
true_w = rng.normal(size=8)
y = X @ true_w + 0.1 * rng.normal(size=256)

w = np.zeros(8)
lr = 0.05
for step in range(20_000):
    pred = X @ w
    err = pred - y
    grad = X.T @ err / len(y)
    w -= lr * grad
    if step % 5000 == 0:
        print(f"step {step}: loss {float(np.mean(err ** 2)):.5f}")
print("final loss", float(np.mean((X @ w - y) ** 2)))
