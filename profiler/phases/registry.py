"""The phase table: name -> factory, in the fixed order a workload process runs them.

Later phases (sampled, lines, framework, hooks) add their rows here; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profiler.model import PHASE_ORDER
from profiler.phases import Budget, Phase
from profiler.phases.timed import TimedPhase

#: name -> (factory, default budget). The timed phase's steps come from the workload's params.
PHASES: dict[str, tuple[Callable[[Budget, dict[str, Any]], Phase], Budget]] = {
    "timed": (lambda b, _o: TimedPhase(b), Budget(target_s=1.0, min_steps=50, max_steps=10**7)),
}

#: What runs when ``--phases`` is not given.
DEFAULT_PHASES: tuple[str, ...] = tuple(p for p in PHASE_ORDER if p in PHASES)


def available() -> list[str]:
    return [p for p in PHASE_ORDER if p in PHASES]


def make(name: str, options: dict[str, Any], steps: int | None = None) -> Phase:
    factory, budget = PHASES[name]
    if steps is not None:
        budget = Budget(budget.target_s, budget.min_steps, budget.max_steps, budget.rewarm, steps)
    return factory(budget, options)
