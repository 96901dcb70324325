# Logistic regression with mini-batch SGD, keeping a history (course-notebook style)
import numpy as np, time

rng = np.random.default_rng(0)
n, d = 4000, 100
X = rng.normal(size=(n, d))
true_w = rng.normal(size=d)
y = (X @ true_w + 0.5 * rng.normal(size=n) > 0).astype(np.float64)

def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))

w = np.zeros(d)
b = 0.0
lr = 0.1
batch = 64
losses = np.array([])
w_history = w.reshape(1, -1)

t0 = time.perf_counter()
for step in range(10000):
    idx = rng.integers(0, n, batch)
    xb, yb = X[idx], y[idx]
    p = sigmoid(xb @ w + b)
    loss = -np.mean(yb * np.log(p + 1e-9) + (1 - yb) * np.log(1 - p + 1e-9))
    grad_w = xb.T @ (p - yb) / batch
    grad_b = np.mean(p - yb)
    w = w - lr * grad_w
    b = b - lr * grad_b
    losses = np.append(losses, loss)
    w_history = np.vstack([w_history, w])
t1 = time.perf_counter()
print(f"final loss {losses[-1]:.4f}  history {w_history.shape}")
print(f"LOOP_SECONDS {t1 - t0:.3f}")
