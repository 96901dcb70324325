"""Where a script's steps come from, without changing the script.

Place in the pipeline: installed by the script process (``profiler.capture.script.worker``) before
the script runs; every detected step ends in ``StepDriver.boundary``
(``profiler.capture.script.driver``).

Automatic detection, patched in when the script imports the framework (``ImportWatcher``: a
numpy script never pays TensorFlow's ~2 s import):

* TF1: each outermost ``BaseSession.run`` call is a step (the first, e.g. the variables'
  initialiser, lands in the warm-up), but for a tensor's ``.eval()`` after the first step
  (an evaluation between the training calls);
* TF2: each outermost ``tf.function`` call (``Function.__call__``);
* Keras: each ``fit`` batch (a callback injected into ``fit``); calls made inside ``fit``,
  ``evaluate`` and ``predict`` are not steps.

"Outermost" is ``StepDriver.block``: a detected call, a marked step or a ``fit`` raises it, and
calls made while it is up are part of the step in progress. Only calls on the script's own
thread are steps (``StepDriver.main``). Explicit marks win over automatic detection: with
``--step-function`` or ``--step-line`` the block is raised for good before the script starts,
and the first ``profiler.step()`` raises it (``profiler.markers``); the automatic detectors then
only record what they see (the session, the model), which the phases need.

Every step runs inside the current phase's step wrapper (``StepDriver.open_wrap``, e.g. the
framework phase's ``Trace("train", step_num=i)``), entered as its call starts.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.abc
import importlib.machinery
import inspect
import os
import re
import sys
import sysconfig
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from profiler.capture import tf_internals
from profiler.capture.script.driver import (
    AT_STEPS_MAX,
    FEED_CHECKS,
    TRACED_MOST,
    FunctionStats,
    KerasCalls,
    StepDriver,
    arg_key,
)
from profiler.capture.script.source import ScriptError, body_is_step, load

_SESSION = "tensorflow.python.client.session"
_FUNCTION = "tensorflow.python.eager.polymorphic_function.polymorphic_function"
_KERAS_TRAINER = "keras.src.backend.tensorflow.trainer"
_DATASET = "tensorflow.python.data.ops.dataset_ops"


#: The fit calls whose durations are kept (``fit.call_ms``).
FIT_CALLS_KEPT = 2000


def wrap_call(fn: Callable[..., Any], driver: StepDriver, source: str) -> Callable[..., Any]:
    """``fn`` such that each outermost call is one step (for step functions and tf.function)."""
    d = driver
    counter = d.detector(source)
    ident, main = threading.get_ident, d.main

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        if d.block or ident() != main:
            counter.calls += 1
            return fn(*args, **kwargs)
        if not d.started:
            if d.defer is not None and d.defer(source):
                counter.calls += 1
                return fn(*args, **kwargs)
            d.begin()
        d.block += 1
        d.open_wrap()
        try:
            return fn(*args, **kwargs)
        finally:
            d.block -= 1
            counter.steps += 1
            d.boundary()

    return step


def wrap_function_call(fn: Callable[..., Any], driver: StepDriver) -> Callable[..., Any]:
    """``Function.__call__`` as ``wrap_call``, and each call's traces counted per function
    (its own tracing counter, ~0.3 µs a call): a retrace in the steady state is recorded with
    the step it happened in and the arguments that changed since the previous call."""
    d = driver
    stats = d.facts.functions
    step_call = wrap_call(fn, driver, "tf_function")
    ident, main = threading.get_ident, d.main
    clock = time.perf_counter_ns

    variants, swaps = d.variant_args, d.variant_calls

    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if ident() != main:
            return step_call(self, *args, **kwargs)
        if variants:
            transform = variants.get(id(self))
            if transform is not None:
                args, kwargs = transform(args, kwargs)
        if swaps:
            swap = swaps.get(id(self))
            if swap is not None:
                return swap(step_call, self, args, kwargs)
        s = stats.get(id(self))
        if s is None:
            py = getattr(self, "python_function", None)
            name = getattr(py, "__qualname__", "function")
            module, own = function_origin(py)
            evaluation = own and bool(EVAL_NAME.search(name.rsplit(".", 1)[-1].lower()))
            s = stats[id(self)] = FunctionStats(
                name,
                ref=self,
                module=module,
                own=own,
                evaluation=evaluation,
                first_step=d.done,
                jit_compile=bool(getattr(self, "_jit_compile", None)),
            )
        keys = tuple((f"#{i}", arg_key(a)) for i, a in enumerate(args)) + tuple(
            (k, arg_key(v)) for k, v in kwargs.items()
        )
        # Not an iterator's: one kept alive past its pass (fit's validation iterator, held until
        # the next call) made later validations of the segmentation tutorial 2-4.5 s instead of
        # 0.25-0.4 s (measured without the profiler, the arguments held or not, alternated).
        s.last_call = None if _iterates(args, kwargs) else (args, kwargs)
        if s.evaluation and not d.block and _trains_elsewhere(stats, s, d):
            # A validation pass's function between the training function's steps: time
            # between steps (an epoch's end), not steps of its own.
            d.detector("tf_function_evaluation").calls += 1
            s.outside += 1
            start = clock()
            try:
                return fn(self, *args, **kwargs)
            finally:
                _count_trace(self, s, keys, d.done, start)
        start = clock()
        try:
            return step_call(self, *args, **kwargs)
        finally:
            _count_trace(self, s, keys, d.done, start)

    return call


#: A script's own tf.function named as an evaluation or an inference: its calls are not steps
#: once another of the script's functions is (TF's "training loop from scratch" guide calls
#: ``test_step`` for each validation batch after each epoch's ``train_step`` calls: 3,140 of
#: 9,400 "steps"; TF's text generation tutorial calls ``generate_one_step`` for each of the
#: characters it writes after training: 200 of 302 "steps", and the run's last tenth, 0.8 ms
#: calls, read as training 230x faster).
EVAL_NAME = re.compile(
    r"(^|_)(test|val|valid|validate|validation|eval|evaluate|evaluation|predict|infer|inference"
    r"|generate|generation|sample|sampling|decode|serve)(_|$)"
)


def _iterates(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an argument, or an item of a list or tuple argument, is an iterator (it has
    ``__next__``: a tf.data iterator, a generator)."""
    for a in (*args, *kwargs.values()):
        items = a if isinstance(a, (list, tuple)) else (a,)
        if any(hasattr(type(i), "__next__") for i in items):
            return True
    return False


def _trains_elsewhere(stats: dict[int, FunctionStats], s: FunctionStats, d: StepDriver) -> bool:
    """Whether another of the script's functions, not named as an evaluation, was called, or
    ``fit``'s batches were steps (TF's text generation tutorial: 48 fit batches of ~0.5 s, then
    2,000 calls of ``generate_one_step``, 1.4 ms each, taken as steps: "the last epoch's steps
    took 1.36 ms, 323.6x faster than the timed window's 441 ms")."""
    fit = d.detectors.get("keras_fit")
    if fit is not None and fit.steps:
        return True
    return any(o is not s and o.calls and o.own and not o.evaluation for o in stats.values())


_PROFILER = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_WORKLOADS = os.path.join(_PROFILER, "workloads")


def function_origin(fn: Any) -> tuple[str, bool]:
    """The module ``fn`` is defined in, and whether it is the user's own code: not in an
    installed package (site- or dist-packages), the standard library or the profiler."""
    module = str(getattr(fn, "__module__", "") or "")
    code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
    path = os.path.abspath(code.co_filename) if code is not None else ""
    if not path:
        return module, module in ("", "__main__")
    parts = set(path.split(os.sep))
    installed = "site-packages" in parts or "dist-packages" in parts
    stdlib = path.startswith(os.path.abspath(sysconfig.get_paths()["stdlib"]) + os.sep)
    ours = path.startswith(_PROFILER + os.sep) and not path.startswith(_WORKLOADS + os.sep)
    return module, not (installed or stdlib or ours)


def _count_trace(
    fn: Any, s: FunctionStats, keys: tuple[tuple[str, Any], ...], step: int, start: int
) -> None:
    try:
        count = int(fn.experimental_get_tracing_count())
    except Exception:  # another TensorFlow, or not a Function: counting is best effort
        return
    s.calls += 1
    if count > s.last_count and (step in s.traced_ns or len(s.traced_ns) < TRACED_MOST):
        # The call traced (its first, or a retrace): its wall time, tracing and running.
        s.traced_ns[step] = s.traced_ns.get(step, 0) + time.perf_counter_ns() - start
    if s.first_count is None:
        s.first_count = count
    elif count > s.last_count:
        s.traces += count - s.last_count
        if len(s.trace_steps) < 10_000:
            s.trace_steps.append(step)
        before = dict(s.last_args)
        for name, (what, value) in keys:
            old = before.get(name)
            if old is None or old[1] != value:
                label = _arg_name(fn, name)
                seen = s.changed.setdefault(label, [0, what])
                seen[0] += 1
    s.last_count = count
    s.last_args = keys


def _arg_name(fn: Any, key: str) -> str:
    """``#1`` -> the Python function's parameter name at that position, if it has one."""
    if not key.startswith("#"):
        return key
    import inspect

    try:
        params = list(inspect.signature(fn.python_function).parameters)
        return params[int(key[1:])]
    except (AttributeError, IndexError, TypeError, ValueError):
        return f"argument {key[1:]}"


#: The function through which ``Tensor.eval()`` calls ``session.run``.
TENSOR_EVAL = "_eval_using_default_session"
#: The module whose ``Saver.save``/``restore`` call ``session.run`` (a checkpoint, not a step).
SAVER_FILE = os.path.join("training", "saver.py")
#: TensorFlow's session hooks and session manager (``MonitoredTrainingSession``), whose own
#: ``session.run`` calls (a hook's read of the global step after nearly every step, the
#: initialisation) are not steps: a MonitoredTrainingSession loop of 10,000 steps read 20,207,
#: every other one a global-step read, and "2% kernels" for the two averaged.
SESSION_HOOK_FILES = (
    os.path.join("training", "basic_session_run_hooks.py"),
    os.path.join("training", "session_manager.py"),
)


def wrap_session_run(run: Callable[..., Any], driver: StepDriver) -> Callable[..., Any]:
    """``BaseSession.run`` such that each outermost call is one step; remembers the session
    and its last call (the framework phase's FULL_TRACE steps and the hooks phase need them)."""
    d = driver
    counter = d.detector("tf1_session")
    facts = d.facts
    ident, main = threading.get_ident, d.main

    @functools.wraps(run)
    def session_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if facts.session is None:
            facts.session = self
        if d.block or ident() != main:
            counter.calls += 1
            return run(self, *args, **kwargs)
        caller = _outside_caller(sys._getframe(1))
        if counter.steps and caller.co_name == TENSOR_EVAL:
            # A tensor's .eval() between the training calls (word2vec's similarity every
            # 10,000 steps, its final embeddings): time between steps, not steps of their own.
            d.detector("tf1_tensor_eval").calls += 1
            return run(self, *args, **kwargs)
        if caller.co_filename.endswith(SESSION_HOOK_FILES):
            d.detector("tf1_session_hooks").calls += 1
            return run(self, *args, **kwargs)
        if caller.co_filename.endswith(SAVER_FILE):
            # A checkpoint (CS20's convnet saves every 10 steps, ~50 ms each): time between
            # the steps, named by the line that calls saver.save, not a step of its own.
            d.detector("tf1_saver").calls += 1
            return run(self, *args, **kwargs)
        if facts.session_hooks is None and caller.co_filename.endswith(MONITORED_FILE):
            facts.session_hooks = session_hooks(sys._getframe(1))
        if not d.started:
            d.begin()
        facts.session_call = (args, kwargs)
        facts.note_graph(counter.steps, self)
        if counter.steps < FEED_CHECKS:
            facts.note_feeds(kwargs.get("feed_dict", args[1] if len(args) > 1 else None))
        d.block += 1
        d.open_wrap()
        try:
            variant = d.variant_run
            if variant is not None:
                return variant(run, self, args, kwargs)
            return run(self, *args, **kwargs)
        finally:
            d.block -= 1
            counter.steps += 1
            d.boundary()

    return session_run


#: The module of ``MonitoredSession.run``: its steps' session runs its hooks.
MONITORED_FILE = os.path.join("training", "monitored_session.py")


def session_hooks(frame: Any) -> list[dict[str, Any]]:
    """The hooks of the MonitoredSession whose ``run`` called ``session.run`` (the ``_hooks``
    of a ``self`` up the stack), each with the period of its timer (``SecondOrStepTimer``'s
    steps or seconds): what runs every N steps (a checkpoint every 200, summaries and a
    logging hook every 100). Read once, at the first step; [] where none is found."""
    while frame is not None:
        owner = frame.f_locals.get("self")
        hooks = getattr(owner, "_hooks", None)
        if isinstance(hooks, list):
            out = []
            for hook in hooks:
                timer = getattr(hook, "_timer", None)
                steps = getattr(timer, "_every_steps", None)
                secs = getattr(timer, "_every_secs", None)
                out.append(
                    {
                        "hook": type(hook).__name__,
                        "every_steps": int(steps) if isinstance(steps, int) else None,
                        "every_secs": float(secs) if isinstance(secs, (int, float)) else None,
                    }
                )
            return out
        frame = frame.f_back
    return []


def _outside_caller(frame: Any) -> Any:
    """The code of the first caller outside the toolkit's own frames: a phase's wrapper around
    ``session.run`` (the hooks') stands between ``Saver.save`` and this one (a loop saving every
    20 steps had its saves counted as steps in the hooks window only: a slow step every 21 there,
    every 20 elsewhere, and no period found)."""
    while frame.f_back is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_PROFILER + os.sep) or path.startswith(_WORKLOADS + os.sep):
            break
        frame = frame.f_back
    return frame.f_code


def _blocked(fn: Callable[..., Any], driver: StepDriver, name: str) -> Callable[..., Any]:
    """``fn`` such that nothing it calls is a step (Keras ``evaluate``/``predict``); the script
    thread's outermost calls are counted and timed (``Facts.keras_calls``), with the number of
    samples each was given (a loop calling ``predict`` on one sample at a time)."""
    d = driver
    clock, ident, main = driver.clock, threading.get_ident, driver.main

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        # Outermost among Keras's own calls (fit's validation is inside fit), inside a step or
        # not (a loop of predict calls can be the steps).
        outer = d.keras_depth == 0 and ident() == main
        t0 = clock() if outer else 0
        in_steps = outer and d.started
        twin = d.keras_twins.get(name) if outer else None
        d.block += 1
        d.keras_depth += 1
        try:
            return fn(*args, **kwargs) if twin is None else twin(fn, args, kwargs)
        finally:
            d.block -= 1
            d.keras_depth -= 1
            if outer:
                stats = d.facts.keras_calls.get(name)
                if stats is None:
                    stats = d.facts.keras_calls[name] = KerasCalls()
                stats.calls += 1
                if len(stats.at_steps) < AT_STEPS_MAX:
                    stats.at_steps.append(d.done)
                took = clock() - t0
                stats.ns += took
                if len(stats.each_ns) < AT_STEPS_MAX:
                    stats.each_ns.append(took)
                if in_steps:
                    stats.in_steps_ns += took
                n = _samples(args[1] if len(args) > 1 else kwargs.get("x"))
                if n is not None:
                    stats.samples += n
                    stats.sized += 1

    return call


def _samples(x: Any) -> int | None:
    """The leading dimension of an array (or the first of a list/dict of arrays), if known."""
    if isinstance(x, (list, tuple)) and x:
        x = x[0]
    elif isinstance(x, dict) and x:
        x = next(iter(x.values()))
    shape = getattr(x, "shape", None)
    try:
        return int(shape[0]) if shape is not None and len(shape) > 0 else None
    except (TypeError, ValueError, IndexError):
        return None


#: ``Model.fit``'s positional index of ``callbacks`` (Keras 3).
_FIT_CALLBACKS = 5
_FIT_BATCH_SIZE = 2


def keras_marks(driver: StepDriver) -> tuple[Callable[[], None], Callable[[], None]]:
    """What ``fit``'s injected callback does per batch: (at its start, at its end)."""
    d = driver
    counter = d.detector("keras_fit")

    def begin() -> None:
        if not d.started:
            d.begin()
        d.open_wrap()

    def end() -> None:
        counter.steps += 1
        d.boundary()

    return begin, end


#: The schedule's phases (``Loop.active``) under which the script runs as written.
AS_WRITTEN = frozenset({"", "timed"})


def architecture(model: Any) -> str:
    """A short digest of a built Keras model's layer classes and weight shapes ("" where they
    cannot be read): equal for models of one architecture, whatever their weights."""
    try:
        layers = ",".join(type(layer).__name__ for layer in model.layers)
        shapes = ",".join("x".join(str(d) for d in w.shape) for w in model.weights)
    except Exception:  # a model that cannot say is not compared
        return ""
    return hashlib.blake2b(f"{layers}|{shapes}".encode(), digest_size=6).hexdigest()


def wrap_fit(fit: Callable[..., Any], driver: StepDriver) -> Callable[..., Any]:
    """``Model.fit`` with a callback that makes each training batch one step."""
    d = driver
    facts = d.facts
    ident, main = threading.get_ident, d.main
    #: The models fit has trained (ids): a new one's first validation traces its test function.
    models_seen: set[int] = set()

    @functools.cache
    def marks_class() -> type:
        # Defined at the first fit: when the trainer module is patched, keras is still being
        # imported and has no ``callbacks`` yet.
        import keras

        class StepMarks(keras.callbacks.Callback):  # type: ignore[misc]
            """Marks each batch: the phase's wrapper entered at its start, a boundary at its end."""

            def __init__(self) -> None:
                super().__init__()
                self.begin, self.end = keras_marks(d)

            def on_train_begin(self, logs: Any = None) -> None:
                params = self.params or {}
                facts.fit.setdefault("first_step", d.done)
                if id(self.model) not in models_seen:
                    # This fit's first validation traces the new model's test function (the
                    # imbalanced-data tutorial fits four new models: 0.75-1.0 s each, against
                    # ~0.2 s later ones, all but the first counted).
                    models_seen.add(id(self.model))
                    facts.fit.setdefault("first_validations", []).append(
                        len(facts.fit.get("validations_ns") or [])
                    )
                # What makes fit run eagerly: compile(run_eagerly=True) (the model's flag).
                facts.fit["run_eagerly"] = bool(getattr(self.model, "run_eagerly", False))
                # compile(jit_compile=True): its train function compiled with XLA, whose
                # kernels the framework phase's tracer does not see on a CPU.
                try:
                    facts.fit["jit_compile"] = bool(getattr(self.model, "jit_compile", False))
                except Exception:  # another Keras: not read
                    pass
                # A tf.distribute strategy the model was built under (not the default one).
                strategy = getattr(self.model, "distribute_strategy", None)
                kind = type(strategy).__name__ if strategy is not None else ""
                if kind and not kind.startswith("_Default"):
                    facts.fit["strategy"] = kind
                    replicas = getattr(strategy, "num_replicas_in_sync", None)
                    if isinstance(replicas, int):
                        facts.fit["strategy_replicas"] = replicas
                if not facts.fit.get("steps_per_epoch"):
                    facts.fit["steps_per_epoch"] = params.get("steps")
                # A fit of one batch in all (a DQN's fit on one sample per replayed
                # transition): fit's per-call set-up is paid at every step.
                steps, epochs = params.get("steps"), params.get("epochs")
                initial = int(params.get("initial_epoch") or 0)
                if steps and epochs and int(steps) * max(int(epochs) - initial, 0) == 1:
                    facts.fit["one_batch_calls"] = int(facts.fit.get("one_batch_calls") or 0) + 1
                if "total_steps" not in facts.fit:
                    # The first fit's batches, after the steps already run: the windows fit
                    # into them (a later fit's are not known). A fit called inside a loop of
                    # the script is called again: its batches bound nothing (60 fit(epochs=1)
                    # calls of 32 batches had every phase packed into the first 67 steps).
                    facts.fit["total_steps"] = (
                        d.done + int(steps) * max(int(epochs) - initial, 0)
                        if steps and epochs and not facts.fit.get("in_loop")
                        else None
                    )

            test_start: int | None = None
            test_phase = ""

            def on_test_begin(self, logs: Any = None) -> None:
                # fit's validation runs evaluate with fit's callbacks: each one is timed,
                # so a short fit (3 epochs: one boundary in the windows) still has its
                # validations' cost, the first one (its test function's trace) apart.
                self.test_phase = d.active
                self.test_start = d.clock()

            def on_test_end(self, logs: Any = None) -> None:
                start = self.test_start
                if start is not None:
                    timed = facts.fit.setdefault("validations_ns", [])
                    timed.append(d.clock() - start)
                    self.test_start = None
                    if {self.test_phase, d.active} - AS_WRITTEN:
                        # A phase instrumented or altered the loop meanwhile: not the
                        # script's own time (a conv net's 0.13 s validation read 0.2-2.9 s
                        # during the what-ifs and the line profiler).
                        facts.fit.setdefault("validations_altered", []).append(len(timed) - 1)

            def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
                # A dataset of unknown length (a TFRecordDataset's) gives fit no step count:
                # the first epoch's batches are its length (each epoch's start, a shuffle
                # buffer refilling, was read as "an evaluation" between steps, no fit's).
                if not facts.fit.get("steps_per_epoch") and epoch == 0:
                    first = int(facts.fit.get("first_step") or 0)
                    if d.done - first > 0:
                        facts.fit["steps_per_epoch"] = d.done - first
                        facts.fit["steps_per_epoch_seen"] = True

            def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
                self.begin()

            def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                self.end()

        return StepMarks

    def inject(kwargs: dict[str, Any], marks: Any) -> bool:
        given = kwargs.get("callbacks")
        if given is not None and not isinstance(given, (list, tuple)):
            if not hasattr(given, "on_train_batch_end"):
                facts.notes.append("fit(callbacks=...) is not a list: its batches are not steps")
                return False
            # One callback, not in a list, as TensorFlow's audio tutorial passes its
            # EarlyStopping (Keras flattens what it is given): fit's batches were not steps.
            given = [given]
        for c in given or ():
            _time_epoch_end(c, d)
        kwargs["callbacks"] = [*(given or ()), marks]
        return True

    fitted: set[int] = set()

    @functools.wraps(fit)
    def marked_fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        if facts.model is None:
            facts.model = self
        if d.block or ident() != main:
            return fit(self, *args, **kwargs)
        marks = marks_class()()
        if len(args) > _FIT_CALLBACKS:
            # callbacks passed by position: move it (and what follows) to keywords
            names = _fit_parameters(fit)[: len(args)]
            kwargs.update(zip(names[_FIT_CALLBACKS:], args[_FIT_CALLBACKS:], strict=True))
            args = args[:_FIT_CALLBACKS]
        if not inject(kwargs, marks):
            return fit(self, *args, **kwargs)
        if not facts.fit:
            given = {**dict(zip(_fit_parameters(fit), args, strict=False)), **kwargs}
            in_loop = _called_in_loop(sys._getframe(1))
            fed = _fed_batch(given.get("x"))
            facts.fit = {
                "batch_size": fed or given.get("batch_size") or 32,
                "batch_size_given": given.get("batch_size") is not None,
                # fit ignores batch_size for a dataset: its own batch ("dataset"), or None.
                "batch_source": "dataset" if fed else "fit",
                "epochs": given.get("epochs"),
                "validation": given.get("validation_data") is not None
                or bool(given.get("validation_split")),
                "validation_freq": given.get("validation_freq", 1),
                "validation_steps": given.get("validation_steps"),
                # Arrays (numpy or tensors): Keras 3 builds their input pipeline anew each
                # epoch (~80-130 ms an epoch here, against ~20 ms for a tf.data set built once).
                "x_kind": _input_kind(given.get("x")),
                "in_loop": in_loop,
                "validation_kind": "arrays"
                if given.get("validation_split")
                else _input_kind(given.get("validation_data")),
                "callbacks": [
                    type(c).__name__ for c in given.get("callbacks") or () if c is not marks
                ],
                # The script's own callbacks acting at batches: steps_per_execution=k calls
                # them once every k batches (a callback evaluating every 20 batches).
                "batch_callbacks": [
                    type(c).__name__
                    for c in given.get("callbacks") or ()
                    if c is not marks and _batch_hooks(c)
                ],
                # TensorBoard's histograms of every weight at each epoch's end (the TensorBoard
                # tutorial's histogram_freq=1: 56% of a small fit's loop without the profiler).
                "histogram_freq": max(
                    (_int_attr(c, "histogram_freq") for c in given.get("callbacks") or ()),
                    default=0,
                ),
                **_tensorboard_settings(given.get("callbacks") or ()),
                **_checkpoint_settings(given.get("callbacks") or ()),
            }
        # A fit called again and again (once per outer iteration, as RL and GAN scripts do):
        # each call's set-up is the cost at the boundaries, not an epoch's.
        facts.fit["calls"] = int(facts.fit.get("calls") or 0) + 1
        # The models fit trains: several, each fit once (a teacher, then a distiller, then a
        # student) are not a loop of fit calls.
        fitted.add(id(self))
        facts.fit["models"] = len(fitted)
        # Where each call's batches begin, and its model (the overfitting tutorial fits four
        # models in a row: the last, 72% of the fits' time, read as "the loop does more work
        # a step from iteration 1,200").
        starts = facts.fit.setdefault("call_steps", [])
        if len(starts) < FIT_CALLS_KEPT:
            starts.append(d.done)
            facts.fit.setdefault("call_models", []).append(str(getattr(self, "name", ""))[:80])
        d.block += 1
        d.keras_depth += 1
        t0 = d.clock()
        try:
            return fit(self, *args, **kwargs)
        finally:
            d.block -= 1
            d.keras_depth -= 1
            # The calls' time, set-up and batches together (``calls.fit_facts``), and each
            # call's, the first ``FIT_CALLS_KEPT`` (its median: the instrumented windows slow
            # the calls they hold, most of a short DQN's 64).
            took = d.clock() - t0
            facts.fit["ns"] = int(facts.fit.get("ns") or 0) + took
            kept = facts.fit.setdefault("call_ms", [])
            if len(kept) < FIT_CALLS_KEPT:
                kept.append(round(took / 1e6, 3))
                # Each call's model's architecture: new models of one architecture, one a
                # trial, could be one model reset between trials (its train function traced
                # once, not once a trial).
                facts.fit.setdefault("call_arch", []).append(architecture(self))

    return marked_fit


#: The epoch ends of the script's own callbacks timed at most (``fit.epoch_ends``).
EPOCH_ENDS_MAX = 1000


def _time_epoch_end(callback: Any, driver: StepDriver) -> None:
    """The script's callback with its ``on_epoch_end`` timed, once per instance: each call as
    ``[class name, ms, altered]`` in ``fit.epoch_ends`` (``altered``: a phase instrumented or
    altered the loop meanwhile). A checkpoint each epoch is part of the epoch boundary: a fit
    of 20-batch epochs saved a .keras file in 28-39 ms of a ~250 ms epoch, without the profiler,
    and the boundary read "the rest is the next epoch's set-up"."""
    own = getattr(callback, "on_epoch_end", None)
    if own is None or getattr(own, "_profiler_timed", False):
        return
    d, name = driver, type(callback).__name__

    @functools.wraps(own)
    def timed(*args: Any, **kwargs: Any) -> Any:
        before, t0 = d.active, d.clock()
        try:
            return own(*args, **kwargs)
        finally:
            ends = d.facts.fit.setdefault("epoch_ends", [])
            if len(ends) < EPOCH_ENDS_MAX:
                altered = bool({before, d.active} - AS_WRITTEN)
                ends.append([name, round((d.clock() - t0) / 1e6, 3), altered])

    timed._profiler_timed = True  # type: ignore[attr-defined]
    try:
        callback.on_epoch_end = timed
    except (AttributeError, TypeError):  # a callback whose attributes are fixed
        pass


def _tensorboard_settings(callbacks: Any) -> dict[str, Any]:
    """What a TensorBoard callback writes besides each epoch's scalars, as ``tb_*`` keys
    (none without one): its ``update_freq`` ("epoch" or every N batches), whether it profiles
    batches, ``write_images`` and ``embeddings_freq``. Keras 3's defaults write the least: a
    fit with a default TensorBoard was told "update_freq='epoch', profile_batch=0"."""
    tb = next((c for c in callbacks if type(c).__name__ == "TensorBoard"), None)
    if tb is None:
        return {}
    freq = getattr(tb, "update_freq", "epoch")
    return {
        "tb_update_freq": freq if isinstance(freq, (int, str)) else str(freq),
        "tb_profiling": bool(getattr(tb, "_should_trace", False)),
        "tb_write_images": bool(getattr(tb, "write_images", False)),
        "tb_embeddings_freq": _int_attr(tb, "embeddings_freq"),
    }


def _checkpoint_settings(callbacks: Any) -> dict[str, Any]:
    """A ModelCheckpoint callback's settings, as ``ckpt_*`` keys (none without one): whether it
    saves the weights only, the best only, and how often (``save_freq``: "epoch" or every N
    batches). A fit given save_weights_only=True was told to set it."""
    ck = next((c for c in callbacks if type(c).__name__ == "ModelCheckpoint"), None)
    if ck is None:
        return {}
    freq = getattr(ck, "save_freq", "epoch")
    return {
        "ckpt_weights_only": bool(getattr(ck, "save_weights_only", False)),
        "ckpt_best_only": bool(getattr(ck, "save_best_only", False)),
        "ckpt_save_freq": freq if isinstance(freq, (int, str)) else str(freq),
    }


#: A callback's methods called at each batch.
BATCH_HOOKS = ("on_train_batch_end", "on_train_batch_begin", "on_batch_end", "on_batch_begin")


def _batch_hooks(callback: Any) -> bool:
    """Whether a callback of the script's own (not Keras's) defines a method called at each
    batch, or a Keras LambdaCallback was given one (``on_batch_end=lambda batch, logs:
    weights.append(model.get_weights())``: an instance attribute)."""
    attrs = getattr(callback, "__dict__", {})
    if any(callable(attrs.get(name)) for name in BATCH_HOOKS):
        return True
    for cls in type(callback).__mro__:
        if str(getattr(cls, "__module__", "")).startswith(("keras", "tensorflow")):
            continue
        if any(name in vars(cls) for name in BATCH_HOOKS):
            return True
    return False


def _int_attr(obj: Any, name: str) -> int:
    """``obj.name`` where it is a whole number, else 0."""
    value = getattr(obj, name, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _fed_batch(x: Any) -> int | None:
    """The batch size of a ``tf.data`` dataset given to ``fit`` (which then ignores its own
    ``batch_size``): the nearest ``batch`` in the dataset's chain, or None (not a dataset, or
    no batch found: a Keras example's windowed dataset batches 256 while fit's default is 32).
    A Keras ``PyDataset`` (or ``Sequence``) batches in its ``__getitem__``: its ``batch_size``
    attribute where it keeps one, as the usual data generator does (a blog's generator of 64
    read as fit's default 32)."""
    if any(c.__name__ in ("PyDataset", "Sequence") for c in type(x).__mro__[1:]):
        kept = _int_attr(x, "batch_size")
        return kept if kept > 0 else None
    d, depth = x, 0
    while d is not None and depth < 12:
        size = getattr(d, "_batch_size", None)
        if size is not None:
            try:
                value = int(size.numpy()) if hasattr(size, "numpy") else int(size)
            except (TypeError, ValueError, AttributeError):
                return None
            return value if value > 0 else None
        d, depth = getattr(d, "_input_dataset", None), depth + 1
    return None


def _called_in_loop(frame: Any) -> bool:
    """Whether the first frame of the script's own file (``__main__``'s) among the callers is
    at a line inside one of its ``for`` or ``while`` loops."""
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    while frame is not None and script is not None:
        if os.path.abspath(frame.f_code.co_filename) == os.path.abspath(script):
            return frame.f_lineno in _loop_lines(os.path.abspath(script))
        frame = frame.f_back
    return False


@functools.cache
def _loop_lines(path: str) -> frozenset[int]:
    """The lines inside the bodies of a file's ``for`` and ``while`` loops (none where it
    cannot be read or parsed)."""
    import ast
    from pathlib import Path

    try:
        tree = load(Path(path)).tree
    except ScriptError:
        return frozenset()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and node.body:
            end = node.body[-1].end_lineno or node.body[-1].lineno
            lines.update(range(node.body[0].lineno, end + 1))
    return frozenset(lines)


def _input_kind(x: Any) -> str | None:
    """What ``fit`` was given as data: ``arrays`` (numpy arrays or tensors, or a tuple, list or
    dict of them), ``dataset`` (tf.data), another type's name, or None (nothing given)."""
    if x is None:
        return None
    items = list(x.values() if isinstance(x, dict) else x if isinstance(x, (tuple, list)) else (x,))
    if items and all(hasattr(i, "shape") and hasattr(i, "dtype") for i in items):
        return "arrays"
    if hasattr(x, "element_spec"):
        return "dataset"
    return type(x).__name__


@functools.cache
def _fit_parameters(fit: Callable[..., Any]) -> tuple[str, ...]:
    """``fit``'s positional parameter names after ``self``."""
    import inspect

    params = list(inspect.signature(inspect.unwrap(fit)).parameters)
    return tuple(params[1:])


# --- patching on import -----------------------------------------------------------------------


#: The TensorFlow modules ``import tensorflow`` imports, patched as they are: what each
#: detects (Keras's trainer is imported later, with Keras).
_TF_MODULES = {
    _SESSION: "session.run steps",
    _FUNCTION: "tf.function steps",
    _DATASET: "the tf.data pipelines iterated",
}


class Patches:
    """The framework patches: applied when their module is imported, recorded for the notes,
    taken back by ``restore`` (a run inside a live process leaves it as it found it).

    Each patch first checks that its module has what it replaces
    (``profiler.capture.tf_internals``): where it does not, that detector steps aside with a
    note naming what is missing and the TensorFlow version, and the others still run.
    """

    def __init__(self, driver: StepDriver) -> None:
        self.driver = driver
        self.applied: list[str] = []
        #: (class, attribute, its own value before the patch), in patch order.
        self.originals: list[tuple[type, str, Any]] = []

    def hooks(self) -> dict[str, Callable[[ModuleType], None]]:
        return {
            _SESSION: self.session,
            _FUNCTION: self.function,
            _KERAS_TRAINER: self.keras,
            _DATASET: self.dataset,
            # Last: runs once ``import tensorflow`` is done, after the modules it imports.
            "tensorflow": self.tensorflow,
        }

    def _has(self, module: ModuleType, names: tuple[str, ...], what: str) -> bool:
        """Whether ``module`` has every attribute of ``names``; if not, a note says that
        ``what`` is not detected, and why."""
        missing = tf_internals.missing_attributes(module, names)
        if missing:
            self.driver.facts.notes.append(
                tf_internals.missing_note(
                    f"detecting {what}", ", ".join(f"{module.__name__}.{m}" for m in missing)
                )
            )
        return not missing

    def _set(self, cls: type, name: str, wrap: Callable[[Any], Any]) -> None:
        own = vars(cls)[name]
        self.originals.append((cls, name, own))
        setattr(cls, name, wrap(own))

    def restore(self) -> None:
        """Every patched attribute back to what it was, last patch first."""
        while self.originals:
            cls, name, own = self.originals.pop()
            setattr(cls, name, own)

    def session(self, module: ModuleType) -> None:
        if not self._has(module, ("BaseSession.run",), _TF_MODULES[_SESSION]):
            return
        self._set(module.BaseSession, "run", lambda f: wrap_session_run(f, self.driver))
        self.applied.append("tf1_session: BaseSession.run")

    def function(self, module: ModuleType) -> None:
        if not self._has(module, ("Function.__call__",), _TF_MODULES[_FUNCTION]):
            return
        # The what-ifs' results checks call functions past the detector (no step, no count).
        self.driver.raw_function_call = vars(module.Function)["__call__"]
        self._set(module.Function, "__call__", lambda f: wrap_function_call(f, self.driver))
        self.applied.append("tf_function: Function.__call__")

    def keras(self, module: ModuleType) -> None:
        if not self._has(module, ("TensorFlowTrainer.fit",), "Keras fit's batches as steps"):
            return
        cls = module.TensorFlowTrainer
        d = self.driver
        self._set(cls, "fit", lambda f: wrap_fit(f, d))
        for name in ("evaluate", "predict", "predict_on_batch", "test_on_batch"):
            if name in vars(cls):
                self._set(cls, name, functools.partial(_blocked, driver=d, name=name))
        # compile, counted: each call makes a new optimizer and a new train function, traced
        # at its next batch (a loop recompiling to change the learning rate: ~75% of its time
        # without the profiler, read as "each fit call's set-up").
        owner = next((c for c in cls.__mro__ if "compile" in vars(c)), None)
        if owner is not None:
            self._set(owner, "compile", functools.partial(_blocked, driver=d, name="compile"))
        self.applied.append(
            "keras_fit: TensorFlowTrainer.fit (evaluate, predict, predict_on_batch, test_on_batch: "
            "no steps; compile counted)"
        )

    def dataset(self, module: ModuleType) -> None:
        if not self._has(module, ("DatasetV2.__iter__",), _TF_MODULES[_DATASET]):
            return
        self._set(module.DatasetV2, "__iter__", lambda f: wrap_dataset_iter(f, self.driver))
        self.applied.append("tf_data: DatasetV2.__iter__ (the pipelines iterated)")
        # A TF1 graph's iterators (tf.compat.v1.data.make_one_shot_iterator, an initializable
        # one): the pipeline feeds session.run without a Python iteration (a py_func map's
        # pipeline, ~37% of a convnet's step CPU, was "not recorded (no tf.data iterated)").
        v1 = getattr(module, "DatasetV1", None)
        for name in ("_make_one_shot_iterator", "_make_initializable_iterator"):
            if v1 is not None and callable(getattr(v1, name, None)):
                self._set(v1, name, lambda f: wrap_graph_iterator(f, self.driver))
                self.applied.append(f"tf_data: DatasetV1.{name} (a TF1 graph's pipelines)")

    def tensorflow(self, module: ModuleType) -> None:
        """Once ``import tensorflow`` is done: a note for each module above it did not import
        (this TensorFlow keeps that code elsewhere: nothing of it is detected), and one when
        its version is outside the tested range."""
        notes = self.driver.facts.notes
        version = getattr(module, "__version__", None)
        for name, what in _TF_MODULES.items():
            if name not in sys.modules:
                missing = f"module {name}"
                notes.append(tf_internals.missing_note(f"detecting {what}", missing, version))
        untested = tf_internals.tf_version_note(version)
        if untested is not None:
            notes.append(untested)


def wrap_dataset_iter(fn: Callable[..., Any], driver: StepDriver) -> Callable[..., Any]:
    """``DatasetV2.__iter__`` that records each dataset the script's thread iterates."""
    pipelines = driver.facts.pipelines
    ident, main = threading.get_ident, driver.main

    @functools.wraps(fn)
    def iterate(self: Any) -> Any:
        if ident() != main:
            return fn(self)
        try:
            pipelines.iterated(self)
        except Exception:  # describing is best effort; iterating must not change
            pass
        it = fn(self)
        pipelines.iterator(self, it)
        return it

    return iterate


def wrap_graph_iterator(fn: Callable[..., Any], driver: StepDriver) -> Callable[..., Any]:
    """``DatasetV1._make_one_shot_iterator`` (or ``_make_initializable_iterator``) that records
    the dataset a TF1 graph's iterator reads (the V2 dataset a ``DatasetV1Adapter`` wraps)."""
    pipelines = driver.facts.pipelines
    ident, main = threading.get_ident, driver.main

    @functools.wraps(fn)
    def make(self: Any, *args: Any, **kwargs: Any) -> Any:
        if ident() == main:
            try:
                with warnings.catch_warnings():
                    # Reading its options in graph mode warns: not the script's to see.
                    warnings.simplefilter("ignore")
                    pipelines.iterated(getattr(self, "_dataset", self))
            except Exception:  # describing is best effort; the iterator must not change
                pass
        return fn(self, *args, **kwargs)

    return make


class ImportWatcher(importlib.abc.MetaPathFinder):
    """Runs a hook right after a watched module is first imported, and a ``before`` hook as a
    watched module's import begins (each once, then forgotten).

    The watched module's spec comes from the other finders; only its own loader's
    ``exec_module`` is wrapped (an instance attribute, removed once it ran), so every other
    import is untouched.
    """

    def __init__(
        self,
        hooks: dict[str, Callable[[ModuleType], None]],
        notes: list[str],
        before: Mapping[str, Callable[[str], None]] | None = None,
    ) -> None:
        self.hooks = dict(hooks)
        self.before = dict(before or {})
        self.notes = notes

    def install(self) -> None:
        """Hook modules already imported now; watch for the rest."""
        for name in list(self.hooks):
            if name in sys.modules:
                self._run(name, sys.modules[name])
        for name in list(self.before):
            if name in sys.modules:
                self.before.pop(name)
        if self.hooks or self.before:
            sys.meta_path.insert(0, self)

    def _run(self, name: str, module: ModuleType) -> None:
        hook = self.hooks.pop(name)
        try:
            hook(module)
        except Exception as exc:  # never break the script's import; say what was not detected
            self.notes.append(f"could not patch {name} ({type(exc).__name__}: {exc})")
        self._done()

    def _done(self) -> None:
        if not self.hooks and not self.before and self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname in self.before:
            hook = self.before.pop(fullname)
            try:
                hook(fullname)
            except Exception as exc:  # never break the script's import
                self.notes.append(f"before importing {fullname}: {type(exc).__name__}: {exc}")
            self._done()
        if fullname not in self.hooks:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if not isinstance(loader, importlib.machinery.SourceFileLoader):
            return spec
        original = loader.exec_module
        watcher = self

        def exec_module(module: ModuleType) -> None:
            try:
                original(module)
            finally:
                vars(loader).pop("exec_module", None)
            watcher._run(fullname, module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


# --- explicit marks ---------------------------------------------------------------------------


def step_function_decorator(driver: StepDriver, targets: list[Any]) -> Callable[[Any], Any]:
    """The decorator ``--step-function`` compiles onto the named function (outermost).

    Each outermost call of the decorated object is one step; framework calls inside it are part
    of it (the automatic detectors stay blocked in this mode, recording only what they see).
    The undecorated function goes to ``targets`` (the lines phase profiles it).
    """
    d = driver
    counter = d.detector("step_function")

    def __profiler_step_function__(fn: Any) -> Any:
        targets.append(fn)
        depth = 0

        @functools.wraps(fn)
        def step(*args: Any, **kwargs: Any) -> Any:
            nonlocal depth
            if depth:
                counter.calls += 1
                return fn(*args, **kwargs)
            if not d.started:
                d.begin()
            depth += 1
            d.open_wrap()
            try:
                return fn(*args, **kwargs)
            finally:
                depth -= 1
                counter.steps += 1
                d.boundary()

        return step

    return __profiler_step_function__


def step_line_marks(driver: StepDriver) -> tuple[Callable[[], None], Callable[[], None]]:
    """The two calls ``--step-line`` compiles in: at the line, and after its loop.

    At the line: the step in progress ends (the first execution starts the first step) and the
    next one begins, inside the phase's step wrapper. After the loop: its last step ends; the
    time until the line runs again belongs to the next step (boundaries stay back to back).
    """
    d = driver
    counter = d.detector("step_line")
    in_step = False

    def __profiler_step_line__() -> None:
        nonlocal in_step
        if in_step:
            counter.steps += 1
            d.boundary()
        elif not d.started:
            d.begin()
        else:
            d.entered_loop()
        in_step = True
        d.open_wrap()

    def __profiler_step_line_end__() -> None:
        nonlocal in_step
        if in_step:
            in_step = False
            counter.steps += 1
            d.boundary()
            d.left_loop()

    return __profiler_step_line__, __profiler_step_line_end__


# --- automatic steps: the loop whose iterations are the steps ----------------------------------

#: Loop activity watched before a loop is chosen: DECIDE_S, or DECIDE_EARLY_S once a loop has
#: EARLY_ITERATIONS timed iterations.
DECIDE_S = 1.0
DECIDE_EARLY_S = 0.25
EARLY_ITERATIONS = 50
#: A loop of long iterations (seconds each) has no two timed iterations after DECIDE_S: the
#: choice waits for a candidate, looked for every RECHECK_S, until DECIDE_MAX_S.
DECIDE_MAX_S = 30.0
RECHECK_S = 0.1
#: A loop's timed iterations must hold this share of the time watched to be a candidate.
MIN_COVERAGE = 0.3
#: Iterations shorter than this (as watched: the watcher's mark adds ~0.8 µs) are an inner
#: loop's, never chosen: a numpy step of 3.8 µs alone is watched at 4.5-5 µs, and its first 57
#: iterations averaged 4.99 µs on a busy machine, under the 5 µs this was before (the whole run
#: became one step); a pure-Python loop of 0.28 µs iterations is watched at 1.1 µs.
MIN_ITERATION_NS = 2_500
#: A loop most of whose first ``EARLY_ITERATIONS`` (or more) timed iterations are under this is
#: no longer timed (too short ever to be chosen; timing it costs the script ~0.8 µs an iteration).
DROP_ITERATION_NS = 1_500
#: Iteration starts kept per candidate loop while watched (``LoopMarks.typical``), each after
#: an iteration of at least SNAP_MIN_NS.
SNAPS_MAX = 512
SNAP_MIN_NS = 3_000
#: The step time a training loop's iteration is typically near (log scale): an epoch loop is
#: far above it, a loop over the samples or layers of one batch far below.
TARGET_STEP_NS = 10_000_000
#: A candidate loop whose last two iterations each made at least this many outermost
#: tf.function calls is the steps, not those calls (Keras's DDPG example: per environment step
#: the eager actor call, ``Buffer.update`` and two ``update_target`` calls, 23.9 ms; its three
#: calls were taken as three steps, a third of an iteration each, and the eager call between
#: them read as "one step in every 3 is 6.8x a normal step").
CALLS_PER_ITERATION = 2
#: The tf.function calls held back (no step) while a candidate loop is watched for them, at
#: most: a loop of more per iteration is an epoch's, its calls the steps.
HELD_CALLS_MAX = 24


class LoopMarks:
    """The marks ``source.mark_loops`` compiles into every loop, and the choice between them.

    Until a loop is chosen, each mark counts its loop's iterations and times them (from one
    iteration's start to the next, or to the loop's end). Only the loops that update the
    model in their own body are watched when the script has any (``source.UPDATE_WORDS``),
    else those whose code names training (``source.TRAINING_WORDS``). After
    ``DECIDE_S`` of loop activity (sooner for a busy loop; later, up to ``DECIDE_MAX_S``, while
    no loop qualifies: a loop of 2 s iterations has two timed ones after 4 s), the loop is
    chosen whose iterations
    hold at least ``MIN_COVERAGE`` of that time and whose mean iteration, at least
    ``MIN_ITERATION_NS``, is nearest ``TARGET_STEP_NS`` (log scale); from then on its
    iterations are steps (as ``--step-line`` on its header) and the other marks return at
    once. If a framework detector found steps first (``session.run``, a ``tf.function``,
    ``fit``), no loop is chosen.
    """

    def __init__(
        self,
        driver: StepDriver,
        sites: list[Any],
        choose: bool = True,
        fits: bool = False,
        preset: tuple[str, int] | None = None,
    ) -> None:
        self.driver = driver
        #: (file, line) of a module's loop a first run chose or would have chosen: chosen as
        #: soon as its module is marked (``add``), no watching.
        self.preset = preset
        self.sites: list[Any] = []
        self.fits = fits
        #: False (``--no-auto-step``): the loops are watched and the best one only suggested.
        self.choose = choose
        self.suggested = -1
        # Per loop (``add``): its iterations, those timed and their time, those shorter than
        # ``DROP_ITERATION_NS``, its current iteration's start, when its first began, how
        # many times it ran to its end while watched (candidates), and for the updating loops
        # how many times they ended (``_drives_inner``).
        self.count: list[int] = []
        self.timed: list[int] = []
        self.total_ns: list[int] = []
        self.short: list[int] = []
        self.last: list[int] = []
        self.began: list[int] = []
        self.ends: list[int] = []
        self.update_ends: list[int] = []
        #: Per candidate, at each of its iterations' starts while watched (up to SNAPS_MAX):
        #: the time and every loop's count, for the typical iteration (``typical``).
        self.snaps: list[list[tuple[int, list[int], list[int]]]] = []
        #: tf.function calls held back before any step (``defer``), and per candidate loop
        #: that count at its last three iteration starts with every loop's count then: the
        #: calls each of its iterations made, and the loops that iterated once a call.
        self.held_at: list[list[tuple[int, list[int]]]] = []
        self.deferred = 0
        self.deferred_ns = 0
        self.released = False
        #: The chosen loop's iterations before its first step.
        self.watched_n = 0
        self.first_ns = 0
        #: The latest loop activity watched (an iteration's start or a loop's end).
        self.active_ns = 0
        self.checked = 0
        self.chosen = -1
        self.decided = False
        self.why = ""
        self.in_step = False
        self.counter = driver.detector("auto_loop")
        self.ident, self.main = threading.get_ident, driver.main
        self.updating: list[bool] = []
        #: Loops that call a function holding an updating loop (``LoopSite.drives``): one
        #: whose updating loop ends twice or more in each of its iterations is a per-region or
        #: per-filter loop of the step it calls (``_drives_inner``).
        self.drives: list[bool] = []
        self.candidate: list[bool] = []
        #: The loops that are no candidate, counted and timed once a candidate has started: a
        #: loop inside the steps that names no training (a k-means step's loop over its 3,000
        #: points) is what the step spends its time in (``profiler.diagnoses.loops``).
        self.tally: list[bool] = []
        #: Per loop, whether its iterations call ``mark`` at all (the marked code reads
        #: ``on[k]`` first, ``source.LOOP_ON``): a loop that is no candidate is only tallied
        #: once a candidate has started, and after the choice only the chosen loop's marks
        #: count. A data-preparation loop's 800,000 iterations before the first step paid a
        #: call each (0.4 s of Python made 0.6-1.0 s). Extended in place by ``add``.
        self.on = bytearray()
        self.add(sites)
        if choose:
            driver.defer = self.defer

    def add(self, sites: list[Any]) -> None:
        """Watch ``sites`` too: the script's loops, then those of each module of the script's
        own folder as it is imported (``OwnModules``; CS231n's ``Solver.train`` loop, in
        ``solver.py``, was never seen and the whole run was one step). Before any loop ran,
        the candidates are chosen again over all of them; after, a module's loops are only
        tallied."""
        m = len(sites)
        self.sites.extend(sites)
        for values in (
            self.count,
            self.timed,
            self.total_ns,
            self.short,
            self.last,
            self.began,
            self.ends,
            self.update_ends,
        ):
            values.extend([0] * m)
        self.snaps.extend([] for _ in range(m))
        self.held_at.extend([] for _ in range(m))
        self.on.extend(bytes(m))
        self.updating = [bool(getattr(s, "updates", False)) for s in self.sites]
        self.drives = [bool(getattr(s, "drives", False)) for s in self.sites]
        first = len(self.sites) - m
        if self.preset is not None and not self.decided and self.choose:
            for k in range(first, len(self.sites)):
                site = self.sites[k]
                if (getattr(site, "file", ""), site.line) == self.preset:
                    self.decided, self.chosen = True, k
                    self.why = (
                        f"the {site.kind} loop at {self.where(site)} ({site.function}), the "
                        "steps of the script's first run"
                    )
                    self.candidate.extend([False] * m)
                    self.tally.extend([False] * m)
                    self.on[:] = bytes(j == k for j in range(len(self.on)))
                    return
        if self.first_ns or self.decided:
            self.candidate.extend([False] * m)
            self.tally.extend([not self.decided] * m)
            return
        # The candidates: the loops that update the model in their own body if there are any,
        # else those whose code names training, else all (a long data-loading loop before the
        # training, or an epoch loop around the batches, is not chosen).
        updates = self.updating
        trains = [bool(getattr(s, "training", False)) for s in self.sites]
        # A script calling Keras's fit with no loop of its own training: none (fit's batches
        # are its steps; beside a busy process, a data loop building pairs before fit ran
        # over a second and was chosen: "Python 100%, wrap line 42 in tf.function").
        fallback = [not self.fits] * len(self.sites)
        candidate = updates if any(updates) else trains if any(trains) else fallback
        # A loop that runs once in a while from another (under ``if n % 100 == 0``, or in a
        # function only called so) is no step where another candidate is: min-char-rnn's
        # gradient check ran first (n == 0) and its loop was taken as the steps.
        periodic = [bool(getattr(s, "periodic", False)) for s in self.sites]
        if any(c and not p for c, p in zip(candidate, periodic, strict=True)):
            candidate = [c and not p for c, p in zip(candidate, periodic, strict=True)]
        self.candidate = list(candidate)
        self.tally = [not c for c in self.candidate]
        self.on[:] = bytes(map(bool, self.candidate))

    @staticmethod
    def where(site: Any) -> str:
        """``line 12``, or ``line 128 of cs231n/solver.py`` for a loop of another file."""
        file = getattr(site, "file", "")
        return f"line {site.line} of {file}" if file else f"line {site.line}"

    def mark(self, k: int) -> None:
        if self.decided:
            if k == self.chosen and self.ident() == self.main:
                self._step()
            return
        # Only the script's own thread: a loader thread's per-sample loop, counted as the
        # steps' inner loop, read "each step runs the loop at line 15 (make_batch) 127 times".
        if self.ident() != self.main:
            return
        if not self.candidate[k]:
            if self.tally[k] and self.first_ns:
                self._tally(k)
            return
        d = self.driver
        t = d.clock()
        if d.started:  # a framework detector's steps came first
            self.decided = True
            self.why = "steps came from the framework first"
            self.on[:] = bytes(len(self.on))
            return
        if not self.first_ns:
            self.first_ns = t
            self.on[:] = bytes(c or t for c, t in zip(self.candidate, self.tally, strict=True))
        if self.deferred and not self.released and not d.block and self._calls_decide(k):
            return
        prev = self.last[k]
        if self._iteration(k, t):
            # Too short ever to be chosen: no longer timed (a 1 µs inner loop watched for
            # DECIDE_MAX_S made a 0.8 s script take 8.5 s).
            self.candidate[k] = False
            self.tally[k] = False
            self.on[k] = 0
        elif t - prev >= SNAP_MIN_NS and len(self.snaps[k]) < SNAPS_MAX:
            # After an iteration that could be a step only: a snapshot allocates (~1 µs with
            # the memory probe's tracemalloc on), and at each 0.05 µs iteration of an inner
            # loop it kept that loop from proving too short for 49,000 iterations.
            self.snaps[k].append((t, self.count.copy(), self.total_ns.copy()))
            # Its iteration is timed from after the snapshot: a per-sample loop's iterations
            # (Nielsen's, ~1.1 of its step already) must not grow by the watcher's own work.
            self.last[k] = d.clock()
        self.active_ns = t
        watched = t - self.first_ns
        if watched >= DECIDE_S * 1e9 or (
            watched >= DECIDE_EARLY_S * 1e9 and self.timed[k] >= EARLY_ITERATIONS
        ):
            if watched < DECIDE_MAX_S * 1e9 and t - self.checked < RECHECK_S * 1e9:
                return
            self.checked = t
            if watched < DECIDE_MAX_S * 1e9:
                best = self._best(watched)
                if best is None:
                    return  # no candidate yet: a loop of long iterations has not had two
                if self._inside_first(best[0]):
                    return  # the loop around it has not had two iterations yet
            self._decide(watched)
            if self.chosen >= 0:
                # The iteration this mark began is the first step when its loop is chosen.
                self.watched_n = self.count[self.chosen] - (k == self.chosen)
            if k == self.chosen:
                self._step()

    def end(self, k: int) -> None:
        if self.decided:
            # Every loop's end runs this: only the chosen one's pays for the thread check.
            if k == self.chosen and self.in_step and self.ident() == self.main:
                self.in_step = False
                self.driver.block -= 1
                self.counter.steps += 1
                self.driver.boundary()
                self.driver.left_loop()
            return
        if self.ident() != self.main:
            return
        if self.updating[k]:
            self.update_ends[k] += 1
        if self.candidate[k]:
            self.ends[k] += 1
        last = self.last[k]
        if last and (self.candidate[k] or self.tally[k]):
            now = self.driver.clock()
            self.timed[k] += 1
            self.total_ns[k] += now - last
            self.last[k] = 0
            if self.candidate[k]:
                self.active_ns = now

    def defer(self, source: str) -> bool:
        """Whether a tf.function call that would begin the steps is held back (counted, no
        step): it runs inside an iteration of a candidate loop, watched for the calls its
        iterations make (``_calls_decide``), until ``HELD_CALLS_MAX`` calls."""
        if self.decided or self.released or source != "tf_function":
            return False
        if self.ident() != self.main:
            return False
        if not any(c and last for c, last in zip(self.candidate, self.last, strict=True)):
            return False
        if self.deferred >= HELD_CALLS_MAX:
            self.released = True
            return False
        if not self.deferred:
            self.deferred_ns = self.driver.clock()
        self.deferred += 1
        return True

    def _calls_decide(self, k: int) -> bool:
        """At an iteration start of candidate ``k`` before any step: whether its last two
        iterations each made ``CALLS_PER_ITERATION`` or more held tf.function calls while no
        other loop iterated once a call (those are the steps' loop: an epoch loop around the
        batches is not); then ``k`` is chosen and this iteration is the first step (True).
        Where ``k``'s iterations made one call each, the calls are the steps (released)."""
        if not self.deferred:
            return False  # no call held yet (a numpy loop pays this test only)
        held = self.held_at[k]
        if not held and self.deferred == 1:
            self.released = True  # the iteration before made one call: the calls are the steps
            return False
        held.append((self.deferred, self.count.copy()))
        if len(held) > 3:
            del held[0]
        if len(held) < 3:
            return False
        (a, ca), (b, _), (c, cc) = held
        per = (b - a, c - b)
        if per == (1, 1):
            self.released = True  # one call an iteration: the calls are the steps
            return False
        if min(per) < CALLS_PER_ITERATION:
            return False
        calls = c - a
        if any(j != k and cc[j] - ca[j] >= calls for j in range(len(cc))):
            self.released = True  # a loop inside runs once a call: its calls are the steps
            return False
        site = self.sites[k]
        self.decided = True
        self.chosen = k
        self.why = (
            f"the {site.kind} loop at {self.where(site)} ({site.function}): each of its "
            f"iterations made {per[1]} tf.function calls (the calls are parts of its steps)"
        )
        sc = getattr(site, "calls", ())
        if sc and not body_is_step(site):
            self.driver.facts.step_function_name = sc[0]
        self.on[:] = bytes(j == k for j in range(len(self.on)))
        self.watched_n = self.count[k]
        self._step()
        return True

    def _tally(self, k: int) -> None:
        """Count and time an iteration of a loop that is not a candidate (its own stats only:
        no choice, no coverage); stop timing it once its iterations prove too short."""
        if self._iteration(k, self.driver.clock()):
            self.tally[k] = False
            self.on[k] = self.candidate[k]

    def _iteration(self, k: int, t: int) -> bool:
        """Count an iteration of loop ``k`` starting at ``t`` and time the one before it;
        whether its first ``EARLY_ITERATIONS`` prove too short ever to be a step."""
        last = self.last[k]
        short = False
        if last:
            self.timed[k] += 1
            self.total_ns[k] += t - last
            if t - last < DROP_ITERATION_NS:
                self.short[k] += 1
            # Most iterations short, not their mean: one slow first iteration (0.3 ms) kept
            # a 1.4 µs loop's mean above the bar for 2,800 iterations.
            short = self.timed[k] >= EARLY_ITERATIONS and 2 * self.short[k] > self.timed[k]
        self.last[k] = t
        if not self.count[k]:
            self.began[k] = t
        self.count[k] += 1
        return short

    def _step(self) -> None:
        d = self.driver
        if self.in_step:
            self.counter.steps += 1
            d.boundary()
        else:
            if not d.started:
                d.begin()
            else:
                d.entered_loop()
            # Framework calls inside the loop's steps are part of them, not steps of their own.
            d.block += 1
            self.in_step = True
        d.open_wrap()

    def _best(self, watched: int) -> tuple[int, float] | None:
        """(loop, mean iteration ns) of the best candidate over ``watched`` ns, or None."""
        import math

        best = None
        for k in range(len(self.sites)):
            if not self.candidate[k] and not self._drives_inner(k):
                continue
            if self.timed[k] < 2 or self.total_ns[k] < MIN_COVERAGE * watched:
                continue
            mean = self.total_ns[k] / self.timed[k]
            if mean < MIN_ITERATION_NS:
                continue
            score = abs(math.log10(max(mean, 1.0) / TARGET_STEP_NS))
            if best is None or score < best[0]:
                best = (score, k, mean)
        return (best[1], best[2]) if best is not None else None

    def _drives_inner(self, k: int) -> bool:
        """Whether loop ``k`` calls the functions whose updating loops ran to their end twice or
        more in each of its iterations: those loops are inner loops of its step (a CNN from
        scratch, one image an iteration: its conv layer's per-filter update loop, 7 µs an
        iteration, was taken as the steps; each image takes ~17 ms)."""
        if not self.drives[k] or self.count[k] < 2:
            return False
        return any(
            u and ends >= 2 * self.count[k]
            for u, ends in zip(self.updating, self.update_ends, strict=True)
        )

    def typical(self) -> tuple[float | None, dict[int, tuple[float, float]]]:
        """The chosen loop's median iteration while watched (µs; None: fewer than two), and
        per other loop its median count of iterations and time (µs) in one of them: a step
        that runs something once in a while (min-char-rnn's gradient check, 101 runs of
        lossFun's loops at its first iteration) made the means read 145 iterations a step,
        not 25."""
        import itertools
        import statistics

        snaps = self.snaps[self.chosen] if self.chosen >= 0 else []
        if len(snaps) < 3:
            return None, {}
        # Two snapshots may hold several iterations (those after a short one took none):
        # per iteration of the chosen loop between them.
        c = self.chosen
        pairs = [(a, b, b[1][c] - a[1][c]) for a, b in itertools.pairwise(snaps)]
        pairs = [(a, b, n) for a, b, n in pairs if n > 0]
        if not pairs:
            return None, {}
        step_us = statistics.median((b[0] - a[0]) / n for a, b, n in pairs) / 1e3
        counts = {
            k: (
                float(statistics.median((b[1][k] - a[1][k]) / n for a, b, n in pairs)),
                float(statistics.median((b[2][k] - a[2][k]) / n for a, b, n in pairs)) / 1e3,
            )
            for k in range(len(self.sites))
            if k != c and self.count[k]
        }
        return step_us, counts

    def _inside_first(self, k: int) -> bool:
        """Whether loop ``k`` ran to its end twice or more inside the first iterations of
        another candidate, begun before it, that has not had two timed iterations: a loop of
        a function the steps call again and again (min-char-rnn's loop over the 25 characters
        of lossFun, run 100 times by the gradient check inside the first iteration of the
        training loop, was chosen, its steps 37 µs), not the steps; the choice waits for the
        loop around it (no other candidate having timed iterations to weigh it against)."""
        if self.ends[k] < 2:
            return False
        around = False
        for j in range(len(self.sites)):
            if j == k or not self.candidate[j]:
                continue
            if self.timed[j] >= 2:
                return False
            if self.count[j] and self.last[j] and self.began[j] < self.began[k]:
                around = True
        return around

    def _decide(self, watched: int) -> None:
        self._choose(watched)
        self.on[:] = bytes(k == self.chosen for k in range(len(self.on)))

    def _choose(self, watched: int) -> None:
        self.decided = True
        best = self._best(watched)
        if best is None:
            self.why = "no loop's iterations held enough of the time"
            return
        k, mean = best
        site = self.sites[k]
        share = self.total_ns[k] / watched
        self.why = (
            f"the {site.kind} loop at {self.where(site)} ({site.function}): its iterations took "
            f"{mean / 1e3:,.1f} µs on average, {share:.0%} of the first "
            f"{watched / 1e9:.2f} s of loop activity"
        )
        if self.choose:
            self.chosen = k
            calls = getattr(site, "calls", ())
            if calls and not body_is_step(site):
                # Where the loop's own body updates the model, no one function is the step:
                # handson-ml's loop calls random_batch first (numpy), d2l's Accumulator.add,
                # and tf.function on either froze its batch or could not apply.
                self.driver.facts.step_function_name = calls[0]
        else:
            self.suggested = k
            self.why += " (not taken as the steps: --no-auto-step)"

    def _watched(self) -> int:
        """The loop activity watched (ns) by a run that ended before its choice: up to the
        latest iteration, not to now (the record is made at the script's end, after its last
        printing and the start-up capture's stop: a 3,000-step loop of 0.1 s then fell under
        ``MIN_COVERAGE`` of it now and then, and the whole run became one step)."""
        return max(max(self.active_ns, self.first_ns) - self.first_ns, 1)

    def suggestion(self) -> str:
        """For a run without steps: the loop that would be the steps, and how to say so."""
        k = self.suggested
        if k < 0 and self.chosen < 0 and self.first_ns:
            best = self._best(self._watched())
            k = best[0] if best is not None else -1
        if k < 0:
            return self._too_short()
        site = self.sites[k]
        how = (
            f"mark its body with `with profiler.step():` in {site.file}"
            if getattr(site, "file", "")
            else f"rerun with --step-line {site.line}"
        )
        return (
            f"the {site.kind} loop at {self.where(site)} ({site.function}) looks like the "
            f"training loop: {how}"
        )

    def _too_short(self) -> str:
        """For a run without steps whose busiest loop ran iterations too short to be chosen:
        which loop, how short, and how to take it anyway ('' when there is none)."""
        timed = [k for k in range(len(self.sites)) if self.timed[k] >= 2]
        if not timed:
            return ""
        k = max(timed, key=lambda i: self.total_ns[i])
        mean = self.total_ns[k] / self.timed[k]
        if mean >= MIN_ITERATION_NS:
            return ""
        site = self.sites[k]
        how = (
            f"`with profiler.step():` around its body in {site.file}"
            if getattr(site, "file", "")
            else f"--step-line {site.line}"
        )
        return (
            f"the {site.kind} loop at {self.where(site)} ({site.function}) ran iterations of "
            f"{mean / 1e3:,.1f} µs (with the watcher's own mark), shorter than the "
            f"{MIN_ITERATION_NS / 1e3:g} µs an automatic step must take (a step marked there "
            f"would cost a large share of it): {how} takes them as the steps anyway"
        )

    def watched(self) -> tuple[int, int]:
        """(iterations, ns) of the chosen loop that ran while it was watched, before its first
        step: the script's own iterations all the same (a 20,000-step numpy loop said it ran
        12,931 steps, the first 7,069 having gone to the watching); (0, 0) with no choice."""
        k = self.chosen
        d = self.driver
        if k < 0 and self.deferred and d.started:
            # The tf.function calls held back while the loop was watched for them, from the
            # first: steps of the script all the same.
            return self.deferred, max(d.first_start_ns - self.deferred_ns, 0)
        if k < 0 or not d.started or not self.began[k]:
            return 0, 0
        return self.watched_n, max(d.first_start_ns - self.began[k], 0)

    def record(self) -> dict[str, Any]:
        """What was watched and chosen, for the script's record."""
        site = self.sites[self.chosen] if self.chosen >= 0 else None
        watched, watched_ns = self.watched()
        suggested = self.sites[self.suggested] if self.suggested >= 0 else None
        # A loop that ended before the choice (20,000 numpy steps of 10 µs end before
        # DECIDE_EARLY_S): the loop that would have been chosen over all its activity, which a
        # later run of the script takes as its steps (``profiler.processes.rerun.restart``).
        candidate = None
        if site is None and self.choose and self.first_ns and not self.driver.started:
            best = self._best(self._watched())
            candidate = self.sites[best[0]] if best is not None else None
        step_us, per_step = self.typical()
        return {
            "chosen_line": site.line if site is not None else None,
            # The file of a loop that is not the script's (a module of its folder), else "".
            "chosen_file": getattr(site, "file", "") if site is not None else "",
            "candidate_line": candidate.line if candidate is not None else None,
            "candidate_file": getattr(candidate, "file", "") if candidate is not None else "",
            "calls": list(getattr(site, "calls", ())) if site is not None else [],
            # Whether the chosen loop's own body updates the model (not only the functions it
            # calls): a fix wrapping its first call would leave the update out.
            "updates": body_is_step(site) if site is not None else False,
            # Metrics its body updates that the loop around it makes anew each iteration.
            "fresh_metrics": list(site.fresh_metrics[0]) if site is not None else [],
            "fresh_metrics_line": site.fresh_metrics[1] if site is not None else 0,
            # A line of its body running the model again beside the step's forward pass.
            "second_forward": list(site.second_forward) if site is not None else [0, ""],
            "suggested_line": suggested.line if suggested is not None else None,
            "why": self.why,
            # The modules of the script's folder whose loops were watched too (their files).
            "files": sorted({s.file for s in self.sites if getattr(s, "file", "")}),
            # tf.function calls made before any step while a loop was watched for them.
            "held_calls": self.deferred,
            # The chosen loop's iterations before its first step, and their time.
            "watched_iterations": watched,
            "watched_s": round(watched_ns / 1e9, 3),
            # The chosen loop's median iteration while watched (None: fewer than two timed).
            "step_median_us": round(step_us, 3) if step_us is not None else None,
            "loops": [
                {
                    "line": s.line,
                    **({"file": s.file} if getattr(s, "file", "") else {}),
                    "end_line": s.end_line,
                    "function": s.function,
                    "carried": list(s.carried),
                    "candidate": self.candidate[k],
                    "iterations": self.count[k],
                    # Those that ended while watched (the one the choice began is a step).
                    "timed": self.timed[k],
                    "mean_us": round(self.total_ns[k] / self.timed[k] / 1e3, 3)
                    if self.timed[k]
                    else None,
                    # Its median count of iterations and their time (µs) in one of the
                    # chosen loop's (absent: not measured).
                    **(
                        {"per_step": per_step[k][0], "per_step_us": round(per_step[k][1], 3)}
                        if k in per_step
                        else {}
                    ),
                }
                for k, s in enumerate(self.sites)
                if self.count[k]
            ][:20],
        }
