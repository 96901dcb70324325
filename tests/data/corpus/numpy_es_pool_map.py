# Source: https://github.com/alirezamika/evostra  (evostra/algorithms/evolution_strategy.py,
#         evostra/models/feed_forward_network.py, README.rst usage example)
# Adapted minimally: the class code is as written; the README's Keras model is replaced by the
# repo's own numpy FeedForwardNetwork (TF in forked Pool workers is unsafe); synthetic target;
# num_threads=-1 (mp.cpu_count()); iterations reduced. Optional TRUTH=1 env var times pool.map.
from __future__ import print_function
import os, time
import numpy as np
import multiprocessing as mp

TRUTH = os.environ.get("TRUTH") == "1"
T = {"map": 0.0, "gen": 0.0, "update": 0.0}

def worker_process(arg):
    get_reward_func, weights = arg
    return get_reward_func(weights)


class EvolutionStrategy(object):
    def __init__(self, weights, get_reward_func, population_size=50, sigma=0.1, learning_rate=0.03, decay=0.998,
                 num_threads=1):
        np.random.seed(0)
        self.weights = weights
        self.get_reward = get_reward_func
        self.POPULATION_SIZE = population_size
        self.SIGMA = sigma
        self.LEARNING_RATE = learning_rate
        self.decay = decay
        self.num_threads = mp.cpu_count() if num_threads == -1 else num_threads

    def _get_weights_try(self, w, p):
        weights_try = []
        for index, i in enumerate(p):
            jittered = self.SIGMA * i
            weights_try.append(w[index] + jittered)
        return weights_try

    def get_weights(self):
        return self.weights

    def run(self, iterations, print_step=10):
        pool = mp.Pool(self.num_threads) if self.num_threads > 1 else None
        for iteration in range(iterations):
            t0 = time.perf_counter()
            population = []
            for i in range(self.POPULATION_SIZE):
                x = []
                for w in self.weights:
                    x.append(np.random.randn(*w.shape))
                population.append(x)
            t1 = time.perf_counter()
            if pool is not None:
                rewards = pool.map(worker_process,
                                   ((self.get_reward, self._get_weights_try(self.weights, individual)) for individual in
                                    population))
            else:
                rewards = []
                for individual in population:
                    weights_try = self._get_weights_try(self.weights, individual)
                    rewards.append(self.get_reward(weights_try))
            t2 = time.perf_counter()
            rewards = np.array(rewards)

            rewards = (rewards - np.mean(rewards)) / np.std(rewards)

            for index, w in enumerate(self.weights):
                A = np.array([p[index] for p in population])
                self.weights[index] = w + self.LEARNING_RATE / (self.POPULATION_SIZE * self.SIGMA) * np.dot(A.T,
                                                                                                            rewards).T

            self.LEARNING_RATE *= self.decay
            t3 = time.perf_counter()
            T["gen"] += t1 - t0; T["map"] += t2 - t1; T["update"] += t3 - t2

            if (iteration + 1) % print_step == 0:
                print('iter %d. reward: %f' % (iteration + 1, self.get_reward(self.weights)))
        if pool is not None:
            pool.close()
            pool.join()


class FeedForwardNetwork(object):
    def __init__(self, layer_sizes):
        self.weights = []
        for index in range(len(layer_sizes)-1):
            self.weights.append(np.zeros(shape=(layer_sizes[index], layer_sizes[index+1])))

    def predict(self, inp):
        out = np.expand_dims(inp.flatten(), 0)
        for i, layer in enumerate(self.weights):
            out = np.dot(out, layer)
            out = np.arctan(out)
        return out[0]

    def get_weights(self):
        return self.weights

    def set_weights(self, weights):
        self.weights = weights


model = FeedForwardNetwork(layer_sizes=[64, 128, 128, 10])
rng = np.random.RandomState(1)
inp = rng.randn(200, 64)                       # synthetic batch of inputs
solution = np.tanh(inp @ rng.randn(64, 10) * 0.2)  # synthetic targets

def get_reward(weights):
    global solution, model, inp
    model.set_weights(weights)
    pred = np.stack([model.predict(x) for x in inp])   # per-sample predict, as the README does one input
    reward = -np.sum(np.square(solution - pred))
    return reward

if __name__ == "__main__":
    t0 = time.perf_counter()
    es = EvolutionStrategy(model.get_weights(), get_reward, population_size=50, sigma=0.1,
                           learning_rate=0.001, num_threads=-1)
    es.run(int(os.environ.get("ITERS", "100")), print_step=10)
    tot = time.perf_counter() - t0
    if TRUTH:
        print("TRUTH total %.2fs  pool.map %.2fs  population-gen %.2fs  update %.2fs" % (tot, T["map"], T["gen"], T["update"]))
