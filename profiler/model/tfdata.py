"""What a tf.data pipeline's stages say, read the same way by the measured process and the
diagnoses: ``caches_after_map`` (a map whose result a cache after it keeps)."""

from __future__ import annotations

from collections.abc import Sequence

#: A fit of at least this many epochs whose pipeline caches after a map warms up through its
#: first epoch (the cache fills there; ``profiler.capture.script.schedule``), and its first
#: epoch's excess is named (``profiler.diagnoses.input``'s ``cache_fill``).
CACHE_EPOCHS = 3


def caches_after_map(kinds: Sequence[str]) -> bool:
    """Whether the stages (source first) hold a map before their last ``cache``."""
    if "cache" not in kinds:
        return False
    last = len(kinds) - 1 - list(kinds)[::-1].index("cache")
    return "map" in kinds[:last]
