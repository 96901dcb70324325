"""What a study declares, as records: the experiments' counterfactual pairs and the efficiency
comparison (the case study's are ``profiler.workloads.casestudy``), with the efficiency process's
checkpoint schedule and columns.

Place in the pipeline: read by the case study's declarations, by its measurement processes
(``profiler.capture.experiments``, ``profiler.capture.efficiency``) and by the analysis, so none
of them imports another's layer upwards.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Removal:
    """What a variant removes: a whole category, or one named part of it."""

    category: str
    part: str = ""

    @property
    def key(self) -> str:
        return f"{self.category}.{self.part}" if self.part else self.category


@dataclass(frozen=True)
class Pair:
    """A counterfactual pair: ``variant`` differs from ``baseline`` in exactly one respect.

    ``id`` keys the pair everywhere (its measured saving is the fact ``<id>_saving_us``);
    ``name`` is what people read. The declared pairs are the case study's
    (``profiler.workloads.casestudy.PAIRS``).
    """

    id: str
    name: str
    baseline: str
    variant: str
    removes: tuple[Removal, ...]
    claim: str


#: Seeds every implementation runs with (data, initialisation, batch draws, shuffles).
DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2)
#: The target: loss within this much of the noise floor (the best any line can do).
DEFAULT_TARGET_EXCESS = 0.1
#: What an implementation's printed loss is: the full-data cost (the seed prints ``cost(x, y,
#: w, b)``: the evaluation loss itself), fit's running mean over the epoch's batches, or none.
PRINTED_EVAL, PRINTED_RUNNING_MEAN, PRINTED_NONE = "eval", "running_mean", "none"


@dataclass(frozen=True)
class Implementation:
    """One training loop of the comparison (a registered workload)."""

    name: str
    printed: str
    role: str


@dataclass(frozen=True)
class Study:
    """What an efficiency comparison trains and compares (the case study's is
    ``profiler.workloads.casestudy.EFFICIENCY``).

    Attributes:
        implementations: the loops, in run order.
        causes: each cause isolated by a pair of implementations.
        diagnosed_pairs: (A, B) pairs the diagnoses are computed for.
        budgets: samples each implementation trains on, by name or else by framework.
        ref_samples, ref_updates: the "equal samples" and "equal updates" points.
    """

    implementations: tuple[Implementation, ...]
    causes: tuple[Cause, ...]
    diagnosed_pairs: tuple[tuple[str, str], ...]
    budgets: Mapping[str, int]
    ref_samples: int
    ref_updates: int


@dataclass(frozen=True)
class Cause:
    """A cause, isolated by a pair of implementations that differ only in it.

    ``present`` has the cause, ``removed`` has it fixed; a contribution is ``present``'s excess
    loss over ``removed``'s at the same work (above 1: the cause costs loss).
    """

    id: str
    label: str
    present: str
    removed: str


def schedule(budget: int, points: int, granularity: int, extra: Iterable[int] = ()) -> list[int]:
    """Checkpoint sample counts: ``points`` geometric steps from ``granularity`` to ``budget``.

    Every count is a multiple of ``granularity`` (the batch, so coverage is exact at each
    checkpoint), ``extra`` counts (reference points, epoch ends) are added, and the list ends at
    ``budget`` (rounded up to the granularity): sorted, without repeats, 0 not included.
    """
    if budget < granularity or granularity < 1:
        raise ValueError(f"budget {budget} must be at least one batch of {granularity}")
    end = -(-budget // granularity) * granularity

    def up(s: float) -> int:
        return max(granularity, -(-math.ceil(s) // granularity) * granularity)

    ratio = (end / granularity) ** (1 / max(points - 1, 1))
    grid = {up(granularity * ratio**i) for i in range(points)}
    grid.update(up(s) for s in extra if 0 < s <= end)
    grid.add(end)
    return sorted(s for s in grid if s <= end)


#: Checkpoint columns as the efficiency process writes them.
COLUMNS = (
    "samples",
    "updates",
    "epochs",
    "counter",
    "distinct",
    "distinct_epoch",
    "wall_ns",
    "loss",
)
