"""The structure of the tf.data pipelines a script iterates: what feeds its steps.

Place in the pipeline: ``DatasetV2.__iter__`` is wrapped when ``dataset_ops`` is imported
(``profiler.capture.script.detect.Patches``); each dataset the script's own thread iterates is
described once (``describe``: a walk of its ``_inputs()``, a few µs) and counted at every
iteration (an epoch of ``fit`` or of a ``for`` loop). The descriptions go to the script's
record (``script.pipelines``), where the input-bound finding reads what the pipeline lacks:
a parallel map, a cache after an expensive map, a prefetch at its end.

Every read of a dataset's private attributes is guarded: another TensorFlow version gives a
shorter description, never an error in the user's script.
"""

from __future__ import annotations

import inspect
import re
import weakref
from dataclasses import dataclass, field
from typing import Any

from profiler.model import AUTOGRAPH_FILE
from profiler.model.tfdata import KERAS_MAKERS

#: Datasets described per script; later ones are counted under ``others``.
MAX_PIPELINES = 4
#: Stages walked per pipeline (a pipeline is a chain; zips and interleaves branch).
MAX_STAGES = 40

#: Dataset classes by the stage they are (``_ParallelMapDataset`` -> ``map``).
_KINDS = {
    "_MapDataset": "map",
    "_ParallelMapDataset": "map",
    "ParallelMapDataset": "map",
    "MapDataset": "map",
    "_BatchDataset": "batch",
    "BatchDataset": "batch",
    "_ParallelBatchDataset": "batch",
    "_PaddedBatchDataset": "padded_batch",
    "_PrefetchDataset": "prefetch",
    "PrefetchDataset": "prefetch",
    "CacheDataset": "cache",
    "_CacheDataset": "cache",
    "_MemoryCacheDataset": "cache",
    "_ShuffleDataset": "shuffle",
    "ShuffleDataset": "shuffle",
    "_RepeatDataset": "repeat",
    "RepeatDataset": "repeat",
    "_TakeDataset": "take",
    "_SkipDataset": "skip",
    "_FilterDataset": "filter",
    "_UnbatchDataset": "unbatch",
    "_InterleaveDataset": "interleave",
    "_ParallelInterleaveDataset": "interleave",
    "_FlatMapDataset": "flat_map",
    "_TensorSliceDataset": "from_tensor_slices",
    "TensorSliceDataset": "from_tensor_slices",
    "_TensorDataset": "from_tensors",
    "_RangeDataset": "range",
    "_ZipDataset": "zip",
    "_ConcatenateDataset": "concatenate",
    "TFRecordDatasetV2": "tfrecord",
    "_TFRecordDataset": "tfrecord",
    "TextLineDatasetV2": "text_line",
    "_OptionsDataset": "options",
    "_PrefetchToDeviceDataset": "prefetch",
}
#: Ops in a map function that run Python (they hold the GIL: parallel calls barely overlap).
PY_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})
#: Ops in a map function whose result changes per call (a cache would freeze them).
RANDOM_OPS = frozenset(
    {
        "RandomUniform",
        "RandomUniformInt",
        "RandomStandardNormal",
        "TruncatedNormal",
        "RandomShuffle",
        "Multinomial",
        "RandomGamma",
        "RandomPoisson",
        "RandomPoissonV2",
        "StatelessRandomUniformV2",
        "StatelessRandomNormalV2",
        "StatelessRandomUniformIntV2",
        "StatelessRandomGetKeyCounter",
        "RngReadAndSkip",
        "RngBitGenerator",
        "StatefulUniform",
        "StatefulStandardNormalV2",
        "StatefulUniformInt",
        "AnonymousSeedGenerator",
        "RandomIndexShuffle",
    }
)


@dataclass
class Stage:
    """One transformation of a pipeline, from its source to the iterator.

    Attributes:
        kind: ``map``, ``batch``, ``prefetch``, ``cache``, ``from_tensor_slices`` ... (the
            dataset's class name where it is not known).
        parallel: a map's ``num_parallel_calls`` (``AUTOTUNE``, a number; "" when serial).
        function: a map's Python function (``name (file:line)``), "" when unknown.
        python: the map's function calls Python (``tf.py_function``, ``tf.numpy_function``):
            the Python it runs (``name (file:line)``), or ``(unknown)``.
        random: the map's function draws random numbers (an augmentation).
        detail: a batch's size, a shuffle's or prefetch's buffer; a cache's ``memory`` or
            ``file``.
        library: a map's function is an installed package's (Keras's
            ``timeseries_dataset_from_array`` maps with its own lambda): the script cannot
            change that stage, only the dataset it is given.
        element_bytes: a map's output element in bytes, where its shapes are all known (0:
            unknown); ``elements``: the map's elements an epoch, where tf.data knows (0: not).
    """

    kind: str
    parallel: str = ""
    function: str = ""
    python: str = ""
    random: bool = False
    detail: str = ""
    library: bool = False
    element_bytes: int = 0
    elements: int = 0

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v not in ("", False)} | {"kind": self.kind}


@dataclass
class Pipeline:
    """One dataset the script iterated: its stages (source first) and how often.

    ``auto_prefetch``/``auto_parallel``: whether tf.data's default optimisations apply to it
    (TensorFlow >= 2.12, not switched off in its options): a prefetch injected after a last
    synchronous stage, stateless maps run in parallel. None: not known.
    """

    stages: list[Stage]
    iterations: int = 0
    auto_prefetch: bool | None = None
    auto_parallel: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "iterations": self.iterations,
            "stages": [s.to_json() for s in self.stages],
            "auto_prefetch": self.auto_prefetch,
            "auto_parallel": self.auto_parallel,
        }


@dataclass
class Pipelines:
    """The datasets iterated, by id (a weak reference each: a freed dataset's id is reused)."""

    seen: dict[int, tuple[Any, Pipeline]] = field(default_factory=dict)
    others: int = 0
    #: Each dataset's latest iterator, by the dataset's id (weak references): the one the
    #: loop reads, for the tf.data what-ifs (``profiler.capture.whatifs_data``).
    iterators: dict[int, Any] = field(default_factory=dict)
    #: A dataset is being described (its iterations are the recorder's own).
    describing: bool = False

    def iterator(self, ds: Any, it: Any) -> None:
        """Record ``it``, just made by iterating ``ds``."""
        if self.describing:
            return
        try:
            self.iterators[id(ds)] = weakref.ref(it)
        except TypeError:
            pass

    def current(self) -> tuple[Any, Pipeline, Any] | None:
        """(dataset, its description, its latest iterator) of the most iterated dataset whose
        iterator is still alive, or None."""
        for key, (ref, pipe) in sorted(self.seen.items(), key=lambda e: -e[1][1].iterations):
            ds, it_ref = ref(), self.iterators.get(key)
            it = it_ref() if it_ref is not None else None
            if ds is not None and it is not None:
                return ds, pipe, it
        return None

    def iterated(self, ds: Any) -> None:
        """Count one iteration of ``ds`` (describing it the first time). Not while describing
        one: reading a map's first element iterates a dataset of its own (the weather
        example's, each read describing another: 142 "pipelines" and 10 s before the first
        step)."""
        if self.describing:
            return
        entry = self.seen.get(id(ds))
        if entry is not None and entry[0]() is ds:
            entry[1].iterations += 1
            return
        if len(self.seen) >= MAX_PIPELINES:
            # A pipeline gone since (a FeatureSpace's adapt iterates one per feature and drops
            # it) makes room: the training's own, iterated later, was left out of the four).
            dead = next((k for k, (r, _p) in self.seen.items() if r() is None), None)
            if dead is None:
                self.others += 1
                return
            del self.seen[dead]
            self.others += 1
        try:
            ref = weakref.ref(ds)
        except TypeError:
            return
        self.describing = True
        try:
            pipe = Pipeline(describe(ds), 1)
        finally:
            self.describing = False
        pipe.auto_prefetch, pipe.auto_parallel = defaults(ds)
        self.seen[id(ds)] = (ref, pipe)

    def to_json(self) -> list[dict[str, Any]]:
        out = [p.to_json() for _, p in sorted(self.seen.values(), key=lambda e: -e[1].iterations)]
        return out


def describe(ds: Any) -> list[Stage]:
    """The stages from the source to ``ds`` (the first input of each, where it branches)."""
    chain: list[Stage] = []
    node = ds
    while node is not None and len(chain) < MAX_STAGES:
        chain.append(_stage(node))
        try:
            inputs = list(node._inputs())
        except Exception:  # a dataset without the private API: the chain ends here
            break
        node = inputs[0] if inputs else None
    chain.reverse()
    if len(chain) > 1 and chain[1].kind == "from_generator" and chain[0].kind == "from_tensors":
        del chain[0]  # from_generator's own seed
    return [s for s in chain if s.kind != "options"]


#: The TensorFlow release whose tf.data inserts a prefetch and parallelises stateless maps by
#: default (``OptimizationOptions``: inject_prefetch, map_parallelization "defaults to True").
AUTO_SINCE = (2, 12)


def defaults(ds: Any) -> tuple[bool | None, bool | None]:
    """(prefetch injected, stateless maps parallelised) by tf.data's default optimisations."""
    try:
        import tensorflow as tf

        major, minor = (int(p) for p in tf.__version__.split(".")[:2])
        opt = ds.options().experimental_optimization
    except Exception:
        return None, None
    if (major, minor) < AUTO_SINCE or opt.apply_default_optimizations is False:
        return False, False
    return opt.inject_prefetch is not False, opt.map_parallelization is not False


def _stage(node: Any) -> Stage:
    name = type(node).__name__
    stage = Stage(_KINDS.get(name, name))
    try:
        if stage.kind in ("batch", "padded_batch"):
            stage.detail = str(int(node._batch_size))
        elif stage.kind in ("prefetch", "shuffle"):
            size = int(node._buffer_size)
            stage.detail = "AUTOTUNE" if size == -1 else str(size)
        elif stage.kind == "cache":
            # Its file name, a string tensor: empty for a cache in memory.
            stage.detail = "file" if bytes(node._filename.numpy()) else "memory"
        if stage.kind in ("map", "interleave", "flat_map", "filter"):
            calls = getattr(node, "_num_parallel_calls", None)
            if calls is not None:
                n = int(calls)
                stage.parallel = "AUTOTUNE" if n == -1 else ("" if n == 1 else str(n))
            _function(node, stage)
    except Exception:  # best effort: a private attribute another version lacks
        pass
    if stage.kind == "map":
        module = stage.function.rsplit("(", 1)[-1].split(":", 1)[0]
        stage.element_bytes, stage.elements = _size(node, module in KERAS_MAKERS)
    if stage.kind == "flat_map" and stage.function.startswith("generator"):
        stage.kind = "from_generator"
    return stage


def _size(node: Any, read: bool = False) -> tuple[int, int]:
    """(bytes of one element, elements an epoch) of a dataset, 0 where either is unknown (a
    dimension or the count not known before it runs, strings): what a cache after it keeps.
    With ``read`` (a map of one of ``KERAS_MAKERS``: Keras's windows of a time series, shaped
    (None, 7) in its spec) its first element is read, where no shuffle comes before it: the
    function is the library's, deterministic and without the script's side effects."""
    import tensorflow as tf

    size = 0
    try:
        specs = tf.nest.flatten(node.element_spec)
        for spec in specs:
            shape, dtype = getattr(spec, "shape", None), getattr(spec, "dtype", None)
            if shape is None or dtype is None or dtype == tf.string:
                return 0, 0
            if not shape.is_fully_defined():
                if not read or _shuffled(node):
                    return 0, 0
                first = node.take(1).get_single_element()
                size = sum(int(t.numpy().nbytes) for t in tf.nest.flatten(first))
                break
            size += int(shape.num_elements()) * int(dtype.size)
    except Exception:  # a dataset without a spec, or that cannot give an element
        return 0, 0
    try:
        count = int(node.cardinality())
    except Exception:  # a dataset that cannot say
        count = 0
    return size, max(count, 0)


def _shuffled(node: Any) -> bool:
    """Whether a shuffle comes before ``node`` (its first element would fill the buffer)."""
    seen = 0
    while node is not None and seen < MAX_STAGES:
        if type(node).__name__ in ("ShuffleDataset", "_ShuffleDataset"):
            return True
        try:
            inputs = list(node._inputs())
        except Exception:  # a dataset without the private API: assume the worst
            return True
        node, seen = (inputs[0] if inputs else None), seen + 1
    return False


def _function(node: Any, stage: Stage) -> None:
    """A map's Python function, and whether its graph runs Python or draws random numbers."""
    wrapper = getattr(node, "_map_func", None) or getattr(node, "_predicate", None)
    if wrapper is None:
        return
    func = getattr(wrapper, "_func", None)
    func = inspect.unwrap(func) if callable(func) else func
    stage.function = _where(func)
    stage.library = "-packages/" in getattr(getattr(func, "__code__", None), "co_filename", "")
    fn = wrapper.function
    nodes = list(fn.function_def.node_def)
    for sub in getattr(fn.graph, "_functions", {}).values():
        try:
            nodes.extend(sub.definition.node_def)
        except AttributeError:
            continue
    ops = {n.op for n in nodes}
    if "GeneratorDataset" in ops:
        stage.function = "generator"
    stage.random = bool(ops & RANDOM_OPS)
    for n in nodes:
        if n.op in PY_OPS:
            fn = _py_func(n.attr["token"].s.decode())
            stage.python = _where(fn) or "(unknown)"
            # numpy's or Python's random numbers inside the Python function are no graph op.
            stage.random = stage.random or _draws_random(fn)
            break


#: The most concrete functions of one tf.function read for their Python calls.
MAX_CONCRETE = 8


def py_calls(function: Any) -> list[str]:
    """The Python functions a ``tf.function``'s traced graphs call through ``tf.py_function``
    or ``tf.numpy_function`` (``name (file:line)``, in graph order, each once): Python that runs
    inside every call of the step, holding the GIL (a numpy AUC metric in a custom train step:
    31% of the step, measured without the profiler). [] where none or not readable."""
    try:
        concrete = list(function._list_all_concrete_functions())[:MAX_CONCRETE]
    except Exception:
        return []
    out: list[str] = []
    for cf in concrete:
        try:
            nodes = [(op.type, op) for op in cf.graph.get_operations()]
            for sub in getattr(cf.graph, "_functions", {}).values():
                nodes.extend((n.op, n) for n in sub.definition.node_def)
        except Exception:
            continue
        for kind, node in nodes:
            if kind not in PY_OPS:
                continue
            try:
                token = node.get_attr("token") if hasattr(node, "get_attr") else None
                token = token if token is not None else node.attr["token"].s
                where = _where(_py_func(token.decode())) or "(unknown)"
            except Exception:
                where = "(unknown)"
            if where not in out:
                out.append(where)
    return out


def _py_func(token: str) -> Any:
    """The Python function a ``py_function``'s token names (TensorFlow's registry)."""
    try:
        from tensorflow.python.ops import script_ops

        fn = script_ops._py_funcs._funcs.get(token)
    except Exception:
        return None
    fn = inspect.unwrap(getattr(fn, "_func", fn))
    owner = getattr(fn, "__self__", None)
    if owner is not None and hasattr(owner, "_generator"):  # from_generator's state
        fn = inspect.unwrap(owner._generator)
    return fn


#: Names that draw random numbers in Python code (numpy's, the random module's, scipy's).
RANDOM_NAMES = frozenset(
    {"random", "rand", "randn", "randint", "uniform", "normal", "choice", "shuffle", "permutation"}
)


def _draws_random(fn: Any, depth: int = 2) -> bool:
    """Whether a Python function (or one it calls from its module, ``depth`` calls deep)
    names a random-number function: an augmentation, whose result must not be cached."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    names = set(code.co_names)
    for const in code.co_consts:  # nested functions and lambdas
        if hasattr(const, "co_names"):
            names |= set(const.co_names)
    if names & RANDOM_NAMES:
        return True
    if depth <= 0:
        return False
    scope = getattr(fn, "__globals__", {})
    return any(
        _draws_random(scope[n], depth - 1)
        for n in names
        if inspect.isfunction(scope.get(n)) and scope[n] is not fn
    )


#: AutoGraph's wrapping of a converted function's name: its factories and the ``tf__`` prefix.
AUTOGRAPH_NAME = re.compile(r"^(?:outer_factory\.<locals>\.)?(?:inner_factory\.<locals>\.)?tf__")


def _where(fn: Any) -> str:
    """``name (file:line)`` of a Python function, "" if it is not one."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return ""
    name = getattr(fn, "__qualname__", code.co_name)
    file = code.co_filename.rsplit("/", 1)[-1]
    if file.startswith(AUTOGRAPH_FILE):
        # Python AutoGraph converted while tracing (a lambda inside a map's function): named
        # as the script wrote it, not "outer_factory.<locals>.inner_factory.<locals>.tf__f.
        # <locals>.<lambda> (__autograph_generated_fileo8segxup.py:10)".
        name = AUTOGRAPH_NAME.sub("", name)
        return f"{name} (as AutoGraph converted it)"
    return f"{name} ({file}:{code.co_firstlineno})"
