"""k-means written with Python lists and loops: each iteration assigns every point to its
nearest centroid (a Python distance over the coordinates, min over the k centroids) and then
recomputes each centroid as the mean of its group, 100 iterations, as a from-scratch exercise.

Source: https://github.com/ALGCDG/kmean (kmean.py: distance with zip and math.sqrt, min over
range(k) with a key, the groups by list comprehension); adapted: 3,000 synthetic points around
5 centres (seeded) instead of the four hand-written ones, and numpy only to make the data.

Truth, measured without the profiler (``python numpy_kmeans_python_lists.py --bench``): an
iteration as written, its assignment loop alone, and the same iteration vectorised in numpy.
"""

import math
import random
import sys
import time

import numpy as np


def distance(vectorA, vectorB):
    return math.sqrt(sum([(x1 - x2) ** 2 for x1, x2 in zip(vectorA, vectorB)]))


def kmean(k, points, iterations=100):
    if k <= 0:
        return
    classifications = [0] * len(points)
    if k == 1:
        return classifications
    # randomly sample k points and copy position to make starting centroids
    centroids = random.sample(points, k)
    for w in range(iterations):
        # assign point to closest centroid
        for i, point in enumerate(points):
            classifications[i] = min(range(k), key=lambda x: distance(point, centroids[x]))
        # new centroid is the average position of all points assigned to it
        for i, centroid in enumerate(centroids):
            group = [points[j] for j, c in enumerate(classifications) if c == i]
            centroids[i] = tuple([sum(a) / len(a) for a in zip(*group)])
    return classifications


def make_points(n=3000, k=5):
    rng = np.random.default_rng(0)
    centres = rng.uniform(-10, 10, size=(k, 2))
    xy = centres[rng.integers(0, k, n)] + rng.normal(0, 1.5, size=(n, 2))
    return [tuple(map(float, p)) for p in xy]


random.seed(0)
points = make_points()

if "--bench" in sys.argv:
    # Medians of 3 repeats of 10 iterations each: as written, its assignment loop alone, and
    # numpy's vectorised iteration (all distances at once, argmin, per-group means).
    k = 5
    cents = random.sample(points, k)
    cls = [0] * len(points)

    def written():
        for i, point in enumerate(points):
            cls[i] = min(range(k), key=lambda x: distance(point, cents[x]))
        for i in range(k):
            group = [points[j] for j, c in enumerate(cls) if c == i]
            cents[i] = tuple([sum(a) / len(a) for a in zip(*group)])

    def assign_only():
        for i, point in enumerate(points):
            cls[i] = min(range(k), key=lambda x: distance(point, cents[x]))

    P = np.array(points)
    C = np.array(random.sample(points, k))

    def vectorised():
        global C
        d = np.sqrt(((P[:, None, :] - C[None, :, :]) ** 2).sum(-1))
        lab = d.argmin(1)
        C = np.stack([P[lab == i].mean(0) for i in range(k)])

    for name, f in (("as written", written), ("assignment", assign_only), ("numpy", vectorised)):
        reps = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(10):
                f()
            reps.append((time.perf_counter() - t0) / 10 * 1e3)
        reps.sort()
        print(f"{name}: {reps[1]:.2f} ms an iteration ({[round(r, 2) for r in reps]})")
    sys.exit()

labels = kmean(5, points)
print([labels.count(i) for i in range(5)])
