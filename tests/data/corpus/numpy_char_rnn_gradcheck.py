# Source: https://github.com/Anirudh-Swaminathan/ece_285_fa19_project/blob/master/learning_stuff/min_char_rnn.py
#   (a copy of Karpathy's min-char-rnn, https://gist.github.com/karpathy/d4dee566867f8291f086,
#    with a gradient check run every 100 iterations inside the training loop)
# Adapted minimally: Python 3 (print(), range, repr), synthetic text instead of input.txt,
# `while True` bounded to N_ITERS iterations, gradCheck prints silenced. Optional TRUTH=1 timing.
import os, time
import numpy as np

TRUTH = os.environ.get("TRUTH") == "1"
T = {"sample": 0.0, "gradcheck": 0.0, "lossFun": 0.0, "adagrad": 0.0}
N_ITERS = int(os.environ.get("N_ITERS", "6000"))

# data I/O  (synthetic text: random words over a 40-char alphabet)
rs = np.random.RandomState(0)
alphabet = list("abcdefghijklmnopqrstuvwxyz .,;:!?'ABCDEFGH\n")
words = [''.join(rs.choice(alphabet[:26], rs.randint(2, 9))) for _ in range(500)]
data = ' '.join(rs.choice(words, 40000)) + ''.join(alphabet)
chars = list(set(data))
data_size, vocab_size = len(data), len(chars)
print('data has %d characters, %d unique.' % (data_size, vocab_size))
char_to_ix = { ch:i for i,ch in enumerate(chars) }
ix_to_char = { i:ch for i,ch in enumerate(chars) }

# hyperparameters
hidden_size = 100 # size of hidden layer of neurons
seq_length = 25 # number of steps to unroll the RNN for
learning_rate = 1e-1

# model parameters
Wxh = np.random.randn(hidden_size, vocab_size)*0.01 # input to hidden
Whh = np.random.randn(hidden_size, hidden_size)*0.01 # hidden to hidden
Why = np.random.randn(vocab_size, hidden_size)*0.01 # hidden to output
bh = np.zeros((hidden_size, 1)) # hidden bias
by = np.zeros((vocab_size, 1)) # output bias

def lossFun(inputs, targets, hprev):
    xs, hs, ys, ps = {}, {}, {}, {}
    hs[-1] = np.copy(hprev)
    loss = 0
    # forward pass
    for t in range(len(inputs)):
        xs[t] = np.zeros((vocab_size,1)) # encode in 1-of-k representation
        xs[t][inputs[t]] = 1
        hs[t] = np.tanh(np.dot(Wxh, xs[t]) + np.dot(Whh, hs[t-1]) + bh) # hidden state
        ys[t] = np.dot(Why, hs[t]) + by # unnormalized log probabilities for next chars
        ps[t] = np.exp(ys[t]) / np.sum(np.exp(ys[t])) # probabilities for next chars
        loss += -np.log(ps[t][targets[t],0]) # softmax (cross-entropy loss)
    # backward pass: compute gradients going backwards
    dWxh, dWhh, dWhy = np.zeros_like(Wxh), np.zeros_like(Whh), np.zeros_like(Why)
    dbh, dby = np.zeros_like(bh), np.zeros_like(by)
    dhnext = np.zeros_like(hs[0])
    for t in reversed(range(len(inputs))):
        dy = np.copy(ps[t])
        dy[targets[t]] -= 1
        dWhy += np.dot(dy, hs[t].T)
        dby += dy
        dh = np.dot(Why.T, dy) + dhnext # backprop into h
        dhraw = (1 - hs[t] * hs[t]) * dh # backprop through tanh nonlinearity
        dbh += dhraw
        dWxh += np.dot(dhraw, xs[t].T)
        dWhh += np.dot(dhraw, hs[t-1].T)
        dhnext = np.dot(Whh.T, dhraw)
    for dparam in [dWxh, dWhh, dWhy, dbh, dby]:
        np.clip(dparam, -5, 5, out=dparam) # clip to mitigate exploding gradients
    return loss, dWxh, dWhh, dWhy, dbh, dby, hs[len(inputs)-1]

def sample(h, seed_ix, n):
    x = np.zeros((vocab_size, 1))
    x[seed_ix] = 1
    ixes = []
    for t in range(n):
        h = np.tanh(np.dot(Wxh, x) + np.dot(Whh, h) + bh)
        y = np.dot(Why, h) + by
        p = np.exp(y) / np.sum(np.exp(y))
        ix = np.random.choice(range(vocab_size), p=p.ravel())
        x = np.zeros((vocab_size, 1))
        x[ix] = 1
        ixes.append(ix)
    return ixes

# gradient checking
from random import uniform
def gradCheck(inputs, target, hprev):
    global Wxh, Whh, Why, bh, by
    num_checks, delta = 10, 1e-5
    _, dWxh, dWhh, dWhy, dbh, dby, _ = lossFun(inputs, targets, hprev)
    for param,dparam,name in zip([Wxh, Whh, Why, bh, by], [dWxh, dWhh, dWhy, dbh, dby], ['Wxh', 'Whh', 'Why', 'bh', 'by']):
        s0 = dparam.shape
        s1 = param.shape
        assert s0 == s1, 'Error dims dont match: %s and %s.' % (repr(s0), repr(s1))
        for i in range(num_checks):
            ri = int(uniform(0,param.size))
            old_val = param.flat[ri]
            param.flat[ri] = old_val + delta
            cg0, _, _, _, _, _, _ = lossFun(inputs, targets, hprev)
            param.flat[ri] = old_val - delta
            cg1, _, _, _, _, _, _ = lossFun(inputs, targets, hprev)
            param.flat[ri] = old_val # reset old value for this parameter
            grad_analytic = dparam.flat[ri]
            grad_numerical = (cg0 - cg1) / ( 2 * delta )
            rel_error = abs(grad_analytic - grad_numerical) / (abs(grad_numerical + grad_analytic) + 1e-30)

t_start = time.perf_counter()
n, p = 0, 0
mWxh, mWhh, mWhy = np.zeros_like(Wxh), np.zeros_like(Whh), np.zeros_like(Why)
mbh, mby = np.zeros_like(bh), np.zeros_like(by) # memory variables for Adagrad
smooth_loss = -np.log(1.0/vocab_size)*seq_length # loss at iteration 0
while n < N_ITERS:
    if p+seq_length+1 >= len(data) or n == 0:
        hprev = np.zeros((hidden_size,1)) # reset RNN memory
        p = 0 # go from start of data
    inputs = [char_to_ix[ch] for ch in data[p:p+seq_length]]
    targets = [char_to_ix[ch] for ch in data[p+1:p+seq_length+1]]

    # sample from the model now and then
    if n % 100 == 0:
        t0 = time.perf_counter()
        sample_ix = sample(hprev, inputs[0], 200)
        txt = ''.join(ix_to_char[ix] for ix in sample_ix)
        print('----\n %s \n----' % (txt, ))
        t1 = time.perf_counter()
        print("Performing gradient checking now...")
        gradCheck(inputs, targets, hprev)
        t2 = time.perf_counter()
        T["sample"] += t1 - t0; T["gradcheck"] += t2 - t1

    t0 = time.perf_counter()
    loss, dWxh, dWhh, dWhy, dbh, dby, hprev = lossFun(inputs, targets, hprev)
    t1 = time.perf_counter()
    smooth_loss = smooth_loss * 0.999 + loss * 0.001
    if n % 100 == 0: print('iter %d, loss: %f' % (n, smooth_loss)) # print progress

    for param, dparam, mem in zip([Wxh, Whh, Why, bh, by],
                                  [dWxh, dWhh, dWhy, dbh, dby],
                                  [mWxh, mWhh, mWhy, mbh, mby]):
        mem += dparam * dparam
        param += -learning_rate * dparam / np.sqrt(mem + 1e-8) # adagrad update
    t2 = time.perf_counter()
    T["lossFun"] += t1 - t0; T["adagrad"] += t2 - t1

    p += seq_length # move data pointer
    n += 1 # iteration counter

if TRUTH:
    tot = time.perf_counter() - t_start
    print("TRUTH loop %.2fs  gradCheck %.2fs (%.0f%%)  sample %.2fs (%.0f%%)  lossFun %.2fs (%.0f%%)  adagrad %.2fs (%.0f%%)" % (
        tot, T["gradcheck"], 100*T["gradcheck"]/tot, T["sample"], 100*T["sample"]/tot,
        T["lossFun"], 100*T["lossFun"]/tot, T["adagrad"], 100*T["adagrad"]/tot))
