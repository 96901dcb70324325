"""A what-if's variant, as the builders of ``profiler.capture.whatifs`` and
``profiler.capture.whatifs_data`` return it, and the one-line error a variant records.

Place in the pipeline: the script process. Its own module so both builders' modules import it and
neither imports the other at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Variant:
    """One applicable what-if (see ``profiler.capture.whatifs``); ``errors`` collects what the
    variant raised (it is then off, and the step ran as written)."""

    id: str
    title: str
    removes: tuple[str, ...]
    keeps_results: bool
    results_note: str
    on: Callable[[], None]
    off: Callable[[], None]
    errors: list[str] = field(default_factory=list)
    #: How the results were checked to stay the same, with the figures ("" if not checked).
    check: str = ""
    #: The share of ``removes`` it removes, and the steps it runs as one (``WhatIfResult``).
    share: float = 1.0
    group: int = 1
    #: Each block's figure is its mean step, not its median: a fix whose effect is in the slow
    #: steps (BLAS threads waiting for each other on a busy machine's cores).
    block_mean: bool = False
    #: Whether it is fully off (a group cut short finishes its calls first).
    settled: Callable[[], bool] = lambda: True


def error_line(exc: BaseException) -> str:
    """One line: the exception's type and what it says (a graph error's traceback, headed
    "in user code:", ends with the message itself)."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    said = (lines[-1] if lines[0].endswith(":") else lines[0]) if lines else ""
    name = type(exc).__name__
    # A graph error's last line names its type already ("ValueError: Cannot convert ...").
    if said.startswith(f"{name}: "):
        said = said[len(name) + 2 :]
    return f"{name}: {said[:200]}"
