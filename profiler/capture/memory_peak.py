"""What the script's names hold when resident memory peaks: a census of arrays and tensors.

Place in the pipeline: inside the script process, called by ``profiler.capture.memory``'s
sampling thread (never on the script's thread) when resident memory reached a new high
(``PeakWatch.due``: ``RISE_SHARE`` and ``RISE_BYTES`` above the last census', at most every
``MIN_GAP_S``), so the last census taken is the one nearest the peak; once after the script's
first step (what the names held then: the rest of the resident bytes before the first step is
the interpreter, the libraries and TensorFlow's runtime); and once at the script's end if
resident bytes are still a new high then (``PeakWatch.final``: a rise in the last 0.5 s).

The census walks the script's names as the cause probe does (``memory_causes.script_names``:
the main module's globals, the locals of the script's running frames, one attribute deep) and
counts what holds memory:

- a **numpy array**: its own data once (a view counts the array that owns its data, once
  across all names: ``x`` and ``x[::2]`` are one buffer);
- a **tf.Tensor** (eager): its elements times its dtype's size, and its Python object;
- a **tf.Variable** or Keras variable: the same;
- a **Keras model or layer**: its weights (``.weights``), and its optimizer's variables
  (``model.optimizer``: slots, step count) apart;
- a **Keras optimizer** of its own: its variables;
- a **list, tuple, dict, set or deque** of those (or of small tuples of them: ``(x, y)``
  batches): the sum, the count, one item; at most ``MAX_ITEMS`` items are looked at, spread
  evenly, and the sum is scaled to the length (the record says so: ``Holder.looked``).

Each buffer counts once, under the first name found holding it. The census reads only the
names' objects (a whole-heap walk costs 125-200 ms in a Keras process: ``memory_causes``); its
cost is kept in the record (``Census.cost_ns``). Measured on a Keras script (a 1.07 M-parameter
model with Adam, a 180 MB array, 2 cores shared): 0.3-0.6 ms a census with the model, 3.5-5.7
ms with a list of 3,000 scalar tensors besides; under the profiler 9-10 censuses a run, median
0.09-0.15 ms, the largest (the first step's, with the model) 0.9-1.0 ms.
"""

from __future__ import annotations

import collections
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from profiler.capture.memory_causes import main_file, script_names
from profiler.model.memory import (
    ARRAY,
    CONTAINER,
    MODEL,
    OPTIMIZER,
    TENSOR,
    VARIABLE,
    Census,
    Censuses,
    Holder,
)

#: A census is taken when resident bytes passed the last census' by this share ...
RISE_SHARE = 0.05
#: ... and by these bytes (a small process's 5% is noise of the allocator) ...
RISE_BYTES = 8 * 2**20
#: ... at most every this many seconds (the cause probe's period: ``memory_causes.EVERY_S``).
MIN_GAP_S = 0.5
#: Holders kept per census, largest first.
TOP = 8
#: Items of one container looked at (10,000 numpy arrays read in ~5 ms, scalar tf.Tensors in
#: ~12 ms on these machines: ~1.2 µs each).
MAX_ITEMS = 10_000
#: Frameworks whose runtime the resident bytes before the first step hold, where imported.
FRAMEWORKS = ("tensorflow", "keras", "torch", "jax")
#: Items of a small tuple/list/dict inside a container counted as one item (a batch ``(x, y)``).
SMALL = 16
_CONTAINERS = (list, tuple, dict, set, frozenset, collections.deque)


def _type_name(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def _mro_names(obj: Any) -> set[str]:
    """The classes ``obj`` is an instance of, as ``top-level package.class name``."""
    return {f"{c.__module__.split('.')[0]}.{c.__name__}" for c in type(obj).__mro__}


_FRAMEWORKS = ("keras.", "tf_keras.", "tensorflow.")


def _keras_kind(obj: Any) -> str | None:
    """``model`` for a Keras model or layer (the script's own subclasses too), ``optimizer``
    for a Keras (or TF1) optimizer, else None."""
    if isinstance(obj, (type, *_CONTAINERS)) or not hasattr(obj, "__dict__"):
        return None
    names = _mro_names(obj)
    if names & {"keras.Layer", "tf_keras.Layer", "tensorflow.Layer"} and hasattr(obj, "weights"):
        return MODEL
    is_opt = any(n.startswith(_FRAMEWORKS) and n.endswith("Optimizer") for n in names)
    if is_opt and hasattr(obj, "variables"):
        return OPTIMIZER
    return None


def _is_variable(obj: Any) -> bool:
    name = _type_name(obj)
    return "Variable" in type(obj).__name__ and (
        name.startswith(("tensorflow.", "keras.", "tf_keras."))
    )


def _is_tensor(obj: Any) -> bool:
    return "EagerTensor" in type(obj).__name__


def _dtype_size(dtype: Any) -> int:
    size = getattr(dtype, "size", None)
    if isinstance(size, int):
        return size
    np = sys.modules.get("numpy")
    try:
        return int(np.dtype(str(dtype)).itemsize) if np is not None else 0
    except TypeError:
        tf = sys.modules.get("tensorflow")
        return int(tf.as_dtype(str(dtype)).size) if tf is not None else 0


def _elements(shape: Any) -> int:
    n = 1
    for d in tuple(shape):
        d = getattr(d, "value", d)  # a TF1 Dimension
        n *= int(d or 0)
    return n


def _dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "name", dtype))


def _shape(shape: Any) -> tuple[int, ...]:
    return tuple(int(getattr(d, "value", d) or 0) for d in tuple(shape))


@dataclass
class _Count:
    """One census's state: the buffers counted so far (by id) and what failed."""

    seen: set[int] = field(default_factory=set)
    errors: int = 0
    #: A dtype's element size by TensorFlow's enum of it.
    dtype_sizes: dict[int, int] = field(default_factory=dict)

    def array(self, a: Any, np: Any) -> int:
        """The bytes of the data a numpy array's owner holds, once."""
        root = _owner(a, np)
        if id(root) in self.seen:
            return 0
        self.seen.add(id(root))
        return int(root.nbytes)

    def tensor(self, t: Any) -> int:
        if id(t) in self.seen:
            return 0
        self.seen.add(id(t))
        try:
            # An EagerTensor's own accessors: ~0.3 µs, where ``.shape`` and ``.dtype.size``
            # cost ~1.4 µs (3,000 scalar tensors read in 7 ms that way).
            shape, enum = t._shape_tuple(), t._datatype_enum()
        except AttributeError:
            return _elements(t.shape) * _dtype_size(t.dtype) + sys.getsizeof(t, 0)
        size = self.dtype_sizes.get(enum)
        if size is None:
            size = self.dtype_sizes[enum] = _dtype_size(t.dtype)
        return _elements(shape) * size + sys.getsizeof(t, 0)

    def variable(self, v: Any) -> int:
        if id(v) in self.seen:
            return 0
        self.seen.add(id(v))
        inner = v.__dict__.get("_value") if hasattr(v, "__dict__") else None
        if inner is not None:  # a Keras variable's tf.Variable: the same buffer
            self.seen.add(id(inner))
        return _elements(v.shape) * _dtype_size(v.dtype)

    def variables(self, vs: Iterable[Any]) -> tuple[int, int]:
        """The bytes of variables not counted yet, and their elements (all of them)."""
        total = elements = 0
        for v in vs:
            try:
                elements += _elements(v.shape)
                total += self.variable(v)
            except (AttributeError, TypeError, ValueError):
                self.errors += 1
        return total, elements

    def leaf(self, obj: Any, np: Any) -> tuple[str, int] | None:
        """(kind, bytes) of an array, tensor or variable; None: none of those."""
        if np is not None and isinstance(obj, np.ndarray):
            return ARRAY, self.array(obj, np)
        if _is_tensor(obj):
            return TENSOR, self.tensor(obj)
        if _is_variable(obj):
            return VARIABLE, self.variable(obj)
        return None

    def item(self, obj: Any, np: Any) -> int | None:
        """A container's item's bytes: a leaf, or a small tuple/list/dict of leaves (a
        batch); None: neither."""
        got = self.leaf(obj, np)
        if got is not None:
            return got[1]
        if isinstance(obj, (tuple, list, dict)) and 0 < len(obj) <= SMALL:
            parts = [self.leaf(x, np) for x in (obj.values() if isinstance(obj, dict) else obj)]
            found = [p[1] for p in parts if p is not None]
            return sum(found) if found else None
        return None


def _owner(a: Any, np: Any) -> Any:
    """The array whose data ``a`` views (``a`` itself if it owns its data)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def describe(obj: Any, np: Any) -> str:
    """``numpy float64 (60000, 784)``, ``tf.Tensor float32 ()``, ``tuple of numpy ...``."""
    if np is not None and isinstance(obj, np.ndarray):
        root = _owner(obj, np)
        if root is not obj and root.nbytes > obj.nbytes:
            # Its bytes are the array it views (what the name keeps alive), not its own: a
            # (9600, 784) slice of a (60000, 784) array read as 179 MB for 28.7 MB of data.
            return f"numpy {obj.dtype} {tuple(obj.shape)}, a view of {tuple(root.shape)}"
        return f"numpy {obj.dtype} {tuple(obj.shape)}"
    if _is_tensor(obj) or _is_variable(obj):
        kind = "tf.Tensor" if _is_tensor(obj) else "tf.Variable"
        return f"{kind} {_dtype_name(obj.dtype)} {_shape(obj.shape)}"
    if isinstance(obj, (tuple, list, dict)):
        items = obj.values() if isinstance(obj, dict) else obj
        inner = dict.fromkeys(describe(x, np) for x in items)
        inner.pop("", None)
        return f"{type(obj).__name__} of {', '.join(inner)}"
    return ""


def _items(c: Any) -> list[Any]:
    """At most ``MAX_ITEMS`` of a container's items, spread evenly (a dict's values); one C
    call each (the script's thread cannot change them meanwhile)."""
    n = len(c)
    step = -(-n // MAX_ITEMS) if n > MAX_ITEMS else 1
    if isinstance(c, (list, tuple)):
        return list(c[::step])
    values = list(c.values()) if isinstance(c, dict) else list(c)
    return values[::step]


def holder(name: str, obj: Any, count: _Count, np: Any) -> Holder | None:
    """What ``obj`` (the script's ``name``) holds; None: no array, tensor or model."""
    leaf = count.leaf(obj, np)
    if leaf is not None:
        return Holder(name=name, kind=leaf[0], what=describe(obj, np), bytes=leaf[1], count=1)
    keras = _keras_kind(obj)
    if keras == MODEL:
        b, params = count.variables(list(obj.weights))
        opt_b = None
        opt = getattr(obj, "optimizer", None)
        if opt is not None and _keras_kind(opt) == OPTIMIZER:
            opt_b = count.variables(_optimizer_variables(opt))[0]
        return Holder(
            name=name,
            kind=MODEL,
            what=type(obj).__name__,
            bytes=b,
            count=params,
            optimizer_bytes=opt_b,
        )
    if keras == OPTIMIZER:
        b, params = count.variables(_optimizer_variables(obj))
        return Holder(name=name, kind=OPTIMIZER, what=type(obj).__name__, bytes=b, count=params)
    if isinstance(obj, _CONTAINERS) and len(obj):
        n = len(obj)
        items = _items(obj)
        total, largest, big = 0, None, -1
        sizes: list[int] = []
        kinds: dict[str, None] = {}
        for x in items:
            got = count.item(x, np)
            if got is not None:
                total += got
                sizes.append(got)
                kinds[describe(x, np)] = None
                if got > big:
                    largest, big = x, got
        if largest is None:
            return None
        # Items of one description read as that; others by their largest (a TF1 Saver's
        # var_list read "27 tf.Variable int32_ref ()" after its first, the global step).
        item = describe(largest, np)
        if len(kinds) > 1:
            item = f"items, the largest {item}"
        if len(items) < n:
            # The items not looked at at the looked-at items' median: items that are views of
            # one array count it once (the first), and scaling the sum by the length counted
            # a 157 MB array 2.5 times (451 MB "held" in a 223 MB process).
            sizes.sort()
            total += sizes[len(sizes) // 2] * (n - len(items))
        return Holder(
            name=name,
            kind=CONTAINER,
            what=type(obj).__name__,
            bytes=total + sys.getsizeof(obj),
            count=n,
            item=item,
            looked=len(items),
        )
    return None


def _optimizer_variables(opt: Any) -> list[Any]:
    vs = getattr(opt, "variables", ())
    if callable(vs):  # tf.keras 2's optimizers: a method
        vs = vs()
    return list(vs)


def _wanted(v: Any) -> bool:
    """An attribute worth a look (one attribute deep): arrays, tensors, variables, models,
    optimizers and containers."""
    if isinstance(v, _CONTAINERS):
        return True
    np = sys.modules.get("numpy")
    if np is not None and isinstance(v, np.ndarray):
        return True
    return _is_tensor(v) or _is_variable(v) or _keras_kind(v) is not None


def _descend(obj: Any) -> bool:
    """A model's attributes are its layers and weights, counted as the model's; a variable's
    or tensor's are its own buffer."""
    if _is_tensor(obj) or _is_variable(obj):
        return False
    return _keras_kind(obj) is None and not isinstance(obj, _CONTAINERS)


def _models_first(pairs: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The names in the order they are counted: Keras models and layers first, those with the
    most weights first, so a model's weights count under the model and not under a layer a
    global also names (the mixed precision guide's `dense1 = layers.Dense(4096)`, named before
    `model`: "`model`: Functional, 20.0 M parameters in weights, 160.0 KB", its 64 MB under
    `dense2`); then the rest, in the order found."""
    got = list(pairs)

    def weights(obj: Any) -> int:
        try:
            return len(obj.weights) if _keras_kind(obj) == MODEL else -1
        except Exception:  # an odd layer: counted where it comes
            return -1

    keyed = [(weights(obj), i, name, obj) for i, (name, obj) in enumerate(got)]
    keyed.sort(key=lambda k: (-k[0] if k[0] >= 0 else 1, k[1]))
    return [(name, obj) for _, _, name, obj in keyed]


def census(t_ns: int, step: int, rss: int, script: str | None = None, top: int = TOP) -> Census:
    """What the script's names hold now (see the module docstring); never raises for one
    name's failure (counted in ``errors``)."""
    t0 = time.thread_time_ns()
    np = sys.modules.get("numpy")
    count = _Count()
    found: list[Holder] = []
    names = 0
    for name, obj in _models_first(script_names(script or main_file(), _wanted, _descend)):
        names += 1
        try:
            h = holder(name, obj, count, np)
        except Exception:  # one odd object must not lose the census
            count.errors += 1
            continue
        if h is not None and (h.bytes > 0 or h.optimizer_bytes):
            found.append(h)
    found.sort(key=lambda h: -(h.bytes + (h.optimizer_bytes or 0)))
    return Census(
        t_ns=t_ns,
        step=step,
        rss_bytes=rss,
        held_bytes=sum(h.bytes + (h.optimizer_bytes or 0) for h in found),
        holders=tuple(found[:top]),
        found=len(found),
        names=names,
        cost_ns=time.thread_time_ns() - t0,
        errors=count.errors,
    )


class PeakWatch:
    """Takes the censuses from the sampling thread: ``sample`` is called with every sample.

    Args:
        script: the script's file (its frames' locals are its names); None: ``__main__``'s.
        take: the census function (the tests pass their own).
    """

    def __init__(
        self, script: str | None = None, take: Callable[..., Census] | None = None
    ) -> None:
        self.script = script
        self.take = take or census
        self.peak: Census | None = None
        self.start: Census | None = None
        self.before_steps: int | None = None
        self.frameworks: tuple[str, ...] = ()
        self.costs: list[int] = []
        self.errors = 0
        #: Censuses dropped: the script's state changed while they were taken.
        self.dropped = 0
        self._last_at = -1e18

    def due(self, rss: int, now: float) -> bool:
        """A new high: ``RISE_SHARE`` and ``RISE_BYTES`` above the last census', and
        ``MIN_GAP_S`` since it."""
        if now - self._last_at < MIN_GAP_S:
            return False
        last = self.peak.rss_bytes if self.peak is not None else 0
        return rss >= last * (1 + RISE_SHARE) and rss - last >= RISE_BYTES

    def sample(
        self, t_ns: int, rss: int, step: int, now: float, still: Callable[[], bool] | None = None
    ) -> bool:
        """Note one sample; take a census when due. True: a census was taken. ``still``: whether
        the script's state is still the one the census began in (a what-if's variant switched
        on meanwhile rebinds its arrays: a census walking a 1.7 GB data set read the float32
        what-if's arrays as the script's); a census it denies is dropped."""
        if step == 0:
            self.before_steps = rss
        first = step > 0 and self.start is None
        if not first and not self.due(rss, now):
            return False
        return self._take(t_ns, rss, step, now, first, still)

    def final(self, t_ns: int, rss: int, step: int, now: float) -> bool:
        """At the script's end (its globals still hold what they held): one more census if
        resident bytes are still a new high (within ``MIN_GAP_S`` of the last census, a rise
        at the run's end would otherwise go without one)."""
        self._last_at = -1e18
        return self.due(rss, now) and self._take(t_ns, rss, step, now, False)

    def _take(
        self,
        t_ns: int,
        rss: int,
        step: int,
        now: float,
        first: bool,
        still: Callable[[], bool] | None = None,
    ) -> bool:
        try:
            c = self.take(t_ns, step, rss, self.script)
        except Exception:  # the sampler must never break
            self.errors += 1
            return False
        if still is not None and not still():
            self.dropped += 1
            return False
        self._last_at = now
        self.costs.append(c.cost_ns)
        if first:
            self.start = c
            self.frameworks = tuple(f for f in FRAMEWORKS if f in sys.modules)
        # The census nearest the peak: the one at the highest resident size (the start census
        # too, when it is the highest yet).
        if self.peak is None or rss >= self.peak.rss_bytes:
            self.peak = c
        return True

    def record(self) -> dict[str, Any]:
        """The script record's ``memory.census`` (``profiler.model.memory.Censuses``)."""
        costs = sorted(self.costs)
        return Censuses(
            peak=self.peak,
            start=self.start,
            before_steps_bytes=self.before_steps if self.start is not None else None,
            taken=len(costs),
            cost_ns=costs[len(costs) // 2] if costs else None,
            max_cost_ns=costs[-1] if costs else None,
            frameworks=self.frameworks,
        ).to_json()
