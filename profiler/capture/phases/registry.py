"""The phase table: name -> factory, in the fixed order a workload process runs them.

Later phases (sampled, lines, framework, hooks) add their rows here; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from profiler.capture.phases import Budget, Phase
from profiler.capture.phases.timed import TimedPhase
from profiler.model import PHASE_ORDER


def _sampled(budget: Budget, options: dict[str, Any]) -> Phase:
    from profiler.capture.phases.sampled import SampledPhase

    return SampledPhase(budget, options)


def _lines(budget: Budget, options: dict[str, Any]) -> Phase:
    from profiler.capture.phases.lines import LinesPhase

    return LinesPhase(budget, options)


def _framework(budget: Budget, options: dict[str, Any]) -> Phase:
    from profiler.capture.phases.framework import FrameworkPhase

    return FrameworkPhase(budget, options)


def _hooks(budget: Budget, options: dict[str, Any]) -> Phase:
    from profiler.capture.phases.hooks import HooksPhase

    return HooksPhase(budget, options)


def _whatif(budget: Budget, options: dict[str, Any]) -> Phase:
    from profiler.capture.phases.whatif import WhatIfPhase

    return WhatIfPhase(budget, options)


#: name -> (factory, default budget). The timed phase's steps come from the workload's params.
PHASES: dict[str, tuple[Callable[[Budget, dict[str, Any]], Phase], Budget]] = {
    "timed": (lambda b, _o: TimedPhase(b), Budget(target_s=1.0, min_steps=50, max_steps=10**7)),
    # ~1.5 s: ~150 samples at the default 100 Hz (profiler.capture.phases.sampled.DEFAULT_RATE_HZ).
    "sampled": (_sampled, Budget(target_s=1.5, min_steps=50, max_steps=10**6)),
    # ~0.5 s of steps (~0.8 s of wall: line_profiler makes traced Python lines ~1.6x slower);
    # a line table needs hits per line, not seconds.
    "lines": (_lines, Budget(target_s=0.5, min_steps=50, max_steps=10**5)),
    # ~120 KB of xplane per 200 TF1 steps; spans are kept for at most this window.
    "framework": (_framework, Budget(target_s=0.3, min_steps=20, max_steps=200)),
    # ~0.6 s plus the on/off blocks that measure the hooks' own cost.
    "hooks": (_hooks, Budget(target_s=0.6, min_steps=50, max_steps=1000)),
    # A short window; its alternating blocks of baseline and variant steps are extra steps.
    "whatif": (_whatif, Budget(target_s=0.01, min_steps=2, max_steps=5, rewarm=2)),
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
