"""What-ifs: fixes the toolkit applies to a script's own loop at run time, without touching its
file, so the what-if phase (``profiler.capture.phases.whatif``) can measure what each saves.

Place in the pipeline: the script process. Each builder below looks at what the run detected
(``StepDriver.facts``: the session and its step's call, the tf.functions and their retraces,
the Keras model, the automatic step's loop) and returns a ``Variant`` when it applies, or the
reason it does not. A variant declares, before anything is measured, which of the attribution's
categories or parts it removes (the analysis turns that into the predicted saving) and whether
it keeps the training's results; ``on``/``off`` switch it between two steps, on the script's
thread. The switch points are the detectors' own (``StepDriver.variant_run``,
``StepDriver.variant_args``), the script's globals (a step function) and the model's
``train_function``: nothing else of the script changes.

Several reach into TensorFlow's or Keras's private API (a session's native callable, a
model's train-function factory, a dataset's graph). A builder checks the internals it uses
before it offers its variant (``profiler.capture.tf_internals``): where one is missing the
what-if is not run, and its reason names what is missing and the TensorFlow version.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

from profiler.capture import tf_internals
from profiler.capture.script.driver import StepDriver
from profiler.capture.script.facts import functions_eagerly
from profiler.capture.variant import Variant, error_line

#: What-ifs that may change the results only within a bound, and run by default (``on``): the
#: numpy float32 blocks round the script's arrays to float32 precision (~6e-8 relative) for a
#: few hundred steps, after which each name is a float64 copy again. Measured on a float64 MLP:
#: 2.3x faster steps; a numpy user with no options otherwise got "no fix found".
BOUNDED_CHANGE = frozenset({"numpy_float32"})

#: Relative tolerance of a results check (float32 arithmetic, the same kernels).
CHECK_RTOL = 1e-6

#: Ids of the what-ifs, in the order they run.
TF1_CALLABLE = "tf1_callable"
TF1_FEEDS_ONCE = "tf1_feeds_once"
TENSOR_ARGS = "tensor_args"
REDUCE_RETRACING = "reduce_retracing"
FUNCTION_JIT = "function_jit"
KERAS_JIT = "keras_jit"
KERAS_STEPS = "keras_steps"
#: The two ``steps_per_execution`` values tried on a Keras fit.
KERAS_STEPS_K = (4, 16)
EAGER_FUNCTION = "eager_function"
FUNCTIONS_GRAPH = "functions_graph"
#: Why the what-ifs that rebuild a tf.function do not run while the debugging switch is on
#: (functions_graph measures the switch itself).
EAGERLY = "tf.config.run_functions_eagerly(True)"


def ids() -> tuple[str, ...]:
    """Every what-if's id, in the order they run."""
    from profiler.capture import whatifs_blas, whatifs_calls, whatifs_data, whatifs_numpy

    return (
        TF1_CALLABLE,
        TF1_FEEDS_ONCE,
        TENSOR_ARGS,
        REDUCE_RETRACING,
        FUNCTION_JIT,
        KERAS_JIT,
        *(f"{KERAS_STEPS}_{k}" for k in KERAS_STEPS_K),
        EAGER_FUNCTION,
        FUNCTIONS_GRAPH,
        whatifs_calls.PREDICT_DIRECT,
        whatifs_data.TF_DATA_PREFETCH,
        whatifs_data.TF_DATA_PARALLEL,
        whatifs_numpy.NUMPY_FLOAT32,
        whatifs_blas.NUMPY_BLAS_ONE,
    )


def _check_once(variant: Variant, run: Callable[[], tuple[bool, str]]) -> None:
    """The variant's results check, the first time it is switched in (a check that cannot run
    says so; it never switches the variant off)."""
    if variant.check:
        return
    try:
        _same, variant.check = run()
    except Exception as exc:
        variant.check = f"not checked ({error_line(exc)})"
    variant.check = variant.check or "not checked"


def _swap(variant: Variant, driver: StepDriver, fn: Any, twin: Any) -> Callable[..., Any]:
    """``driver.variant_calls`` entry: ``twin`` called in ``fn``'s place; if it raises, the
    variant is off from then on and this step runs ``fn`` as written."""

    def swap(call: Callable[..., Any], own: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        try:
            return call(twin, *args, **kw)
        except Exception as exc:
            variant.errors.append(error_line(exc))
            driver.variant_calls.pop(id(fn), None)
            return call(own, *args, **kw)

    return swap


def _own_function(fn: Any) -> bool:
    """A tf.function of the script, not one of Keras's or TensorFlow's own (fit's train
    function is a tf.function too: its what-ifs are Keras's)."""
    module = getattr(getattr(fn, "python_function", None), "__module__", "") or ""
    return not module.startswith(("keras", "tensorflow", "tf_keras"))


def _call(raw: Callable[..., Any], fn: Any, call: tuple[tuple[Any, ...], dict[str, Any]]) -> Any:
    return raw(fn, *call[0], **call[1])


def candidates(
    driver: StepDriver,
    script_globals: dict[str, Any] | None,
    allow_all: bool,
    only: set[str] | None = None,
) -> tuple[list[Variant], list[tuple[str, str]]]:
    """The what-ifs that apply to this run (results-changing ones only with ``allow_all``;
    only those in ``only`` if given), and (id, why not) for the others. A script without
    TensorFlow gets the numpy what-if alone (``profiler.capture.whatifs_numpy``)."""
    from profiler.capture import whatifs_blas, whatifs_calls, whatifs_data, whatifs_numpy

    found: list[Variant] = []
    not_run: list[tuple[str, str]] = []
    builders: list[tuple[str, Callable[[], Variant | str]]] = [
        (TF1_CALLABLE, lambda: tf1_callable(driver)),
        (TF1_FEEDS_ONCE, lambda: tf1_feeds_once(driver)),
        (TENSOR_ARGS, lambda: tensor_args(driver)),
        (REDUCE_RETRACING, lambda: reduce_retracing(driver)),
        (FUNCTION_JIT, lambda: function_jit(driver)),
        (KERAS_JIT, lambda: keras_jit(driver)),
        *(
            (f"{KERAS_STEPS}_{k}", lambda k=k: keras_steps(driver, k))  # type: ignore[misc]
            for k in KERAS_STEPS_K
        ),
        (EAGER_FUNCTION, lambda: eager_function(driver, script_globals)),
        (FUNCTIONS_GRAPH, lambda: functions_graph(driver)),
        (whatifs_calls.PREDICT_DIRECT, lambda: whatifs_calls.predict_direct(driver)),
        (whatifs_data.TF_DATA_PREFETCH, lambda: whatifs_data.prefetch(driver)),
        (whatifs_data.TF_DATA_PARALLEL, lambda: whatifs_data.parallel(driver)),
    ]
    if "tensorflow" not in sys.modules:  # the TensorFlow fixes have nothing to apply to
        builders = [
            (whatifs_numpy.NUMPY_FLOAT32, lambda: whatifs_numpy.numpy_float32(script_globals)),
            (whatifs_blas.NUMPY_BLAS_ONE, whatifs_blas.numpy_blas_one_thread),
        ]
    for key, build in builders:
        if only is not None and key not in only:
            not_run.append((key, "not selected (--whatif-only)"))
            continue
        try:
            got = build()
        except Exception as exc:  # a framework version without the private API it needs
            got = f"cannot be applied here ({type(exc).__name__}: {exc})"
            untested = tf_internals.tf_version_note()
            if untested is not None:
                got += f"; {untested}"
        if isinstance(got, str):
            not_run.append((key, got))
        elif not got.keeps_results and not allow_all and key not in BOUNDED_CHANGE:
            not_run.append((key, f"{got.results_note}: runs only with --whatif all"))
        else:
            found.append(got)
    return found, not_run


#: Relative tolerance of a results check through XLA (it may reorder float arithmetic).
XLA_RTOL = 1e-4


def function_check(
    driver: StepDriver,
    fn: Any,
    call: tuple[tuple[Any, ...], dict[str, Any]],
    other: Callable[[Callable[..., Any]], Any],
    rtol: float = CHECK_RTOL,
) -> tuple[bool, str]:
    """One step of ``fn`` on its last arguments against the variant's step (``other(raw)``,
    given TensorFlow's own ``Function.__call__``) from the same state: the returned values and
    every variable the function captures, compared; the variables are put back after each, so
    the check takes no step of the training. (same, what was compared with the figures)."""
    import numpy as np

    raw = driver.raw_function_call
    if raw is None:
        return True, ""
    args, kwargs = call
    variables = list(fn.get_concrete_function(*args, **kwargs).variables)
    saved = [v.numpy() for v in variables]

    def step(run: Callable[[], Any]) -> list[Any]:
        import tensorflow as tf

        out = run()
        values = [np.asarray(t) for t in tf.nest.flatten(out) if hasattr(t, "numpy")]
        values += [v.numpy() for v in variables]
        for v, s in zip(variables, saved, strict=True):
            v.assign(s)
        return values

    want = step(lambda: raw(fn, *args, **kwargs))
    got = step(lambda: other(raw))
    pairs = list(zip(want, got, strict=False))
    if len(want) != len(got) or any(np.shape(a) != np.shape(b) for a, b in pairs):
        return False, "the variant's step returned other values than the function's"
    worst = max(
        (float(np.max(np.abs(a.astype(float) - b.astype(float)))) for a, b in pairs if a.size),
        default=0.0,
    )
    scale = max((float(np.max(np.abs(a.astype(float)))) for a in want if a.size), default=0.0)
    scale = scale or 1.0
    same = worst <= rtol * scale
    text = (
        f"one step from the same state: the returned values and {len(variables)} variables "
        f"{'equal' if same else 'differ from'} the function's (max difference {worst:.3g}, "
        f"tolerance {rtol:g} x {scale:.3g})"
    )
    return same, text


def data_ended(exc: BaseException) -> bool:
    """Whether ``exc`` is the end of the data (``StopIteration``, TensorFlow's
    ``OutOfRangeError``): fit's epoch loop stops on it, as written; no what-if's failure (fit on
    a TFRecord set of unknown length read "XLA: could not be applied: OutOfRangeError")."""
    return isinstance(exc, StopIteration) or type(exc).__name__ == "OutOfRangeError"


# --- TF1: the step's session.run as a native callable -------------------------------------------


def tf1_callable(driver: StepDriver) -> Variant | str:
    """The step's ``session.run(fetches, feed_dict)`` through a native callable made for the
    same fetches, targets and feeds (``BaseSession._make_callable_from_options``): no Python
    feed/fetch handling, no per-call name resolution. ``Session.make_callable`` is not it: in
    TensorFlow 2 it is ``session.run`` under another name."""
    facts = driver.facts
    session, call = facts.session, facts.session_call
    if session is None or call is None:
        return "no session.run step"
    args, kwargs = call
    if len(args) > 2 or set(kwargs) - {"fetches", "feed_dict"}:
        return "the step's session.run passes options or run_metadata"
    fetches = args[0] if args else kwargs.get("fetches")
    feeds = kwargs.get("feed_dict", args[1] if len(args) > 1 else None) or {}
    elems = list(fetches) if isinstance(fetches, (list, tuple)) else [fetches]
    if any(isinstance(e, (list, tuple, dict)) for e in elems) or not isinstance(feeds, dict):
        return "the step fetches a nested structure"
    if tf_internals.missing_attributes(session, ("_make_callable_from_options",)):
        return tf_internals.missing_note(
            "this what-if",
            "tensorflow.python.client.session.BaseSession._make_callable_from_options",
        )
    import numpy as np
    import tensorflow as tf
    from tensorflow.core.protobuf import config_pb2

    graph = session.graph
    layout: list[int | None] = []
    fetch_names: list[str] = []
    targets: list[str] = []
    for e in elems:
        g = graph.as_graph_element(e, allow_tensor=True, allow_operation=True)
        if isinstance(g, tf.Operation):
            targets.append(g.name)
            layout.append(None)
        else:
            layout.append(len(fetch_names))
            fetch_names.append(g.name)
    keys = list(feeds)
    placeholders = [graph.as_graph_element(k) for k in keys]
    dtypes = [p.dtype.as_numpy_dtype for p in placeholders]
    opts = config_pb2.CallableOptions(
        feed=[p.name for p in placeholders], fetch=fetch_names, target=targets
    )
    native = session._make_callable_from_options(opts)
    shape = type(fetches) if isinstance(fetches, (list, tuple)) else None
    recorded = [id(e) for e in elems]
    key_ids = sorted(id(k) for k in keys)

    def run(original: Callable[..., Any], sess: Any, a: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        f = a[0] if a else kw.get("fetches")
        fd = kw.get("feed_dict", a[1] if len(a) > 1 else None) or {}
        es = list(f) if isinstance(f, (list, tuple)) else [f]
        if (
            sess is not session
            or [id(e) for e in es] != recorded
            or not isinstance(fd, dict)
            or sorted(id(k) for k in fd) != key_ids
        ):
            return original(sess, *a, **kw)  # another call than the step's: unchanged
        try:
            out = native(*[np.asarray(fd[k], dtype=t) for k, t in zip(keys, dtypes, strict=True)])
        except tf.errors.OutOfRangeError:
            # An iterator in the graph at the end of its epoch: the script's own loop control
            # (CS20's logistic regression catches it), not the callable's failure. As written,
            # the step raises it to the script.
            return original(sess, *a, **kw)
        except Exception as exc:  # off at once; this step runs as written
            variant.errors.append(error_line(exc))
            driver.variant_run = None
            return original(sess, *a, **kw)
        values = [None if i is None else out[i] for i in layout]
        if shape is None:
            return values[0]
        return shape(values)

    def check() -> None:
        """The fetched tensors through a callable without the targets against session.run's
        on the same feeds: the same state, no update (nothing changes)."""
        if not fetch_names or variant.check:
            return
        probe = session._make_callable_from_options(
            config_pb2.CallableOptions(feed=[p.name for p in placeholders], fetch=fetch_names)
        )
        fed = [np.asarray(feeds[k], dtype=t) for k, t in zip(keys, dtypes, strict=True)]
        got = probe(*fed)
        want = session.run(fetch_names, feed_dict=dict(zip(keys, fed, strict=True)))
        worst = _max_difference(got, want)
        scale = _scale(want)
        same = worst <= CHECK_RTOL * scale
        variant.check = (
            f"the fetched tensors ({', '.join(fetch_names)}) equal session.run's on the same "
            f"feeds: max difference {worst:.3g} (tolerance {CHECK_RTOL:g} x {scale:.3g})"
            if same
            else f"the fetched tensors differ from session.run's by up to {worst:.3g}"
        )
        if not same:
            # Random fetches (word2vec's nce_loss samples its negative classes at every run)
            # differ from session.run's own second call as much: then their shapes and dtypes
            # are what can be compared.
            again = session.run(fetch_names, feed_dict=dict(zip(keys, fed, strict=True)))
            own = _max_difference(again, want)
            alike = all(
                np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype
                for a, b in zip(got, want, strict=True)
            )
            if own > CHECK_RTOL * scale and alike:
                variant.check = (
                    f"the fetched tensors ({', '.join(fetch_names)}) are random: two "
                    f"session.run calls on the same feeds differ by up to {own:.3g}; the "
                    "callable's have their shapes and dtypes"
                )
                return
            variant.errors.append(variant.check)

    def on() -> None:
        if not variant.errors:
            # The check's own session.run calls are not the script's steps (counted as steps,
            # they reached the schedule's step boundary from inside this switch).
            driver.block += 1
            try:
                check()
            except Exception as exc:  # the variant is unusable here
                if not data_ended(exc):
                    variant.errors.append(error_line(exc))
                    return
                # An iterator in the graph reached its epoch's end during the check (CS20's
                # logistic regression): the script's next step meets it as written; the check
                # is made at the next switch.
                variant.check = ""
            finally:
                driver.block -= 1
            if not variant.errors:
                driver.variant_run = run

    def off() -> None:
        driver.variant_run = None

    variant = Variant(
        TF1_CALLABLE,
        "the step's session.run replaced by a native callable for the same fetches and feeds "
        "(session._make_callable_from_options with tensorflow.core.protobuf.config_pb2."
        "CallableOptions(feed=..., fetch=..., target=...); not Session.make_callable, which in "
        "TensorFlow 2 is session.run under another name: ~0 µs saved, measured)",
        ("feed_fetch", "python.run", "dispatch.per_call"),
        True,
        "the same graph, fetches and feeds (the same dtype conversion session.run does)",
        on,
        off,
    )
    return variant


def _max_difference(a: list[Any], b: list[Any]) -> float:
    """The largest absolute difference between two lists of fetched arrays; a fetch that is
    not numbers (a merged summary's serialized bytes) is 0 where equal, else infinite."""
    import numpy as np

    def one(x: Any, y: Any) -> float:
        x, y = np.asarray(x), np.asarray(y)
        if not _numeric(x) or not _numeric(y):
            return 0.0 if np.shape(x) == np.shape(y) and np.array_equal(x, y) else float("inf")
        if not x.size:
            return 0.0
        return float(np.max(np.abs(x.astype(float) - y.astype(float))))

    return max((one(x, y) for x, y in zip(a, b, strict=True)), default=0.0)


def _numeric(x: Any) -> bool:
    kind = getattr(getattr(x, "dtype", None), "kind", "")
    return bool(kind) and kind in "biufc"


def _scale(values: list[Any]) -> float:
    """The largest magnitude among the numeric fetches (1.0 without any)."""
    import numpy as np

    arrays = [np.asarray(v) for v in values]
    return (
        max(
            (float(np.max(np.abs(a.astype(float)))) for a in arrays if _numeric(a) and a.size),
            default=0.0,
        )
        or 1.0
    )


# --- TF1: arrays fed every step converted once ---------------------------------------------------


def tf1_feeds_once(driver: StepDriver) -> Variant | str:
    """The step feeds the same arrays every step in another dtype than their placeholders':
    each converted once to the placeholder's dtype, and that array fed from then on (what
    ``session.run`` converts at every call, done once)."""
    facts = driver.facts
    session, call = facts.session, facts.session_call
    if session is None or call is None:
        return "no session.run step"
    if facts.same_feeds is not True:
        return "the step does not feed the same arrays every step"
    args, kwargs = call
    feeds = kwargs.get("feed_dict", args[1] if len(args) > 1 else None) or {}
    if not isinstance(feeds, dict) or not feeds:
        return "the step feeds nothing"
    import numpy as np

    graph = session.graph
    converted: dict[int, tuple[Any, Any]] = {}
    for key, value in feeds.items():
        dtype = graph.as_graph_element(key).dtype.as_numpy_dtype
        if isinstance(value, np.ndarray) and value.dtype != dtype:
            converted[id(key)] = (value, np.asarray(value, dtype=dtype))
    if not converted:
        return "every fed array is already of its placeholder's dtype"

    def run(original: Callable[..., Any], sess: Any, a: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        fd = kw.get("feed_dict", a[1] if len(a) > 1 else None)
        if sess is not session or not isinstance(fd, dict):
            return original(sess, *a, **kw)
        swapped = {}
        for k, v in fd.items():
            seen = converted.get(id(k))
            # The very array converted before (its content is checked once per switch-on).
            swapped[k] = seen[1] if seen is not None and seen[0] is v else v
        if len(a) > 1:
            return original(sess, a[0], swapped, *a[2:], **kw)
        return original(sess, *a, **{**kw, "feed_dict": swapped})

    def on() -> None:
        if variant.errors:
            return
        for value, once in converted.values():
            if not np.array_equal(np.asarray(value, dtype=once.dtype), once):
                variant.errors.append("a fed array changed since it was converted")
                return
        variant.check = (
            f"{len(converted)} fed array(s) converted once equal session.run's own conversion "
            "of them, bit for bit: the same values reach the graph"
        )
        driver.variant_run = run

    def off() -> None:
        driver.variant_run = None

    names = ", ".join(sorted(str(getattr(k, "name", k)) for k in feeds if id(k) in converted))
    variant = Variant(
        TF1_FEEDS_ONCE,
        f"the arrays fed to {names} converted once to the placeholders' dtype, not every step",
        ("feed_fetch.cast",),
        True,
        "the same values, converted once instead of at every session.run",
        on,
        off,
    )
    return variant


# --- tf.function: the retraced argument as a tensor ----------------------------------------------


def tensor_args(driver: StepDriver) -> Variant | str:
    """A tf.function that retraces on a changing Python number, called with that argument as
    a tensor of the same value: one trace instead of one per value."""
    best = None
    for s in driver.facts.functions.values():
        numbers = [n for n, (_t, what) in s.changed.items() if what in _NUMBERS]
        if s.traces >= 2 and numbers and (best is None or s.traces > best[0].traces):
            best = (s, numbers)
    if best is None:
        return "no tf.function retraced on a Python number"
    stats, names = best
    fn = stats.ref
    import tensorflow as tf

    params = list(inspect.signature(fn.python_function).parameters)
    positions = {params.index(n): n for n in names if n in params}
    # A Python int becomes an int32 tensor (tf.constant's default), or an int64 one where the
    # function takes no int32 there (tf.summary's step= does not).
    int_dtype: list[Any] = [None]

    def tensor(v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool) and int_dtype[0] is not None:
            return tf.constant(v, dtype=int_dtype[0])
        return tf.constant(v)

    def transform(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        a = list(args)
        for i in positions:
            if i < len(a) and _is_number(a[i]):
                a[i] = tensor(a[i])
        kw = {k: tensor(v) if k in names and _is_number(v) else v for k, v in kwargs.items()}
        return tuple(a), kw

    probed: list[bool] = []

    def on() -> None:
        if variant.errors:
            return
        if stats.last_call is not None and not probed:
            # Traced once with the tensor first (the first time only): a function that cannot
            # take one fails here, not in the script's step.
            probed.append(True)
            failed: Exception | None = None
            for dtype in (None, tf.int64):
                int_dtype[0] = dtype
                try:
                    a, kw = transform(*stats.last_call)
                    fn.get_concrete_function(*a, **kw)
                    failed = None
                    break
                except Exception as exc:
                    failed = failed or exc
            if failed is not None:
                variant.errors.append(error_line(failed))
                return
            last = stats.last_call
            _check_once(
                variant,
                lambda: function_check(
                    driver,
                    fn,
                    last,
                    lambda raw: _call(raw, fn, transform(*last)),
                ),
            )
        driver.variant_args[id(fn)] = transform

    def off() -> None:
        driver.variant_args.pop(id(fn), None)

    listed = ", ".join(names)
    variant = Variant(
        TENSOR_ARGS,
        f"{stats.name} called with {listed} as a tensor (tf.constant) instead of a Python number",
        ("tracing",),
        True,
        f"the same values of {listed}, as tensors",
        on,
        off,
    )
    return variant


def reduce_retracing(driver: StepDriver) -> Variant | str:
    """A tf.function that retraces on tensors of changing shapes, called as a twin made with
    ``reduce_retracing=True`` (the same Python function): it traces a function general enough
    for the shapes seen, not one per shape."""
    best = None
    for s in driver.facts.functions.values():
        shapes = [n for n, (_t, what) in s.changed.items() if what == "a tensor"]
        if (
            s.traces >= 2
            and shapes
            and _own_function(s.ref)
            and (best is None or s.traces > best[0].traces)
        ):
            best = (s, shapes)
    if best is None:
        return "no tf.function of the script retraced on tensors of new shapes"
    stats, names = best
    fn = stats.ref
    python_function = getattr(fn, "python_function", None)
    if python_function is None:
        return f"{stats.name} has no Python function to trace again"
    import tensorflow as tf

    twin = tf.function(
        python_function,
        reduce_retracing=True,
        jit_compile=getattr(fn, "_jit_compile", None),
    )

    def on() -> None:
        if variant.errors:
            return
        last = stats.last_call
        if last is not None:
            _check_once(
                variant,
                lambda: function_check(driver, fn, last, lambda raw: _call(raw, twin, last)),
            )
        driver.variant_calls[id(fn)] = _swap(variant, driver, fn, twin)

    def off() -> None:
        driver.variant_calls.pop(id(fn), None)

    listed = ", ".join(names)
    variant = Variant(
        REDUCE_RETRACING,
        f"{stats.name} traced with reduce_retracing=True ({listed} change shape)",
        ("tracing",),
        True,
        f"the same computation on the same {listed}; shapes generalised, not values",
        on,
        off,
    )
    return variant


_NUMBERS = ("a Python int", "a Python float", "a Python bool")


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float))  # bool included: tf.function retraces on each too


# --- tf.function: XLA ---------------------------------------------------------------------------


def function_jit(driver: StepDriver) -> Variant | str:
    """The tf.function the steps call most, called as a ``jit_compile=True`` twin of itself
    (the same Python function, so the same variables): XLA fuses its ops."""
    best = None
    for s in driver.facts.functions.values():
        if s.calls and _own_function(s.ref) and (best is None or s.calls > best.calls):
            best = s
    if best is None or best.ref is None:
        return "no tf.function step of the script (fit's: keras_jit)"
    if functions_eagerly():
        # The twin would run its Python op by op too: eager against eager, "inconclusive".
        return f"{EAGERLY}: {best.name} runs eagerly, XLA or not"
    fn = best.ref
    xla = bool(getattr(fn, "_jit_compile", None))
    if best.traces >= 2:
        return f"{best.name} retraces: a trace per XLA compile would cost more (tensor_args)"
    python_function = getattr(fn, "python_function", None)
    if python_function is None:
        return f"{best.name} has no Python function to compile again"
    from profiler.capture.script.pipeline import py_calls

    calls = py_calls(fn)
    if calls:
        # XLA compiles no Python: its error ("Detected unsupported operations ... EagerPyFunc")
        # was the what-if's only figure.
        return (
            f"{best.name} calls Python through tf.py_function ({calls[0]}): XLA cannot compile it"
        )
    import tensorflow as tf

    # XLA on where the script has it off, off where its tf.function compiles with it.
    twin = tf.function(python_function, jit_compile=not xla, reduce_retracing=True)

    def on() -> None:
        if variant.errors:
            return
        if best.last_call is not None and not variant.check:
            # Compiled and run once first, from the step's state (put back after): a function
            # XLA cannot compile fails here, not in a step of the script.
            last = best.last_call
            try:
                _same, variant.check = function_check(
                    driver, fn, last, lambda raw: _call(raw, twin, last), XLA_RTOL
                )
            except Exception as exc:
                variant.errors.append(error_line(exc))
                return
        driver.variant_calls[id(fn)] = _swap(variant, driver, fn, twin)

    def off() -> None:
        driver.variant_calls.pop(id(fn), None)

    variant = Variant(
        FUNCTION_JIT,
        f"{best.name} without XLA (tf.function(jit_compile=False), the script's "
        "jit_compile=True off)"
        if xla
        else f"{best.name} compiled with XLA (tf.function(jit_compile=True))",
        () if xla else ("dispatch.per_op",),
        True,
        "the same computation; XLA may change the last bits of float results",
        on,
        off,
    )
    return variant


# --- Keras fit: XLA ------------------------------------------------------------------------------


def _keras_missing(model: Any, names: tuple[str, ...]) -> str | None:
    """None if the model has the Keras internals a fit what-if switches (``names``, and
    ``make_train_function`` taking ``force``), else the note saying what is missing."""
    missing = tf_internals.missing_attributes(model, ("make_train_function", *names))
    if not missing:
        try:
            params = inspect.signature(model.make_train_function).parameters
        except (TypeError, ValueError):
            params = {}  # type: ignore[assignment]
        if "force" not in params:
            missing = ["make_train_function(force=...)"]
    if not missing:
        return None
    listed = ", ".join(f"keras.Model.{m}" for m in missing)
    return tf_internals.missing_note("this what-if", listed)


def keras_jit(driver: StepDriver) -> Variant | str:
    """fit's train function rebuilt with ``jit_compile=True`` (XLA), switched in and out
    between batches (fit reads ``model.train_function`` at every batch)."""
    model = driver.facts.model
    if model is None or not driver.facts.fit:
        return "no Keras fit"
    xla = bool(getattr(model, "jit_compile", False))
    if functions_eagerly():
        return f"{EAGERLY}: fit's train function runs eagerly, XLA or not"
    if getattr(model, "train_function", None) is None:
        return "fit's train function is not built"
    missing = _keras_missing(model, ("jit_compile",))
    if missing is not None:
        return missing
    refused = None if xla else _jit_refused(model)
    if refused is not None:
        return refused
    base = model.train_function
    built: list[Any] = []

    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return built[0](*args, **kwargs)
        except Exception as exc:  # XLA cannot compile it: off, this batch as written
            if data_ended(exc):
                raise  # the epoch's data ended: fit's own loop control (a TFRecord set's end)
            variant.errors.append(error_line(exc))
            model.train_function = base
            return base(*args, **kwargs)

    def on() -> None:
        if variant.errors:
            return
        if not built:
            # XLA on where the script has it off; off where the script compiles with it (the
            # image classification example's jit_compile=True: its step 2.5x slower with it,
            # measured without the profiler, where "use XLA" was the advice).
            model.jit_compile = not xla
            try:
                model.make_train_function(force=True)
                built.append(model.train_function)
            finally:
                model.jit_compile = xla
        model.train_function = guarded

    def off() -> None:
        model.train_function = base

    variant = Variant(
        KERAS_JIT,
        "fit's train function without XLA (jit_compile=False, the script's jit_compile=True off)"
        if xla
        else "fit's train function compiled with XLA (jit_compile=True)",
        () if xla else ("dispatch.per_op",),
        True,
        "the same computation; XLA may change the last bits of float results",
        on,
        off,
    )
    return variant


def _jit_refused(model: Any) -> str | None:
    """Why Keras will not compile this model with XLA, where it will not: its ``jit_compile``
    setter warns and keeps False for a model with a layer that does not support XLA (the image
    classification tutorial's RandomFlip, RandomRotation and RandomZoom), and the what-if
    measured the script against itself as "XLA: inconclusive". The setter's warning is not
    let through to the script's output."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            model.jit_compile = True
            took = bool(getattr(model, "jit_compile", False))
        finally:
            model.jit_compile = False
    if took:
        return None
    flatten = getattr(model, "_flatten_layers", None)
    layers = sorted(
        {type(x).__name__ for x in flatten() if not getattr(x, "supports_jit", True)}
        if callable(flatten)
        else set()
    )
    why = f" (its layers {', '.join(layers[:4])} do not support XLA)" if layers else ""
    return f"Keras does not compile this model with XLA{why}: jit_compile=True runs without it"


# --- Keras fit: k batches per call ------------------------------------------------------------


def keras_steps(driver: StepDriver, k: int) -> Variant | str:
    """fit's train function as Keras builds it for ``steps_per_execution=k``, called once every
    k batches: one call runs k batches in a ``tf.while_loop`` and the k - 1 calls after it
    return its logs without running anything. The same batches, in the same order, reach the
    same train step; what it leaves out is k - 1 of every k calls of the train function (its
    Python, its dispatch, its iterator handling). fit's per-batch callbacks still run every
    batch here, where ``compile(steps_per_execution=k)`` runs them once per k batches: the
    measured saving is what the calls cost, a lower bound of what the fix saves."""
    model = driver.facts.model
    if model is None or not driver.facts.fit:
        return "no Keras fit"
    if int(getattr(model, "steps_per_execution", 1) or 1) > 1:
        return f"fit already runs {model.steps_per_execution} batches per call"
    per_epoch = driver.facts.fit.get("steps_per_epoch")
    if per_epoch == 1:
        # A call cannot run batches of two epochs (TF's basic training loops guide, one batch
        # an epoch: its blocks read "72 ms slower" beside a busy process, of a fix the
        # one-batch-epoch finding says cannot help).
        return "an epoch of fit is one batch, and a call runs the batches of one epoch only"
    if functions_eagerly():
        return f"{EAGERLY}: fit's train function runs its batches eagerly, k a call or one"
    if getattr(model, "train_function", None) is None:
        return "fit's train function is not built"
    missing = _keras_missing(model, ("steps_per_execution",))
    if missing is not None:
        return missing
    import tensorflow as tf

    base = model.train_function
    built: list[Any] = []
    state: dict[str, Any] = {"calls": 0, "iterator": None, "logs": None, "finishing": False}

    def grouped(iterator: Any) -> Any:
        if not isinstance(iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)):
            variant.errors.append("fit's batches do not come from a tf.data iterator")
            model.train_function = base
            return base(iterator)
        if iterator is not state["iterator"]:  # a new epoch's iterator: a new group
            state.update(calls=0, iterator=iterator)
        if state["calls"] % k == 0 and state["finishing"]:  # switched off, the group done
            model.train_function = base
            return base(iterator)
        if state["calls"] % k == 0:
            # Keras reads steps_per_execution when the function traces (its first call).
            model.steps_per_execution = k
            try:
                state["logs"] = built[0](iterator)
            except Exception as exc:  # off; this batch as written
                if data_ended(exc):
                    raise  # the epoch's data ended: fit's own loop control
                variant.errors.append(error_line(exc))
                model.train_function = base
                return base(iterator)
            finally:
                model.steps_per_execution = 1
        state["calls"] += 1
        return state["logs"]

    def on() -> None:
        if variant.errors:
            return
        if not built:
            model.steps_per_execution = k
            try:
                model.make_train_function(force=True)
                built.append(model.train_function)
            finally:
                model.steps_per_execution = 1
                model.train_function = base
        if model.train_function is not grouped:
            state.update(calls=0, iterator=None)
        # else a group is still finishing: it goes on (any k calls in a row hold one real one)
        state["finishing"] = False
        model.train_function = grouped

    def off() -> None:
        # A group cut short (an epoch ended inside the block) has run batches ahead of fit's
        # loop: its calls left return its logs first, then the train function is fit's own.
        if model.train_function is grouped and state["calls"] % k and not variant.errors:
            state["finishing"] = True
        else:
            model.train_function = base

    variant = Variant(
        f"{KERAS_STEPS}_{k}",
        f"fit running {k} batches per train-function call (steps_per_execution={k}, "
        "emulated with fit's callbacks still called every batch: a lower bound of the saving)",
        ("dispatch", "feed_fetch", "python"),
        True,
        "the same batches in the same order through the same train step",
        on,
        off,
        share=1 - 1 / k,
        group=k,
        settled=lambda: model.train_function is not grouped,
    )
    return variant


# --- an eager step function in tf.function -----------------------------------------------------


def eager_function(driver: StepDriver, script_globals: dict[str, Any] | None) -> Variant | str:
    """The script's eager step function (the one its automatic step's loop calls) wrapped in
    ``tf.function`` in the script's globals."""
    name = driver.facts.step_function_name
    if not name or script_globals is None or "tensorflow" not in sys.modules:
        return "no eager step function of the script"
    original = script_globals.get(name)
    if not callable(original) or hasattr(original, "python_function"):
        return f"{name} is not a plain Python function"
    import tensorflow as tf

    compiled = tf.function(original)

    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return compiled(*args, **kwargs)
        except Exception as exc:  # cannot be traced: off, this step as written
            variant.errors.append(error_line(exc))
            script_globals[name] = original
            return original(*args, **kwargs)

    def on() -> None:
        if not variant.errors:
            script_globals[name] = guarded

    def off() -> None:
        script_globals[name] = original

    variant = Variant(
        EAGER_FUNCTION,
        f"{name} wrapped in tf.function",
        ("python", "dispatch.per_op"),
        False,
        f"{name}'s Python side effects (prints, appends, Python counters) run only when it traces",
        on,
        off,
    )
    return variant


# --- tf.config.run_functions_eagerly(True) left on ------------------------------------------------


def functions_graph(driver: StepDriver) -> Variant | str:
    """The debugging switch ``tf.config.run_functions_eagerly(True)`` turned off: the script's
    tf.functions (a Keras fit's too) run as the graphs they were written to be. A custom loop
    left with it on: 19.0 ms a step, 1.1 ms without it (17x), where the verdict had led with
    "several steps per tf.function call" (20.2 ms)."""
    if not functions_eagerly():
        return "tf.config.run_functions_eagerly(True) is not in force"
    import tensorflow as tf

    # Every tf.function seen, guarded: one written for eager debugging that cannot trace (a
    # .numpy() inside) raises in its first call as a graph; the what-if is then off and that
    # call runs eagerly, as written.
    functions = [s.ref for s in driver.facts.functions.values() if s.ref is not None]

    def guarded(
        call: Callable[..., Any], own: Any, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> Any:
        try:
            return call(own, *args, **kw)
        except Exception as exc:
            variant.errors.append(error_line(exc))
            off()
            return call(own, *args, **kw)

    def on() -> None:
        if variant.errors:
            return
        tf.config.run_functions_eagerly(False)
        for fn in functions:
            driver.variant_calls[id(fn)] = guarded

    def off() -> None:
        tf.config.run_functions_eagerly(True)
        for fn in functions:
            driver.variant_calls.pop(id(fn), None)

    variant = Variant(
        FUNCTIONS_GRAPH,
        "tf.config.run_functions_eagerly(True) taken out (the tf.functions run as graphs)",
        ("python", "dispatch.per_op"),
        True,
        "the same computation, as a graph; Python side effects inside the tf.functions "
        "(prints, appends) then run only when they trace",
        on,
        off,
    )
    return variant
