"""The DQN agent of keon/deep-q-learning (``dqn.py``): ``act`` calls ``model.predict`` on one
state, and ``replay`` fits each of 32 sampled transitions on its own, with two more
``model.predict`` calls on one state each
(https://github.com/keon/deep-q-learning/blob/master/dqn.py).

Kept as written: the agent (its network of two Dense(24) layers, Adam(0.001), the memory
deque of 2,000, epsilon-greedy ``act``, ``replay(batch_size)`` with ``model.predict`` and
``model.fit(state, target_f, epochs=1, verbose=0)`` per transition), the training loop
(remember, replay once the memory holds more than 32). Adapted: CartPole's dynamics in numpy
(no gym; the same equations, 200 steps at most), the memory filled with 40 random transitions
first, and the run bounded to ``REPLAYS`` replays (it runs for 40-60 s on this machine).

Truth, measured without the profiler (``python tests/data/corpus/keras_dqn_fit_per_sample.py
--bench``, this machine, 2 cores, another process beside it, medians of 3 repeats): one
replay as written 5.19 s (5.18-5.24), the same replay batched (``predict_on_batch`` on the 32
next states and the 32 states, one ``train_on_batch`` on the 32) 2.5 ms; ``fit`` on one
sample 68.1 ms a call (58.3-68.5) against ``train_on_batch`` 1.3 ms (1.2-5.8); ``predict`` on
one state 54.3 ms (53.0-57.0) against ``predict_on_batch`` 0.7 ms (0.7-1.1). A replay's 32
fits are ~2.2 s of its 5.2 s and its ~61 predicts ~3.3 s: both calls' per-call set-up, not
the network's arithmetic, is the loop.
"""

import random
import statistics
import sys
import time
from collections import deque

import numpy as np
import tensorflow as tf

REPLAYS = 8


class Env:
    """CartPole's dynamics (gym's cartpole.py, Euler steps of 0.02 s)."""

    def __init__(self):
        self.rng = np.random.default_rng(0)

    def reset(self):
        self.s = self.rng.uniform(-0.05, 0.05, 4)
        self.t = 0
        return self.s.copy()

    def step(self, a):
        x, v, th, w = self.s
        f = 10.0 if a == 1 else -10.0
        tmp = (f + 0.05 * w * w * np.sin(th)) / 1.1
        wacc = (9.8 * np.sin(th) - np.cos(th) * tmp) / (0.5 * (4 / 3 - 0.1 * np.cos(th) ** 2 / 1.1))
        acc = tmp - 0.05 * wacc * np.cos(th) / 1.1
        self.s = np.array([x + 0.02 * v, v + 0.02 * acc, th + 0.02 * w, w + 0.02 * wacc])
        self.t += 1
        done = abs(self.s[0]) > 2.4 or abs(self.s[2]) > 0.21 or self.t >= 200
        return self.s.copy(), 1.0, done


class DQNAgent:
    def __init__(self, state_size, action_size):
        self.state_size = state_size
        self.action_size = action_size
        self.memory = deque(maxlen=2000)
        self.gamma = 0.95
        self.epsilon = 1.0
        self.epsilon_min = 0.01
        self.epsilon_decay = 0.995
        self.learning_rate = 0.001
        self.model = self._build_model()

    def _build_model(self):
        model = tf.keras.Sequential(
            [
                tf.keras.Input((self.state_size,)),
                tf.keras.layers.Dense(24, activation="relu"),
                tf.keras.layers.Dense(24, activation="relu"),
                tf.keras.layers.Dense(self.action_size, activation="linear"),
            ]
        )
        model.compile(
            loss="mse", optimizer=tf.keras.optimizers.Adam(learning_rate=self.learning_rate)
        )
        return model

    def remember(self, state, action, reward, next_state, done):
        self.memory.append((state, action, reward, next_state, done))

    def act(self, state):
        if np.random.rand() <= self.epsilon:
            return random.randrange(self.action_size)
        act_values = self.model.predict(state, verbose=0)
        return int(np.argmax(act_values[0]))

    def replay(self, batch_size):
        minibatch = random.sample(self.memory, batch_size)
        for state, action, reward, next_state, done in minibatch:
            target = reward
            if not done:
                target = reward + self.gamma * np.amax(self.model.predict(next_state, verbose=0)[0])
            target_f = self.model.predict(state, verbose=0)
            target_f[0][action] = target
            self.model.fit(state, target_f, epochs=1, verbose=0)
        if self.epsilon > self.epsilon_min:
            self.epsilon *= self.epsilon_decay

    def replay_batched(self, batch_size):
        """The fix: the 32 transitions predicted and fitted as one batch."""
        mb = random.sample(self.memory, batch_size)
        s = np.vstack([m[0] for m in mb])
        ns = np.vstack([m[3] for m in mb])
        a = np.array([m[1] for m in mb])
        r = np.array([m[2] for m in mb])
        d = np.array([m[4] for m in mb])
        target = r + self.gamma * np.amax(self.model.predict_on_batch(ns), 1) * (~d)
        target_f = self.model.predict_on_batch(s)
        target_f[np.arange(batch_size), a] = target
        self.model.train_on_batch(s, target_f)


def _fill(agent, rng, n=40):
    for _ in range(n):
        agent.remember(
            rng.normal(size=(1, 4)),
            int(rng.integers(2)),
            1.0,
            rng.normal(size=(1, 4)),
            bool(rng.random() < 0.1),
        )


def bench():
    agent = DQNAgent(4, 2)
    _fill(agent, np.random.default_rng(1), 200)
    state = agent.memory[0][0]
    target = agent.model.predict(state, verbose=0)
    agent.replay(32)
    agent.replay_batched(32)
    cases = [
        ("replay as written", lambda: agent.replay(32), 2),
        ("replay batched", lambda: agent.replay_batched(32), 20),
        ("fit on one sample", lambda: agent.model.fit(state, target, epochs=1, verbose=0), 20),
        ("train_on_batch on one sample", lambda: agent.model.train_on_batch(state, target), 50),
        ("predict on one state", lambda: agent.model.predict(state, verbose=0), 20),
        ("predict_on_batch on one state", lambda: agent.model.predict_on_batch(state), 50),
    ]
    for name, fn, n in cases:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            times.append((time.perf_counter() - t0) / n)
        low, mid, high = (1e3 * x for x in (min(times), statistics.median(times), max(times)))
        print(f"{name}: median {mid:.1f} ms ({low:.1f}-{high:.1f})")


def main():
    env = Env()
    agent = DQNAgent(4, 2)
    _fill(agent, np.random.default_rng(1))
    batch_size = 32
    replays = 0
    episode = 0
    while replays < REPLAYS:
        state = env.reset().reshape(1, 4)
        for t in range(500):
            action = agent.act(state)
            next_state, reward, done = env.step(action)
            reward = reward if not done else -10
            next_state = next_state.reshape(1, 4)
            agent.remember(state, action, reward, next_state, done)
            state = next_state
            if done:
                print(f"episode: {episode}, score: {t}, e: {agent.epsilon:.2}")
                break
            if len(agent.memory) > batch_size:
                agent.replay(batch_size)
                replays += 1
                if replays >= REPLAYS:
                    break
        episode += 1


if __name__ == "__main__":
    bench() if "--bench" in sys.argv else main()
