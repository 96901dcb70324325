"""Stack classification: which cause a sampled stack's time belongs to, as a table of data.

Place in the pipeline: collectors turn py-spy captures into ``Sample`` stacks (``profiler.model``);
this module maps each stack to one of the categories (profiler/docs/measuring.md, "Categories"):
(``compute``, ``dispatch``, ``feed_fetch``, ``python``, ``tracing``, ``other``), to a *temporary
label* for a native framework call that only the framework trace can split, or to
``instrumentation`` (the toolkit's own code, reported separately). ``profiler.analysis.sampling``
counts the results; the flame graph colours by them.

How a stack is matched (``match``):

1. Frames are visited from the innermost (leaf) outward. At each frame the rows of ``RULES`` are
   tried in order; the first row whose pattern fits the frame decides.
2. A row whose category is ``CALLER`` says "this frame tells nothing about the cause" (libc,
   unresolved addresses, the interpreter's own C frames): the walk goes on to the caller.
3. A frame no row fits is passed over the same way, so library internals (``Tensor.__getattr__``,
   ``nest.flatten``) take the cause of the nearest enclosing frame a row does name
   (``_FetchHandler`` -> ``feed_fetch``, the loop driver -> ``python``).
4. If no frame decides, ``FALLBACK_RULES`` are tried the same way (any Python frame -> python,
   else ``other``).

A row's pattern: ``function`` (regex, full match on the frame's function as py-spy names it,
``Class.method`` / ``outer.<locals>.inner``), ``file`` (regex, searched in the path), ``native``
(True/False/None = either), ``leaf`` (only the innermost Python frame), ``caller`` (regex, full
match on the function of the next outer Python frame) and ``within`` (another row, by name, that
must fit some outer frame: e.g. everything numpy's scalar arithmetic calls is scalar math).

Temporary labels (``TEMPORARY_LABELS``): without ``--native`` (never on TensorFlow, where it costs
~75x) py-spy sees the main thread waiting inside a native framework call (``TF_SessionRun`` via
``_call_tf_sessionrun``, ``TFE_Py_FastPathExecute`` from a generated op wrapper, ``TFE_Py_Execute``
for a ``tf.function``). That time is executor dispatch plus kernels; attribution resolves it into
``compute`` (kernel time from the framework trace) and ``dispatch`` (the rest) before anything is
reported.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import profiler.capture.collectors
import profiler.capture.phases
from profiler import clock, markers
from profiler.capture import worker
from profiler.capture.loop import Loop
from profiler.capture.schedule import Windows
from profiler.capture.script.driver import StepDriver
from profiler.model import CATEGORIES, Frame

COMPUTE, DISPATCH, FEED_FETCH, PYTHON, TRACING, COMMUNICATION, OTHER = CATEGORIES

#: Not a category: the frame says nothing about the cause; its caller decides.
CALLER = "<caller>"
#: The row of a thread asleep (``time.sleep``): its samples are ``other``, named.
SLEEP = "sleep"
#: The row of tf.data's iterator ops on the main thread (``next`` of a dataset): data in.
TF_DATA = "tf-data-ops"
#: The row of a main thread waiting on a queue or a pool: ``feed_fetch``, data in.
QUEUE_WAIT = "queue-wait"
#: The row of a main thread taking a Pool's imap results: ``feed_fetch``, data in.
POOL_STREAM = "pool-stream"
#: The row of a main thread waiting for a Pool's map or apply: ``other``, work farmed out.
POOL_WAIT = "pool-wait"
#: The row of a reader of files (np.load, PIL, ...) inside the steps: ``feed_fetch``, data in.
DATA_LOADING = "data-loading"
DATA_LOADING_NATIVE = "data-loading-native"

#: Temporary labels for native framework calls, resolved by attribution using kernel time.
NATIVE_SESSION = "native_session"
NATIVE_EAGER = "native_eager"
NATIVE_FUNCTION = "native_function"
TEMPORARY_LABELS: dict[str, str] = {
    NATIVE_SESSION: "inside the native TF1 session call (TF_SessionRun via _call_tf_sessionrun): "
    "executor dispatch + kernels; split into compute and dispatch by the framework trace",
    NATIVE_EAGER: "inside a native eager op call (TFE_Py_FastPathExecute / TFE_Py_Execute from a "
    "generated op wrapper): eager dispatch + kernel; split by the framework trace's "
    "EagerLocalExecute events",
    NATIVE_FUNCTION: "inside a tf.function's native graph call (TFE_Py_Execute from "
    "Context.call_function): executor dispatch + kernels; split by the framework trace",
}

#: The toolkit's own code inside a step (phase step wrappers, markers): measured and reported
#: separately, never folded into a category (profiler/docs/measuring.md, "Categories").
INSTRUMENTATION = "instrumentation"

#: Every label ``classify`` can return.
LABELS: tuple[str, ...] = (*CATEGORIES, *TEMPORARY_LABELS, INSTRUMENTATION)


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the classification table (see the module docstring for how rows match).

    Attributes:
        name: a short id, unique in the table (tests and the summary's rule counts use it).
        category: a label of ``LABELS``, or ``CALLER`` to defer to the calling frame.
        function: regex, full match on ``Frame.function``; empty matches any.
        file: regex, searched in ``Frame.file``; empty matches any.
        native: the frame must be native (True) or Python (False); None for either.
        leaf: only the innermost Python frame of the stack matches.
        caller: regex, full match on the next outer Python frame's function; empty for any.
        within: the name of another row that must fit some outer frame (an enclosing call whose
            cause covers everything it calls); empty for any.
        note: why this row says what it says.
    """

    name: str
    category: str
    function: str = ""
    file: str = ""
    native: bool | None = None
    leaf: bool = False
    caller: str = ""
    within: str = ""
    note: str = ""


def module_file(module: str) -> str:
    """A pattern for the source file of the toolkit's module ``module`` (dotted name), wherever
    the package lives: moving or renaming the module moves the pattern with it."""
    return r"(^|/)" + re.escape(module.replace(".", "/")) + r"\.py$"


def package_files(package: str) -> str:
    """A pattern for any module directly inside the toolkit's package ``package``."""
    return r"(^|/)" + re.escape(package.replace(".", "/")) + r"/\w+\.py$"


def qualname(fn: Any) -> str:
    """A pattern for a function or method by its qualified name (as py-spy names frames)."""
    return re.escape(fn.__qualname__)


def _any(*patterns: str) -> str:
    return "|".join(f"(?:{p})" for p in patterns)


_SESSION = r"tensorflow/python/client/session\.py$"
_NUMPY_SO = r"numpy/.*\.so(\.\d+)*$"
_NUMPY_TYPES = (
    r"(BOOL|BYTE|UBYTE|SHORT|USHORT|INT|UINT|LONG|ULONG|LONGLONG|ULONGLONG|HALF|FLOAT|DOUBLE"
    r"|LONGDOUBLE|CFLOAT|CDOUBLE|CLONGDOUBLE|TIMEDELTA|DATETIME)"
)
_SCALAR_TYPES = (
    r"(byte|ubyte|short|ushort|int|uint|long|ulong|longlong|ulonglong|half|float|double"
    r"|longdouble|cfloat|cdouble|clongdouble|gentype)"
)

#: The ordered table. Innermost frame first; within one frame, the first row that fits decides.
RULES: tuple[Rule, ...] = (
    # --- waiting: time in no work at all --------------------------------------------------------
    Rule(
        SLEEP,
        OTHER,
        function=r"time_sleep|(__)?(clock_)?nanosleep",
        native=True,
        note="the thread asleep (time.sleep; its native frames, seen with --native): time in no "
        "work, named by the sleep finding (profiler.diagnoses.waiting), not unexplained",
    ),
    Rule(
        QUEUE_WAIT,
        FEED_FETCH,
        file=r"(^|/)(queue|multiprocessing/queues)\.py$",
        native=False,
        note="the main thread waiting on a queue for what another thread or process makes (a "
        "loader thread's batches): data in",
    ),
    Rule(
        POOL_STREAM,
        FEED_FETCH,
        function=r"IMapIterator\.(next|__next__)",
        file=r"multiprocessing/pool\.py$",
        native=False,
        note="the main thread taking the next result of a Pool's imap (a loop over "
        "pool.imap(load, files)): data in",
    ),
    Rule(
        POOL_WAIT,
        OTHER,
        file=r"multiprocessing/(pool|connection)\.py$",
        native=False,
        note="the main thread waiting for a Pool's map or apply (work done in other processes, "
        "an evolution strategy's fitness evaluations): no work of its own, and not data in",
    ),
    Rule(
        DATA_LOADING,
        FEED_FETCH,
        # Not their writers: a checkpoint or a sample image saved is no data in.
        function=r"(?!.*(save|[wW]rite|to_)).*",
        file=_any(
            r"numpy/lib/(_npyio_impl|npyio|_format_impl|format|_datasource)\.py$",
            r"(^|/)(PIL|imageio)/",
            r"pandas/io/",
            r"keras/src/utils/image_utils\.py$",
        ),
        native=False,
        note="reading and decoding data inside the steps (np.load, PIL images, imageio, pandas "
        "readers, Keras's load_img; not their writers): data in, on the steps' thread",
    ),
    Rule(
        DATA_LOADING_NATIVE,
        FEED_FETCH,
        native=True,
        within=DATA_LOADING,
        note="native frames under a data reader (np.load's fread, PIL's decoders): data in",
    ),
    # --- frames that tell nothing about the cause: the caller decides ---------------------------
    Rule(
        "system-library",
        CALLER,
        file=r"/(libc|libm|libpthread|libdl|librt|ld-linux[\w.-]*|libgcc_s|libstdc\+\+)[.-][^/]*$",
        native=True,
        note="libc/libm/libpthread frames (malloc, memcpy, fetestexcept, the libc root frame): "
        "the work belongs to whoever called them",
    ),
    Rule(
        "unresolved-address",
        CALLER,
        function=r"0x[0-9a-fA-F]+",
        native=True,
        note="a native address py-spy could not name: its caller decides",
    ),
    Rule(
        "interpreter-native",
        CALLER,
        file=r"(libpython3[\w.]*\.so[\d.]*|/python3(\.\d+)?)$",
        native=True,
        note="CPython's own C frames: the Python frame that runs them decides",
    ),
    Rule(
        "numpy-scalar-alloc",
        CALLER,
        function=r"gentype_alloc|gentype_dealloc|\w+_arrtype_dealloc",
        file=_NUMPY_SO,
        native=True,
        note="a numpy scalar object allocated or freed: scalar math or a reduction's result, "
        "whichever called it",
    ),
    # --- temporary labels: native framework calls the framework trace splits -----------------
    Rule(
        "tf1-session-call",
        NATIVE_SESSION,
        function=r"(BaseSession\.)?_call_tf_sessionp?run",
        file=_SESSION,
        note=TEMPORARY_LABELS[NATIVE_SESSION],
    ),
    Rule(
        "tf1-session-call-native",
        NATIVE_SESSION,
        function=r"\w*TF_SessionP?Run\w*",
        native=True,
        note="the same call seen with native frames",
    ),
    Rule(
        "tf-execute-native",
        CALLER,
        function=r"\w*TFE_Py_Execute\w*",
        native=True,
        note="TFE_Py_Execute serves eager ops and tf.function calls: the Python caller decides",
    ),
    Rule(
        "tf2-eager-fastpath-native",
        NATIVE_EAGER,
        function=r"\w*TFE_Py_FastPathExecute\w*",
        native=True,
        note=TEMPORARY_LABELS[NATIVE_EAGER],
    ),
    Rule(
        "tf2-function-call",
        NATIVE_FUNCTION,
        function=r"quick_execute",
        file=r"tensorflow/python/eager/execute\.py$",
        caller=r"Context\.call_function",
        note=TEMPORARY_LABELS[NATIVE_FUNCTION],
    ),
    Rule(
        "tf2-eager-execute",
        NATIVE_EAGER,
        function=r"quick_execute",
        file=r"tensorflow/python/eager/execute\.py$",
        note="an eager op on the slow path (TFE_Py_Execute from an *_eager_fallback)",
    ),
    Rule(
        TF_DATA,
        FEED_FETCH,
        file=r"tensorflow/python/ops/gen_(dataset|experimental_dataset|optional)_ops\.py$",
        note="tf.data iterator ops (make_iterator, iterator_get_next, optional_has_value): "
        "data in, including the per-epoch iterator set-up",
    ),
    Rule(
        "tf2-eager-op",
        NATIVE_EAGER,
        file=r"tensorflow/python/ops/gen_\w+_ops\.py$",
        native=False,
        leaf=True,
        note="a generated op wrapper as the innermost Python frame is in its "
        "TFE_Py_FastPathExecute call: eager dispatch + kernel in C",
    ),
    Rule(
        "tf2-eager-tensor-conversion",
        DISPATCH,
        function=r"convert_to_eager_tensor",
        file=r"tensorflow/python/framework/constant_op\.py$",
        note="Python numbers and arrays turned into EagerTensors in C on every call",
    ),
    Rule(
        "tf2-tape-gradient",
        DISPATCH,
        function=r"imperative_grad",
        file=r"tensorflow/python/eager/imperative_grad\.py$",
        leaf=True,
        note="the C tape walk of GradientTape.gradient between gradient functions",
    ),
    # --- TF1 session: feed and fetch handling; the rest of the session's Python is python ------
    Rule(
        "tf1-fetch-handling",
        FEED_FETCH,
        function=r"_FetchHandler(\..*)?|_\w*FetchMapper(\..*)?|_name_list|_get_attrs_values"
        r"|_uniquify_fetches|_is_attrs_instance",
        file=_SESSION,
        note="_FetchHandler and the fetch mappers: resolving fetches, building results",
    ),
    Rule(
        "tf1-feed-expansion",
        FEED_FETCH,
        function=r"BaseSession\._run\.<locals>\._feed_fn|_get_feeds_for_indexed_slices"
        r"|_get_indexed_slices_value_from_fetches|_convert_to_numpy_obj"
        r"|BaseSession\._update_with_movers",
        file=_SESSION,
        note="feed expansion and conversion helpers of session.py",
    ),
    Rule(
        "tf1-feed-conversion",
        FEED_FETCH,
        function=r"np_asarray",
        file=r"tensorflow/python/util/numpy_compat\.py$",
        note="feed values converted to the placeholder's dtype (parses NumpyVersion per feed)",
    ),
    Rule(
        "tf1-session-do-run",
        PYTHON,
        function=r"BaseSession\._do_run",
        file=_SESSION,
        note="the road from _run to the C call (_do_run, _do_call, _run_fn, _extend_graph)",
    ),
    Rule(
        "tf1-feed-fetch-callee",
        FEED_FETCH,
        caller=r"BaseSession\._run",
        note="what BaseSession._run calls besides _do_run handles feeds and fetches: "
        "flatten_dict_items, feed key lookup, dtype and shape checks, feedability, movers",
    ),
    Rule(
        "tf1-session-python",
        PYTHON,
        file=_SESSION,
        note="the rest of the session's Python (run, _run's own bytecode, _do_call, _run_fn)",
    ),
    # --- graph building and tf.function tracing ------------------------------------------------
    Rule(
        "tf-function-tracing",
        TRACING,
        function=r"func_graph_from_py_func|_create_concrete_function|Function\._initialize"
        r"|Function\._initialize_uninitialized_variables|ConcreteFunction\._build_call_outputs"
        r"|FuncGraph\.__init__",
        file=r"tensorflow/",
        note="a tf.function being (re)traced into a graph",
    ),
    Rule(
        "tf-autograph",
        TRACING,
        file=r"tensorflow/python/autograph/",
        note="AutoGraph converting Python during a trace",
    ),
    Rule(
        "tf-graph-building",
        TRACING,
        function=r"_apply_op_helper",
        file=r"tensorflow/python/framework/op_def_library\.py$",
        note="an op added to a graph: graph building (a trace, or a TF1 graph grown in the loop)",
    ),
    # --- input pipelines ----------------------------------------------------------------------
    Rule(
        "tf-data",
        FEED_FETCH,
        file=r"tensorflow/python/data/",
        note="tf.data: dataset and iterator set-up, iteration",
    ),
    Rule(
        "keras-data",
        FEED_FETCH,
        file=r"keras/src/trainers/(epoch_iterator\.py|data_adapters/)",
        note="Keras's epoch iterator and data adapters",
    ),
    # --- numpy, native side (only with --native) ----------------------------------------------
    Rule(
        "numpy-scalar-math-callee",
        PYTHON,
        native=True,
        within="numpy-scalar-math",
        note="what numpy's scalar arithmetic calls (a 0-d ufunc round trip, float-status checks, "
        "conversions) is part of the scalar math, not array dispatch or compute",
    ),
    Rule(
        "numpy-kernel",
        COMPUTE,
        function=_NUMPY_TYPES + r"_(?!setitem$|getitem$|copyswapn?$|nonzero$|scan$|fromstr$"
        r"|compare$|fill$)\w+",
        native=True,
        note="ufunc inner loops: DOUBLE_subtract, DOUBLE_pairwise_sum, DOUBLE_square, ...",
    ),
    Rule(
        "numpy-simd-kernel",
        COMPUTE,
        function=r"\w*(simd|avx2|avx512|sse2|neon|vsx)\w*",
        file=_NUMPY_SO,
        native=True,
        note="SIMD inner loops",
    ),
    Rule(
        "numpy-cast-copy-loop",
        COMPUTE,
        function=r"_(aligned_)?(contig|strided|swap|cast)_\w+|_(aligned_)?(contig|strided)\w*_to_\w+",
        file=_NUMPY_SO,
        native=True,
        note="cast and copy inner loops (a dtype cast, a broadcast scalar): the arithmetic's own "
        "data movement, as a Cast kernel is in TensorFlow",
    ),
    Rule(
        "blas-library",
        COMPUTE,
        file=r"/lib(openblas|scipy_openblas|blas|cblas|flexiblas|blis|mkl_\w+)[\w.-]*\.so[\d.]*$",
        native=True,
        note="BLAS kernels (matrix products)",
    ),
    Rule(
        "blas-symbol",
        COMPUTE,
        function=r"cblas_\w+|[sdcz](gemm|gemv|dot|axpy|scal|nrm2|asum)\w*",
        native=True,
        note="BLAS kernels named by symbol",
    ),
    Rule(
        "numpy-scalar-math",
        PYTHON,
        function=_SCALAR_TYPES + r"_(add|subtract|multiply|true_divide|floor_divide|divide|power"
        r"|negative|positive|absolute|remainder|divmod|richcompare|bool|float|int)\w*",
        file=_NUMPY_SO,
        native=True,
        note="arithmetic on numpy scalars (W - lr * grad): scalar float math, interpreter work",
    ),
    Rule(
        "numpy-native",
        DISPATCH,
        file=_NUMPY_SO,
        native=True,
        note="ufunc dispatch, type resolution, iterator set-up, temporaries' allocation, "
        "floating-point error checks",
    ),
    Rule(
        "numpy-wrappers",
        DISPATCH,
        file=r"numpy/(_core|core)/\w+\.py$",
        native=False,
        note="numpy's Python wrappers: fromnumeric (np.sum -> _wrapreduction), _methods",
    ),
    # --- framework Python --------------------------------------------------------------------
    Rule(
        "tf-function-call-python",
        PYTHON,
        file=r"tensorflow/(python/eager/polymorphic_function|core/function)/",
        note="tf.function's Python call path: argument binding, cache lookup, _call_flat",
    ),
    Rule(
        "keras-python",
        PYTHON,
        file=r"keras/src/",
        note="Keras's Python: fit's loop, callbacks, train_function wrappers",
    ),
    # --- the loop driver and the toolkit's own code -------------------------------------------
    Rule(
        "loop-driver",
        PYTHON,
        function=qualname(Loop.run),
        file=module_file(Loop.__module__),
        note="the driver loop around each step, the user's loop: a stack that reaches it "
        "unclassified is Python inside the step no row names (the step's bytecode, framework "
        "Python wrappers such as tf.nest or op dispatch)",
    ),
    Rule(
        "step-segment",
        PYTHON,
        function=qualname(Windows.segment),
        file=module_file(Windows.__module__),
        note="where the workload process calls the loop: a stack that reaches it unclassified "
        "is the loop's own Python (the step's bytecode, a Loop subclass's run)",
    ),
    Rule(
        "script-handoff",
        INSTRUMENTATION,
        function=qualname(StepDriver._serve),
        file=module_file(StepDriver.__module__),
        note="a user's script waiting at a step boundary while the phase schedule works "
        "(profiler.capture.script.driver): the toolkit's time, outside every step",
    ),
    Rule(
        "script-detector",
        INSTRUMENTATION,
        file=package_files(StepDriver.__module__.rpartition(".")[0]),
        leaf=True,
        note="a user script's step detectors themselves (profiler.capture.script); only as the "
        "innermost Python frame: the script's calls run under them, and the frames inside decide",
    ),
    Rule(
        "instrumentation",
        INSTRUMENTATION,
        file=_any(
            module_file(worker.__name__),
            module_file(Windows.__module__),
            module_file(markers.__name__),
            module_file(clock.__name__),
            package_files(profiler.capture.phases.__name__),
            package_files(profiler.capture.collectors.__name__),
        ),
        note="the toolkit's own code (phase step wrappers, markers): reported separately",
    ),
)

#: Tried only when no row of ``RULES`` decided, innermost frame first again.
FALLBACK_RULES: tuple[Rule, ...] = (
    Rule(
        "any-python",
        PYTHON,
        native=False,
        note="Python no row names (the user's code, library Python): interpreter time",
    ),
    Rule("no-python", OTHER, note="native frames only: no Python code explains it"),
)

#: A sample is inside a step if one of its frames fits this (a workload process runs every
#: window's steps from ``Windows.segment``); others (phase set-up, py-spy's stop) are excluded.
STEP_SCOPE = Rule(
    "step-scope",
    PYTHON,
    function=qualname(Windows.segment),
    file=module_file(Windows.__module__),
    note="frames under the step driver are steps",
)


@dataclass(frozen=True, slots=True)
class Match:
    """The outcome of classifying one stack.

    Attributes:
        label: the category, temporary label or ``instrumentation``.
        rule: the name of the row that decided.
        frame: index (root = 0) of the frame that decided, or -1 if none did.
    """

    label: str
    rule: str
    frame: int


@functools.lru_cache(maxsize=512)
def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def frame_fits(
    rule: Rule,
    frame: Frame,
    *,
    is_leaf: bool = False,
    caller: Frame | None = None,
    outer: Sequence[Frame] = (),
) -> bool:
    """Whether ``rule``'s pattern fits ``frame``.

    Args:
        rule: the row.
        frame: the frame.
        is_leaf: whether ``frame`` is the stack's innermost Python frame.
        caller: the next outer Python frame, if any.
        outer: every frame outside ``frame`` (for ``within``).
    """
    if rule.native is not None and frame.native != rule.native:
        return False
    if rule.leaf and not is_leaf:
        return False
    if rule.function and not _rx(rule.function).fullmatch(frame.function):
        return False
    if rule.file and not _rx(rule.file).search(frame.file.replace("\\", "/")):
        return False
    if rule.caller and (caller is None or _rx(rule.caller).fullmatch(caller.function) is None):
        return False
    return not rule.within or any(frame_fits(_BY_NAME[rule.within], f) for f in outer)


def rule_for(stack: Sequence[Frame], i: int, table: tuple[Rule, ...] = RULES) -> Rule | None:
    """The first row of ``table`` that fits frame ``i`` of ``stack`` (None if none does)."""
    leaf_py = next((j for j in range(len(stack) - 1, -1, -1) if not stack[j].native), -1)
    caller = next((stack[j] for j in range(i - 1, -1, -1) if not stack[j].native), None)
    for rule in table:
        if frame_fits(rule, stack[i], is_leaf=i == leaf_py, caller=caller, outer=stack[:i]):
            return rule
    return None


def _walk(stack: Sequence[Frame], table: tuple[Rule, ...]) -> Match | None:
    for i in range(len(stack) - 1, -1, -1):
        rule = rule_for(stack, i, table)
        # No row, or a CALLER row: this frame says nothing, go on to the caller.
        if rule is not None and rule.category != CALLER:
            return Match(rule.category, rule.name, i)
    return None


def match(stack: Sequence[Frame]) -> Match:
    """Classify a stack (root first, leaf last) and say which row decided.

    Args:
        stack: the sample's frames, outermost first.

    Returns:
        The label, the deciding rule's name and the deciding frame's index.
    """
    # The fallbacks look at the whole stack: a Python frame anywhere (a script's line calling
    # math.sin, whose libm frames no row names) is interpreter time, and only a stack of
    # native frames alone is unexplained (``no-python`` fitted the unnamed libm leaf first and
    # put 22% of a pure-Python loop in other).
    found = (
        _walk(stack, RULES) or _walk(stack, FALLBACK_RULES[:1]) or _walk(stack, FALLBACK_RULES[1:])
    )
    return found or Match(OTHER, "empty", -1)


def classify(stack: Sequence[Frame]) -> str:
    """The label of a stack: a category, a temporary label or ``instrumentation``."""
    return match(stack).label


def in_steps(stack: Sequence[Frame]) -> bool:
    """Whether a stack was sampled inside a step (under the workload process's step driver)."""
    return any(frame_fits(STEP_SCOPE, f) for f in stack)


def rule_named(name: str) -> Rule:
    """The row of the table called ``name``."""
    return _BY_NAME[name]


def is_temporary(label: str) -> bool:
    """Whether ``label`` is a temporary label attribution still has to resolve."""
    return label in TEMPORARY_LABELS


_BY_NAME: dict[str, Rule] = {r.name: r for r in (*RULES, *FALLBACK_RULES)}


def _check_table() -> None:
    names = [r.name for r in (*RULES, *FALLBACK_RULES)]
    if len(set(names)) != len(names):
        raise ValueError("rule names must be unique")
    for r in (*RULES, *FALLBACK_RULES):
        if r.category != CALLER and r.category not in LABELS:
            raise ValueError(f"rule {r.name}: unknown label {r.category!r}")
        if r.within and (r.within not in _BY_NAME or _BY_NAME[r.within].within):
            raise ValueError(f"rule {r.name}: within names no plain row: {r.within!r}")
        for pattern in (r.function, r.file, r.caller):
            _rx(pattern)


_check_table()
