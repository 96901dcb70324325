"""What grows with the steps: the candidates for a memory growth's cause, read from a thread.

Place in the pipeline: inside the script process, called by ``profiler.capture.memory``'s
sampling thread every ``EVERY_S`` (never on the script's thread, never inside a step's code).
Each probe reads only what is cheap to read and names itself:

- **graphs**: TensorFlow's global default graph and every ``tf.Graph`` (or a session's graph)
  the script's names hold: its version (ops created so far). Ops created since the last probe
  are looked up (at most ``OPS_LOOKED_AT``): their type and the script's line that created them
  (the op's own creation traceback).
- **functions**: every ``tf.function`` the script's names hold (module globals, the locals of
  the script's running frames, one attribute deep): its tracing count.
- **containers**: every list, dict, set or deque the same names hold (one attribute deep): its
  length, and what its newest item is and holds (bytes: an array's or tensor's data and
  header, else ``sys.getsizeof``).
- **arrays**: every numpy array the same names hold: its bytes, followed by the name, not the
  object (``h = np.vstack([h, w])`` binds a new, larger array to ``h`` at every step).

The script's names are ``sys.modules['__main__']``'s globals and the frames of the main thread
that run the script's file. A whole-heap census (``gc.get_objects`` by type) was measured and
not chosen: 125-200 ms for the 293,000 objects of a small Keras process plus ~300 ms to count
them by type (load average 7 on 2 cores), a pause the script's steps would see; a probe here
reads a few hundred objects (``probe_cost_ns``, quoted in ``record``).
"""

from __future__ import annotations

import collections
import linecache
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from profiler.capture.memory_allocator import imported
from profiler.model.memory import ARRAY, CONTAINER, FUNCTION, GRAPH, Candidate, Causes, OpSite

#: Seconds between probes (the sampler thread's clock).
EVERY_S = 0.5
#: Points kept per candidate: beyond this, every other one is dropped (the span stays covered).
MAX_POINTS = 64
#: Candidates followed at most (the first found keep their place).
MAX_CANDIDATES = 300
#: New graph ops looked up per probe for their type and line.
OPS_LOOKED_AT = 16
#: Candidates kept in the record: those that grew most.
RECORD_TOP = 8

_CONTAINERS = (list, dict, set, collections.deque)


def _type_name(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def _is_graph(obj: Any) -> bool:
    return _type_name(obj) in (
        "tensorflow.python.framework.ops.Graph",
        "tensorflow.python.framework.func_graph.FuncGraph",
    )


def _is_session(obj: Any) -> bool:
    return _type_name(obj).startswith("tensorflow.python.client.session.")


def _is_array(obj: Any) -> bool:
    return _type_name(obj) == "numpy.ndarray"


def _is_function(obj: Any) -> bool:
    return hasattr(obj, "experimental_get_tracing_count") and hasattr(obj, "python_function")


#: The profiler's own source files (their frames are not the script's).
_OWN = str(Path(__file__).resolve().parents[1])


def main_file() -> str | None:
    """The script's file: ``sys.modules['__main__'].__file__``."""
    main = sys.modules.get("__main__")
    return getattr(main, "__file__", None)


def script_roots(script: str | None) -> Iterator[tuple[str, Any]]:
    """(name, object) for the script's globals (``sys.modules['__main__']``) and the locals of
    the main thread's frames that run ``script``'s functions (``main().x``)."""
    main = sys.modules.get("__main__")
    if main is not None:
        for k, v in list(vars(main).items()):
            if not k.startswith("__"):
                yield k, v
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    other = threading.current_thread() is not threading.main_thread()
    if other and frame is not None and frame.f_code.co_filename.startswith(_OWN):
        # The main thread in the profiler's own code (a partial trace written between two
        # steps): its frames' locals are not read then (a probe reading them while the main
        # thread serialised the trace died of a segmentation fault, CPython 3.11); the next
        # probe, 0.5 s later, reads them.
        return
    while frame is not None:
        code = frame.f_code
        if code.co_filename == script and code.co_name != "<module>":
            for k, v in list(frame.f_locals.items()):
                yield f"{code.co_name}().{k}", v
        frame = frame.f_back


def script_names(
    script: str | None,
    wanted: Callable[[Any], bool],
    descend: Callable[[Any], bool] | None = None,
) -> Iterator[tuple[str, Any]]:
    """The script's names (``script_roots``), each object once, and one attribute deep
    (``trainer.cache``): the attributes ``wanted`` takes, of the roots ``descend`` allows (all
    but modules, classes and functions; None: all of those)."""
    seen: set[int] = set()
    for name, obj in script_roots(script):
        if id(obj) in seen or isinstance(obj, type) or _type_name(obj) == "builtins.module":
            continue
        seen.add(id(obj))
        yield name, obj
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict) or isinstance(obj, types.FunctionType):
            continue
        if descend is not None and not descend(obj):
            continue
        for k, v in list(attrs.items())[:200]:
            if id(v) not in seen and wanted(v):
                seen.add(id(v))
                yield f"{name}.{k.lstrip('_')}", v


def item_bytes(obj: Any) -> tuple[str, int]:
    """What one kept item is (``a tf.Tensor float32 (1024, 1)``) and the bytes it holds."""
    size = sys.getsizeof(obj, 0)
    name = _type_name(obj)
    if name.startswith("numpy.") and hasattr(obj, "nbytes"):
        data = int(obj.nbytes) if getattr(obj, "base", None) is None else 0
        shape = tuple(getattr(obj, "shape", ()))
        own = size if size >= data else size + data
        return f"a numpy {obj.dtype} array {shape}", own
    if "EagerTensor" in name or name.endswith("ops.Tensor"):
        try:
            n = obj.shape.num_elements() or 0
            data = n * obj.dtype.size
            shape = tuple(obj.shape.as_list())
            return f"a tf.Tensor {obj.dtype.name} {shape}", size + data
        except (AttributeError, TypeError, ValueError):
            return "a tf.Tensor", size
    if isinstance(obj, (tuple, list)) and obj and len(obj) <= 16:
        parts = [item_bytes(x) for x in obj]
        return f"a {type(obj).__name__} of {parts[0][0]} ...", size + sum(b for _, b in parts)
    if isinstance(obj, dict) and obj and len(obj) <= 16:
        parts = [item_bytes(x) for x in obj.values()]
        return f"a dict of {parts[0][0]} ...", size + sum(b for _, b in parts)
    return f"a {type(obj).__qualname__}", size


def _newest(c: Any) -> Any:
    if isinstance(c, dict):
        return next(reversed(c.values()), None) if c else None
    if isinstance(c, (list, collections.deque)):
        return c[-1] if c else None
    return next(iter(c), None) if c else None


class Series:
    """One candidate's values at the steps it was probed, thinned to ``MAX_POINTS``."""

    __slots__ = ("every", "ident", "kind", "label", "points", "seen", "what")

    def __init__(self, kind: str, label: str, ident: int) -> None:
        self.kind = kind
        self.label = label
        self.ident = ident
        self.points: list[tuple[int, int]] = []
        self.every = 1
        self.seen = 0
        #: containers: (what the newest item is, its bytes); graphs: op type and line counts.
        self.what: Any = None

    def restart(self, ident: int) -> None:
        """The name now holds another object (a list made anew each step): start again."""
        self.ident, self.points, self.every, self.seen, self.what = ident, [], 1, 0, None

    def add(self, step: int, value: int) -> None:
        self.seen += 1
        if self.seen % self.every and self.points:
            self.points[-1] = (step, value)  # the newest always kept
            return
        self.points.append((step, value))
        if len(self.points) > MAX_POINTS:
            self.points = self.points[::2]
            self.every *= 2


class CauseProbe:
    """Follows the candidates; ``probe`` is called from the sampling thread.

    Args:
        script: the script's file (its frames and ops' creating lines are matched on it);
            None: ``sys.modules['__main__'].__file__`` at each probe.
    """

    def __init__(self, script: str | None = None) -> None:
        self.script = script
        self.series: dict[str, Series] = {}
        self.probes = 0
        self.cost_ns: list[int] = []
        self.errors = 0
        self._ops_seen: dict[int, int] = {}

    # --- roots ------------------------------------------------------------------------------

    def _script_file(self) -> str | None:
        return self.script or main_file()

    def _roots(self) -> Iterator[tuple[str, Any]]:
        """(name, object) for the script's globals and its running frames' locals."""
        return script_roots(self._script_file())

    def _candidates(self) -> Iterator[tuple[str, Any]]:
        """The roots and one attribute (or item of a small dict) deep."""

        def wanted(v: Any) -> bool:
            return isinstance(v, _CONTAINERS) or _is_function(v) or _is_graph(v) or _is_array(v)

        return script_names(self._script_file(), wanted)

    # --- the probe --------------------------------------------------------------------------

    def probe(self, step: int) -> None:
        """Read every candidate once (never raises: a failed read is counted)."""
        t0 = time.perf_counter_ns()
        try:
            self._probe(step)
        except Exception:  # a probe must never break the script or the sampler
            self.errors += 1
        self.probes += 1
        self.cost_ns.append(time.perf_counter_ns() - t0)

    def _follow(self, kind: str, label: str, obj: Any) -> Series | None:
        """The series of the name ``label`` (restarted when it holds another object); a graph's
        is its own (the default graph is another object inside ``with g.as_default()``)."""
        key = f"{kind}:{label}" if kind != GRAPH else f"{kind}:{id(obj)}"
        s = self.series.get(key)
        if s is None:
            if len(self.series) >= MAX_CANDIDATES:
                return None
            s = self.series[key] = Series(kind, label, id(obj))
        elif s.ident != id(obj) and kind != ARRAY:
            s.restart(id(obj))
        return s

    def _probe(self, step: int) -> None:
        graphs: dict[int, tuple[str, Any]] = {}
        tf = imported("tensorflow")
        if tf is not None:
            try:
                g = tf.compat.v1.get_default_graph()
                graphs[id(g)] = ("the default graph", g)
            except Exception:
                pass
        for name, obj in self._candidates():
            if isinstance(obj, _CONTAINERS):
                s = self._follow(CONTAINER, name, obj)
                if s is not None:
                    n = len(obj)
                    if s.what is None or (s.points and n > s.points[-1][1]):
                        newest = _newest(obj)
                        if newest is not None:
                            s.what = item_bytes(newest)
                    s.add(step, n)
            elif _is_array(obj):
                s = self._follow(ARRAY, name, obj)
                if s is not None:
                    s.what = item_bytes(obj)
                    s.add(step, int(obj.nbytes))
            elif _is_function(obj):
                s = self._follow(FUNCTION, name, obj)
                if s is not None:
                    s.add(step, int(obj.experimental_get_tracing_count()))
            elif _is_graph(obj) and id(obj) not in graphs:
                graphs[id(obj)] = (f"the graph `{name}`", obj)
            elif _is_session(obj):
                g = getattr(obj, "graph", None)
                if g is not None and id(g) not in graphs:
                    graphs[id(g)] = (f"the graph of session `{name}`", g)
        for gid, (label, g) in graphs.items():
            s = self._follow(GRAPH, label, g)
            if s is None:
                continue
            version = int(g.version)
            before = self._ops_seen.get(gid)
            self._ops_seen[gid] = version
            if before is not None and version > before:
                self._note_ops(s, g, before, version)
            s.add(step, version)

    def _note_ops(self, s: Series, g: Any, before: int, version: int) -> None:
        """The type and creating line of the newest ops (at most ``OPS_LOOKED_AT``)."""
        counts: collections.Counter[tuple[str, int | None, str]] = s.what or collections.Counter()
        nodes = getattr(g, "_nodes_by_id", {})
        script = self._script_file()
        for i in range(version, max(before, version - OPS_LOOKED_AT), -1):
            try:
                op = nodes[i]
            except (KeyError, IndexError, TypeError):
                continue
            line, text = None, ""
            for frame in reversed(list(getattr(op, "traceback", ()) or ())):
                if getattr(frame, "filename", None) == script:
                    line, text = frame.lineno, (getattr(frame, "line", "") or "").strip()
                    text = text or linecache.getline(script or "", line).strip()
                    break
            counts[(op.type, line, text[:120])] += 1
        s.what = counts

    # --- the record -------------------------------------------------------------------------

    def record(self) -> dict[str, Any]:
        """The candidates that grew most and the probes' cost (``profiler.model.memory``)."""
        grew = []
        for s in self.series.values():
            if len(s.points) < 2:
                continue
            rise = s.points[-1][1] - s.points[0][1]
            if rise <= 0:
                continue
            item, item_b = "", None
            ops: tuple[OpSite, ...] = ()
            if s.kind in (CONTAINER, ARRAY) and s.what is not None:
                item, item_b = s.what[0], int(s.what[1])
            if s.kind == GRAPH and s.what:
                ops = tuple(
                    OpSite(type=t, line=line, text=text, seen=n)
                    for (t, line, text), n in s.what.most_common(6)
                )
            c = Candidate(
                kind=s.kind,
                label=s.label,
                steps=tuple(p[0] for p in s.points),
                values=tuple(p[1] for p in s.points),
                item=item,
                item_bytes=item_b,
                ops=ops,
            )
            grew.append((rise, c))
        grew.sort(key=lambda r: -r[0])
        costs = sorted(self.cost_ns)
        return Causes(
            every_s=EVERY_S,
            probes=self.probes,
            errors=self.errors,
            probe_cost_ns=costs[len(costs) // 2] if costs else None,
            grew=tuple(c for _, c in grew[:RECORD_TOP]),
        ).to_json()


def probe_cost_ns(probe: Callable[[int], None], samples: int = 20) -> int:
    """The median cost of ``probe`` (ns), for the bench."""
    times = []
    for i in range(samples):
        t = time.perf_counter_ns()
        probe(i)
        times.append(time.perf_counter_ns() - t)
    times.sort()
    return times[len(times) // 2]
