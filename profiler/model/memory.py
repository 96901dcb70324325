"""The memory record's candidates for a growth's cause, and what the script's names held near
the peak, as the script process writes them.

Part of the trace model: frozen records, written by ``profiler.capture.memory_causes`` into the
script record's ``memory.causes`` (``to_json``) and by ``profiler.capture.memory_peak`` into its
``memory.census`` (``Census``), read back by ``profiler.analysis.memory`` (``from_json``).
Imports nothing of the project's but the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiler.model.trace import from_jsonable, to_jsonable

#: A candidate's kinds: a TF graph's ops, a tf.function's traces, a container's items.
GRAPH, FUNCTION, CONTAINER = "graph", "function", "container"
#: A numpy array the same name holds, made anew larger each step (``h = np.vstack([h, w])``).
ARRAY = "array"


@dataclass(frozen=True, slots=True)
class OpSite:
    """New ops of one type created at one line of the script (``line`` None: not the
    script's own line), and how many of the ops looked at were these."""

    type: str
    line: int | None
    text: str
    seen: int


@dataclass(frozen=True, slots=True)
class Candidate:
    """Something that grew over the run, at the steps it was read.

    Attributes:
        kind: ``graph`` (values: the graph's version, ops created), ``function`` (its tracing
            count), ``container`` (its length) or ``array`` (its bytes).
        label: the script's name for it (``history``, ``main().losses``, ``the default graph``).
        steps, values: the steps done at each read and the value then.
        item, item_bytes: a container's newest item, and the bytes it holds (an array: itself).
        ops: a graph's new ops by type and creating line, most seen first.
    """

    kind: str
    label: str
    steps: tuple[int, ...]
    values: tuple[int, ...]
    item: str = ""
    item_bytes: int | None = None
    ops: tuple[OpSite, ...] = ()


@dataclass(frozen=True, slots=True)
class Causes:
    """The probes of a run: how often, what one cost, and what grew most."""

    every_s: float
    probes: int
    errors: int
    probe_cost_ns: int | None
    grew: tuple[Candidate, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return dict(to_jsonable(self))

    @staticmethod
    def from_json(data: Any) -> Causes | None:
        if not isinstance(data, dict) or "probes" not in data:
            return None
        return from_jsonable(Causes, data)  # type: ignore[no-any-return]


#: A holder's kinds: a numpy array, a tf.Tensor, a tf.Variable, a Keras model or layer (its
#: weights; ``Holder.optimizer_bytes`` its optimizer's variables), a Keras optimizer, a
#: list/tuple/dict/set/deque of those.
ARRAY, TENSOR, VARIABLE, MODEL, OPTIMIZER = "array", "tensor", "variable", "model", "optimizer"


@dataclass(frozen=True, slots=True)
class Holder:
    """One of the script's names and the bytes of arrays and tensors it holds.

    Attributes:
        name: the script's name (``x_train``, ``main().batches``, ``trainer.cache``).
        kind: ``array``, ``tensor``, ``variable``, ``model``, ``optimizer`` or ``container``.
        what: what it is (``numpy float64 (60000, 784)``, ``list``, ``Sequential``).
        bytes: the bytes it holds that no name before it held (an array's own data once, a
            model's weights, a container's items and its own pointers); a capped container's
            is its looked-at items' bytes scaled to its length.
        count: a container's items, a model's parameters (elements of its weights).
        item: a container's items (``tf.Tensor float32 ()``), or ``items, the largest ...``
            where they differ.
        looked: the items looked at (a container; fewer than ``count`` when capped).
        optimizer_bytes: a model's optimizer's variables (``model.optimizer``), None: none.
    """

    name: str
    kind: str
    what: str
    bytes: int
    count: int = 0
    item: str = ""
    looked: int = 0
    optimizer_bytes: int | None = None

    @property
    def capped(self) -> bool:
        return self.kind == CONTAINER and self.looked < self.count


@dataclass(frozen=True, slots=True)
class Census:
    """What the script's names held at one moment (``profiler.capture.memory_peak``).

    Attributes:
        t_ns, step, rss_bytes: when (the run's clock, the steps done) and the resident bytes.
        held_bytes: the bytes all the holders found held (not only the top ones kept).
        holders: the largest holders, largest first (at most ``memory_peak.TOP``).
        found: the holders found; names: the names looked at.
        cost_ns: the census's cost (ns of the sampling thread's CPU time: it holds the GIL).
        errors: holders whose reading failed (skipped).
    """

    t_ns: int
    step: int
    rss_bytes: int
    held_bytes: int
    holders: tuple[Holder, ...]
    found: int
    names: int
    cost_ns: int
    errors: int = 0


@dataclass(frozen=True, slots=True)
class Censuses:
    """The script record's ``memory.census``: the census nearest the peak, the one at the
    first step, and the resident bytes before it.

    Attributes:
        peak: the last census taken on a new high of resident memory (the nearest the peak).
        start: the census at the first sample after the script's first step.
        before_steps_bytes: resident bytes at the last sample before the first step (the
            interpreter, the imported libraries and TensorFlow's runtime, and what the script
            built before its loop); None: no sample then.
        taken: censuses taken; cost_ns: their median cost (ns), max_cost_ns: the largest.
        frameworks: the heavy frameworks imported at the first step (``tensorflow``, ...).
    """

    peak: Census | None
    start: Census | None
    before_steps_bytes: int | None
    taken: int
    cost_ns: int | None
    max_cost_ns: int | None
    frameworks: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return dict(to_jsonable(self))

    @staticmethod
    def from_json(data: Any) -> Censuses | None:
        if not isinstance(data, dict) or "taken" not in data:
            return None
        return from_jsonable(Censuses, data)  # type: ignore[no-any-return]
