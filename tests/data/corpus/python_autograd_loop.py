"""A pure-Python autograd engine and the small MLP it trains, in the style of Andrej Karpathy's
micrograd and its demo notebook: every number is a scalar ``Value`` that records the values it
came from and a closure that passes its gradient back; ``backward()`` sorts the graph
topologically and runs the closures in reverse. No numpy or TensorFlow inside the step.

Source: https://github.com/karpathy/micrograd (``micrograd/engine.py``, ``micrograd/nn.py`` and
``demo.ipynb``: a 2-16-16-1 MLP on the two-moons data, SVM max-margin loss plus L2
regularisation, full-batch gradient descent with a decaying learning rate). Written here in the
same structure (not copied), adapted to run offline: the two moons are generated with numpy
outside the loop (the notebook uses sklearn's make_moons), 120 samples with a 2-20-20-1 MLP so a
step takes ~0.5-1 s, and 12 steps instead of 100.

Truth, measured without the profiler (``python tests/data/corpus/python_autograd_loop.py
--bench``): see ``truth/python_autograd_loop.json``. The step is Python bytecode and object
creation throughout (~80k ``Value`` objects a step); every ``Value`` sits in a reference cycle
(its ``_backward`` closure refers to the ``Value`` itself), so the graph is freed only by the
cyclic garbage collector, whose time is measured with ``gc.callbacks`` and by the same steps
with ``gc.disable()``.
"""

import gc
import math
import random
import sys
import time

import numpy as np


class Value:
    """A scalar and its gradient, with the operation that produced it."""

    def __init__(self, data, _children=(), _op=""):
        self.data = data
        self.grad = 0.0
        self._backward = lambda: None
        self._prev = set(_children)
        self._op = _op

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():
            self.grad += out.grad
            other.grad += out.grad

        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad

        out._backward = _backward
        return out

    def __pow__(self, k):
        out = Value(self.data**k, (self,), f"**{k}")

        def _backward():
            self.grad += k * self.data ** (k - 1) * out.grad

        out._backward = _backward
        return out

    def relu(self):
        out = Value(0.0 if self.data < 0 else self.data, (self,), "ReLU")

        def _backward():
            self.grad += (out.data > 0) * out.grad

        out._backward = _backward
        return out

    def backward(self):
        order, seen = [], set()

        def visit(v):
            if v not in seen:
                seen.add(v)
                for child in v._prev:
                    visit(child)
                order.append(v)

        visit(self)
        self.grad = 1.0
        for v in reversed(order):
            v._backward()

    def __neg__(self):
        return self * -1

    def __radd__(self, other):
        return self + other

    def __sub__(self, other):
        return self + (-other)

    def __rmul__(self, other):
        return self * other

    def __truediv__(self, other):
        return self * other**-1


class Module:
    def zero_grad(self):
        for p in self.parameters():
            p.grad = 0.0

    def parameters(self):
        return []


class Neuron(Module):
    def __init__(self, nin, nonlin=True):
        self.w = [Value(random.uniform(-1, 1)) for _ in range(nin)]
        self.b = Value(0.0)
        self.nonlin = nonlin

    def __call__(self, x):
        act = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)
        return act.relu() if self.nonlin else act

    def parameters(self):
        return self.w + [self.b]


class Layer(Module):
    def __init__(self, nin, nout, **kwargs):
        self.neurons = [Neuron(nin, **kwargs) for _ in range(nout)]

    def __call__(self, x):
        out = [n(x) for n in self.neurons]
        return out[0] if len(out) == 1 else out

    def parameters(self):
        return [p for n in self.neurons for p in n.parameters()]


class MLP(Module):
    def __init__(self, nin, nouts):
        sz = [nin] + nouts
        self.layers = [
            Layer(sz[i], sz[i + 1], nonlin=i != len(nouts) - 1) for i in range(len(nouts))
        ]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]


def make_moons(n, noise, rng):
    t = rng.uniform(0, math.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    X = np.stack([x, y], 1) + rng.normal(0, noise, (n, 2))
    return X.tolist(), [1.0 if u else -1.0 for u in upper]


np_rng = np.random.default_rng(1337)
random.seed(1337)
X, y = make_moons(64, 0.1, np_rng)
model = MLP(2, [16, 16, 1])


def loss():
    inputs = [list(map(Value, xrow)) for xrow in X]
    scores = list(map(model, inputs))
    # svm "max-margin" loss
    losses = [(1 + -yi * scorei).relu() for yi, scorei in zip(y, scores)]
    data_loss = sum(losses) * (1.0 / len(losses))
    # L2 regularization
    alpha = 1e-4
    reg_loss = alpha * sum(p * p for p in model.parameters())
    total_loss = data_loss + reg_loss
    accuracy = [(yi > 0) == (scorei.data > 0) for yi, scorei in zip(y, scores)]
    return total_loss, sum(accuracy) / len(accuracy)


def step(k, steps):
    total_loss, acc = loss()
    model.zero_grad()
    total_loss.backward()
    learning_rate = 1.0 - 0.9 * k / steps
    for p in model.parameters():
        p.data -= learning_rate * p.grad
    return total_loss, acc


def bench(blocks=4, per_block=3):
    """Step times with the cyclic GC on (its pauses timed by gc.callbacks) and off, alternating."""
    gc_ns = [0]
    started = [0]

    def on_gc(phase, info):
        if phase == "start":
            started[0] = time.perf_counter_ns()
        else:
            gc_ns[0] += time.perf_counter_ns() - started[0]

    gc.callbacks.append(on_gc)
    on, off, off_collect, gc_share = [], [], [], []
    k = 0
    for _ in range(blocks):
        for _ in range(per_block):  # GC on, as the script runs
            gc_ns[0] = 0
            t = time.perf_counter_ns()
            step(k, 100)
            dt = time.perf_counter_ns() - t
            on.append(dt)
            gc_share.append(gc_ns[0] / dt)
            k += 1
        for _ in range(per_block):  # GC off in the step; the garbage collected after it
            gc.disable()
            t = time.perf_counter_ns()
            step(k, 100)
            dt = time.perf_counter_ns() - t
            gc.enable()
            t = time.perf_counter_ns()
            gc.collect()
            off.append(dt)
            off_collect.append(time.perf_counter_ns() - t)
            k += 1
    gc.callbacks.remove(on_gc)
    m_on, m_off = np.median(on) / 1e6, np.median(off) / 1e6
    m_col = np.median(off_collect) / 1e6
    print(f"step with the GC on: {m_on:,.0f} ms (median of {len(on)}); the GC's pauses in it: "
          f"{np.median(gc_share):.0%} of the step (range {min(gc_share):.0%}-{max(gc_share):.0%})")
    print(f"step with gc.disable(): {m_off:,.0f} ms; one gc.collect() after it: {m_col:,.0f} ms")
    print(f"GC on / off: {m_on / m_off:.2f}x; on / (off + one collect): "
          f"{m_on / (m_off + m_col):.2f}x")
    print("on ms:", " ".join(f"{x / 1e6:,.0f}" for x in on))
    print("off ms:", " ".join(f"{x / 1e6:,.0f}" for x in off))
    print("gc share:", " ".join(f"{x:.2f}" for x in gc_share))


if "--bench" in sys.argv:
    bench()
    sys.exit(0)

steps = 12
for k in range(steps):
    total_loss, acc = step(k, steps)
    print(f"step {k} loss {total_loss.data}, accuracy {acc * 100}%")
