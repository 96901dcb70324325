# Skip-gram with negative sampling, written the "from scratch" way: one (center, context) pair at a time
import numpy as np, random, time
from collections import Counter

random.seed(3); rng = np.random.default_rng(3)
vocab_words = [f"w{i}" for i in range(500)]
zipf = np.array([1.0 / (i + 1) for i in range(500)]); zipf /= zipf.sum()
corpus = list(rng.choice(vocab_words, size=12000, p=zipf))

counts = Counter(corpus)
word2idx = {w: i for i, w in enumerate(counts)}
V, dim, window, neg, lr = len(word2idx), 50, 2, 5, 0.025
W_in = (rng.random((V, dim)) - 0.5) / dim
W_out = np.zeros((V, dim))
noise_words = list(counts.keys())
noise_p = np.array([counts[w] ** 0.75 for w in noise_words]); noise_p /= noise_p.sum()

def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))

t0 = time.perf_counter()
for epoch in range(3):
    total_loss = 0.0
    pairs = 0
    for pos, word in enumerate(corpus):
        c = word2idx[word]
        for off in range(-window, window + 1):
            if off == 0 or not (0 <= pos + off < len(corpus)):
                continue
            o = word2idx[corpus[pos + off]]
            negs = [word2idx[w] for w in random.choices(noise_words, weights=noise_p, k=neg)]
            v = W_in[c]
            grad_v = np.zeros(dim)
            s = sigmoid(np.dot(v, W_out[o]))
            total_loss += -np.log(s + 1e-9)
            grad_v += (s - 1) * W_out[o]
            W_out[o] -= lr * (s - 1) * v
            for ng in negs:
                sn = sigmoid(np.dot(v, W_out[ng]))
                total_loss += -np.log(1 - sn + 1e-9)
                grad_v += sn * W_out[ng]
                W_out[ng] -= lr * sn * v
            W_in[c] -= lr * grad_v
            pairs += 1
    print(f"epoch {epoch} avg loss {total_loss / pairs:.4f}")
t1 = time.perf_counter()
print(f"LOOP_SECONDS {t1 - t0:.3f}")
