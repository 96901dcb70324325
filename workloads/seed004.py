"""Seed 004: the synthetic data set and the evaluation loss shared by its three workloads.

Not a registered workload (it defines no ``WORKLOAD``). The question gives no data; the numbers
in it fit a simple regression on n = 4,160 samples (n / 32 = 130, the "130" the asker saw in
Keras's progress bar). We draw ``x_raw ~ U(0, 10)``, standardise it (``x = (x_raw - mean) /
std``, so the model is well conditioned, as the asker's loss figures suggest) and set ``y = 3 x +
2 + N(0, 1)`` on the standardised ``x``: the optimum is ``w ≈ 3, b ≈ 2`` with a loss floor ≈ 1
(the noise). Every implementation is scored by ``eval_loss``: the seed's own ``cost``, the MSE on
the full data set, in numpy float64.

numpy is imported inside the functions, so registering the workloads stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Samples (the question's 130 batches of 32).
N = 4160
#: Batch size of both the seed's Adam and Keras's ``fit``.
BATCH_SIZE = 32
#: The seed's learning rate (its ``alpha``, Keras's ``learning_rate``).
LR = 1e-3
BETA1 = 0.9
BETA2 = 0.999


def data(n: int = N, seed: int = 0) -> tuple[Any, Any]:
    """``(x, y)``, float64 arrays of ``n`` samples drawn with ``numpy.random.default_rng(seed)``.

    ``x`` is ``U(0, 10)`` standardised to mean 0 and standard deviation 1; ``y = 3 x + 2 +
    N(0, 1)``.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    x_raw = rng.uniform(0.0, 10.0, n)
    x = (x_raw - x_raw.mean()) / x_raw.std()
    y = 3.0 * x + 2.0 + rng.standard_normal(n)
    return x, y


def eval_loss(x: Any, y: Any) -> Callable[[dict[str, float]], float]:
    """The loss on the full data set at ``{"w": ..., "b": ...}``: the seed's ``cost``, float64."""
    import numpy as np

    def loss(p: dict[str, float]) -> float:
        return float(np.mean((y - p["w"] * x - p["b"]) ** 2))

    return loss
