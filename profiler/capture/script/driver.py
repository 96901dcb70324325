"""The step driver: every detected step of a user script ends in ``StepDriver.boundary``.

Place in the pipeline: inside the script process (``profiler.capture.script.worker``). The script
runs on the main thread and drives itself; the phase schedule (``profiler.capture.script.schedule``)
runs on a thread of its own and asks for steps through ``ScriptLoop``, the ``Loop`` the phases see.
The two threads never run at once: the script runs the steps of one request while the schedule
waits; when the request's last step ends, the script waits (``_serve``) while the schedule removes
and installs phases, and resumes with the next request. So the phases, ``profiler.capture.worker``'s
window logic and the framework's and hooks' extra steps work as they do for a registered workload.

The hot path (``boundary``, once per step): one timestamp appended to the current request's
marks, two counters, one comparison. Everything else happens at hand-offs, outside every step:
the next step starts when the script resumes (``marks[0]`` is stamped then), so the schedule's
time is a gap, never part of a step.

The phase's step wrapper (``open_wrap``) is entered as a step's framework call starts and left
when the *next* step's starts (or at the hand-off). The detectors wrap framework functions the
hooks phase wraps again from outside (it patches the same class attributes); leaving the
wrapper later lets those outer timers record a call before its step's row is stored. (The last
step of a request hands off from inside the call, so there the outer timer comes too late: a
hooks window has one step in n whose outermost call is not counted.)

Hand-off messages (two queues): schedule -> script ``RUN`` (a request: n steps, their marks, the
phase's step wrapper), ``CALL`` (run a function on the script's thread, e.g. to enable
line_profiler, which traces per thread) and ``FREE`` (the schedule is done: run on with cheap
counting only); script -> schedule ``DONE`` (the request's steps ran, or the script ended) and
the result of a ``CALL``.
"""

from __future__ import annotations

import array
import bisect
import collections
import itertools
import queue
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from profiler.capture.loop import Loop, LoopEnded, LoopInfo, StepWrapper
from profiler.capture.script import switches
from profiler.capture.script.pipeline import Pipelines
from profiler.clock import Clock
from profiler.model import MetricPoint, WorkDecl, median_ns

T = TypeVar("T")

RUN, CALL, FREE, DONE, RESULT, ERROR = "run", "call", "free", "done", "result", "error"
#: "No limit" for the countdown to the next event.
_FAR = 1 << 62
#: Metric points kept per name: beyond twice this, every other point is dropped.
METRIC_POINTS = 500
#: Seconds the script waits for the schedule after it ended before giving up on it.
FINISH_TIMEOUT_S = 120.0


class StopScript(BaseException):
    """Raised into the script at the ``--max-steps``-th step.

    A ``BaseException``, so the script's own ``except Exception`` does not swallow it; the
    script process catches it at the top and keeps everything measured.
    """


class Interrupted(BaseException):
    """Raised into the script when the process is asked to stop (SIGTERM from the runner)."""


@dataclass
class Request:
    """``n`` steps the schedule wants, with the list their boundaries go to and the wrapper."""

    n: int
    marks: list[int]
    wrap: StepWrapper | None = None
    #: Ends the request at the first boundary ``max_ns`` after it began once ``min_n`` steps
    #: are done (0: no time limit): steps far slower than planned.
    max_ns: int = 0
    min_n: int = 0


@dataclass
class Detector:
    """One source of steps (``tf1_session``, ``keras_fit``, ``markers`` ...): the steps it
    ended, and its calls that were not steps (made inside another step or call)."""

    name: str
    steps: int = 0
    calls: int = 0


#: The calls whose step counts ``KerasCalls.at_steps`` keeps.
AT_STEPS_MAX = 64


@dataclass
class KerasCalls:
    """One Keras method's calls outside the steps (``predict`` per sample in a loop ...)."""

    calls: int = 0
    ns: int = 0
    samples: int = 0
    #: Calls whose input's size was known (``samples`` sums those).
    sized: int = 0
    #: Of ``ns``: the calls made once the steps had begun (a GAN's ``predict`` between its
    #: ``train_on_batch`` steps is inside them, and their time is no per-call cost of the step).
    in_steps_ns: int = 0
    #: The steps done when each of the first ``AT_STEPS_MAX`` calls was made: a call's period
    #: in steps (``profiler.capture.whatifs_calls``), not the warm-up's few calls per step.
    at_steps: list[int] = field(default_factory=list)
    #: The first ``AT_STEPS_MAX`` calls' times: their median is a call's (a few of a loop's
    #: evaluate calls ran while a phase altered the model, 2.7-9.5 s against ~0.4 s).
    each_ns: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "ms": round(self.ns / 1e6, 3),
            "median_ms": round(median_ns(self.each_ns) / 1e6, 3) if self.each_ns else None,
            "in_steps_ms": round(self.in_steps_ns / 1e6, 3),
            "samples": self.samples,
            "sized": self.sized,
        }


@dataclass
class Facts:
    """What the detectors saw, for the phases (``ScriptLoop.info``) and the record."""

    session: Any = None
    session_call: tuple[tuple[Any, ...], dict[str, Any]] | None = None
    function: Any = None
    model: Any = None
    fit: dict[str, Any] = field(default_factory=dict)
    samples: int = 0
    updates: int = 0
    marked_work: bool = False
    notes: list[str] = field(default_factory=list)
    #: ``(step, graph version)`` of the TF1 session's graph at some steps (every
    #: ``GRAPH_EVERY``-th, at most ``GRAPH_POINTS``): ops created inside the loop grow it.
    graph_versions: list[tuple[int, int]] = field(default_factory=list)
    #: Per ``tf.function`` (by id): its calls, traces and the arguments that changed at a trace.
    functions: dict[int, FunctionStats] = field(default_factory=dict)
    #: Consecutive ``session.run`` calls compared (``note_feeds``) and how many fed the same
    #: values as the call before.
    #: Keras calls that are not steps (``predict``, ``evaluate``): calls, ns, samples (summed).
    keras_calls: dict[str, KerasCalls] = field(default_factory=dict)
    #: The script's own step function by its global name (the automatic step's loop calls
    #: it), for the what-ifs; "" if none.
    step_function_name: str = ""
    #: The tf.data datasets the script's thread iterated (``profiler.capture.script.pipeline``).
    pipelines: Pipelines = field(default_factory=Pipelines)
    #: Whether ``tf.debugging.enable_check_numerics()`` was on in the script's thread when its
    #: steps were described (None: not looked at, no TensorFlow).
    check_numerics: bool | None = None
    #: A MonitoredTrainingSession's hooks with their period (``detect.session_hooks``): None
    #: until its first step was looked at.
    session_hooks: list[dict[str, Any]] | None = None
    feeds_compared: int = 0
    feeds_same: int = 0
    last_feeds: tuple[Any, ...] | None = None

    def note_feeds(self, feeds: Any) -> None:
        """Compare this call's fed values with the previous call's (content, not identity:
        a freed array's id is reused)."""
        if not isinstance(feeds, dict) or not feeds:
            return
        now = tuple(_fingerprint(v) for v in feeds.values())
        if self.last_feeds is not None:
            self.feeds_compared += 1
            self.feeds_same += now == self.last_feeds
        self.last_feeds = now

    def note_graph(self, step: int, session: Any) -> None:
        """The session graph's version (its op counter) at this step."""
        if step % GRAPH_EVERY:
            return
        try:
            version = int(session.graph.version)
        except (AttributeError, TypeError, ValueError):
            return
        points = self.graph_versions
        points.append((step, version))
        if len(points) > GRAPH_POINTS:
            del points[1::2]  # keep the first, thin the rest evenly

    def graph_growth(self, after_step: int) -> dict[str, Any] | None:
        """Ops added per step from ``after_step`` on (the steady state), None if not known."""
        steady = [(s, v) for s, v in self.graph_versions if s >= after_step]
        if len(steady) < 2 or steady[-1][0] == steady[0][0]:
            return None
        (s0, v0), (s1, v1) = steady[0], steady[-1]
        # The steps between which the graph grew (CS20's convnet grows in its test loop
        # alone, the last 44 of 144 steps).
        rising = [(a[0], b[0]) for a, b in itertools.pairwise(steady) if b[1] > a[1]]
        return {
            "ops_per_step": round((v1 - v0) / (s1 - s0), 3),
            "from_step": s0,
            "to_step": s1,
            "ops_from": v0,
            "ops_to": v1,
            "grew_from": rising[0][0] if rising else s0,
            "grew_to": rising[-1][1] if rising else s1,
        }

    def graph_constants(self) -> dict[str, Any] | None:
        """The TF1 session graph's constants: their bytes in all and the largest (from each
        op's output shape and dtype, no copy of its value); None without a session.

        Arrays made into constants (``Dataset.from_tensor_slices`` on numpy arrays in a graph,
        ``tf.constant(array)``) are copied into the graph, again into the session at its first
        run, and once more by the op that first reads them: CS20's logistic regression with
        its 172 MB of MNIST spent 7.7 s in its iterator's first initialisation, 0.25 s with
        the arrays fed through placeholders (measured here without the profiler)."""
        session = self.session
        if session is None:
            return None
        try:
            ops = session.graph.get_operations()[:CONST_OPS_MAX]
        except Exception:  # a session whose graph cannot be read: nothing said
            return None
        total, largest = 0, None
        for op in ops:
            if op.type != "Const":
                continue
            try:
                out = op.outputs[0]
                n, size = out.shape.num_elements(), out.dtype.size
                shape = tuple(out.shape.as_list())
            except Exception:  # a constant of unknown shape or a string: not counted
                continue
            if not n:
                continue
            total += n * size
            if largest is None or n * size > largest["bytes"]:
                largest = {
                    "name": op.name,
                    "dtype": out.dtype.name,
                    "shape": list(shape),
                    "bytes": n * size,
                }
        return {"bytes": total, "ops": len(ops), "largest": largest}

    @property
    def same_feeds(self) -> bool | None:
        """Whether every compared step fed the same values (None: nothing compared)."""
        if not self.feeds_compared:
            return None
        return self.feeds_same == self.feeds_compared


#: Steps a function's traced calls are timed at, at most (``FunctionStats.traced_ns``).
TRACED_MOST = 1_000


@dataclass
class FunctionStats:
    """One ``tf.function``'s calls and (re)traces, as the detector saw them.

    Attributes:
        name: the Python function's qualified name.
        calls: calls on the script's thread.
        traces: traces after the first call (retraces), from its own tracing counter.
        trace_steps: the steps (indices) in which those retraces happened (the first 10,000).
        changed: per argument, how often it differed from the previous call at a retrace, and
            what it is (``a Python int``, ``a new object``, ``a tensor of another shape``).
        module: the module the Python function is defined in (``__main__`` for the script's).
        own: defined in the user's code, not in an installed package (Keras's train and predict
            functions are not the script's: advice to change their signature cannot apply).
    """

    name: str
    calls: int = 0
    traces: int = 0
    ref: Any = field(default=None, repr=False)
    first_count: int | None = None
    last_count: int = 0
    last_args: tuple[tuple[str, Any], ...] = ()
    trace_steps: list[int] = field(default_factory=list)
    changed: dict[str, list[Any]] = field(default_factory=dict)
    module: str = ""
    own: bool = True
    #: Named as an evaluation (``test_step``, ``val_step``, ``evaluate``): once another of the
    #: script's functions is the steps, its calls between them are not steps (``detect``).
    evaluation: bool = False
    #: Its calls made between or after the steps as an evaluation's (none of them a step).
    outside: int = 0
    #: The steps done when it was first called (its first trace): -1 not recorded.
    first_step: int = -1
    #: The wall time of its calls that traced (its first and each retrace), by the step they
    #: came in (the first ``TRACED_MOST`` steps): a trace's share of a long step.
    traced_ns: dict[int, int] = field(default_factory=dict)
    #: Made with ``jit_compile=True``: its graph compiled with XLA.
    jit_compile: bool = False
    #: The last call's arguments (the what-ifs trace with them before switching a variant in).
    last_call: tuple[tuple[Any, ...], dict[str, Any]] | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "calls": self.calls,
            "retraces": self.traces,
            "trace_steps": list(self.trace_steps),
            "changed": {k: {"times": v[0], "what": v[1]} for k, v in self.changed.items()},
            "module": self.module,
            "own": self.own,
            "outside_calls": self.outside,
            "first_step": self.first_step,
            "traced_ms": {str(k): round(v / 1e6, 3) for k, v in self.traced_ns.items()},
            "jit_compile": self.jit_compile,
        }


def arg_key(value: Any) -> tuple[str, Any]:
    """What ``tf.function`` retraces on, in short: a Python scalar's value, a tensor's shape
    and dtype, another object's identity."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return (f"a Python {type(value).__name__}", value)
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        dims = tuple(shape.as_list()) if hasattr(shape, "as_list") else tuple(shape)
        return ("a tensor", (dims, str(dtype)))
    if isinstance(value, (list, tuple)):
        return (f"a Python {type(value).__name__}", tuple(arg_key(v) for v in value))
    return (f"a {type(value).__name__} object", id(value))


#: Ops of a TF1 graph looked at for its constants (``Facts.graph_constants``).
CONST_OPS_MAX = 100_000
#: The graph's version is read every this many steps, and at most this many points are kept.
GRAPH_EVERY = 8
GRAPH_POINTS = 256

#: Steps whose feeds are compared (the first ones: the check is not free).
FEED_CHECKS = 32


def _fingerprint(value: Any) -> Any:
    """A cheap summary of a fed value: shape, dtype and 32 evenly spaced elements."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None or not hasattr(value, "ravel"):
        return repr(value)[:200]
    flat = value.ravel()
    stride = max(1, flat.size // 32)
    return (tuple(shape), str(dtype), flat[::stride][:32].tobytes())


class StepDriver:
    """Step boundaries, the ``--max-steps`` stop, and the script's side of the hand-off.

    Attributes read and written on the hot path by the detectors: ``started`` (the first step
    has begun), ``block`` (>0: inside a step or a call that is not a step, so detected calls
    are not steps), ``wrap`` (the current phase's step wrapper or None), ``done`` (steps
    ended so far: the index of the step in progress) and ``main`` (the thread whose calls are
    steps: the script's; framework calls from other threads, e.g. TF1 queue runners, are not).
    """

    def __init__(self, clock: Clock, max_steps: int | None = None) -> None:
        self.clock = clock
        self.max_steps = max_steps
        self.main = threading.get_ident()
        self.done = 0
        self.started = False
        self.block = 0
        #: Keras fit/evaluate/predict calls in progress (the outermost one is counted).
        self.keras_depth = 0
        #: What-if switch points (``profiler.capture.whatifs``): the step's ``session.run``
        #: replaced (called as ``variant_run(run, session, args, kwargs)``), and per
        #: tf.function (by id) a transform of its arguments.
        self.variant_run: Callable[..., Any] | None = None
        self.variant_args: dict[int, Callable[..., Any]] = {}
        #: The steps a what-if's variant held (``ScriptLoop.hold``): from its first step to the
        #: step after its last; ``variant_from`` while one is on.
        self.variant_spans: list[tuple[int, int]] = []
        self.variant_from: int | None = None
        #: tf.functions called another way (id of the script's -> ``swap(call, fn, args,
        #: kwargs)``, which calls another function in its place, guarded).
        self.variant_calls: dict[int, Callable[..., Any]] = {}
        #: Keras methods answered another way (name -> ``twin(method, args, kwargs)``, which
        #: the detector's wrapper calls in the method's place: ``whatifs_calls``).
        self.keras_twins: dict[str, Callable[..., Any]] = {}
        #: ``Function.__call__`` as TensorFlow defines it (set when it is patched).
        self.raw_function_call: Callable[..., Any] | None = None
        #: The script's module globals (a what-if swaps its step function there).
        self.script_globals: dict[str, Any] | None = None
        #: A variant on for the steps (``profiler.capture.phases.whatif``): (off, on), called on
        #: the script's thread when it leaves the steps' loop and when it comes back, so the
        #: script's own code after the loop runs as written.
        self.held: tuple[Callable[[], Any], Callable[[], Any]] | None = None
        #: Asked by a framework detector before its call begins the steps (its source); True:
        #: the call is held back, no step (``detect.LoopMarks.defer``: the loop it runs in is
        #: being watched, its iterations perhaps the steps).
        self.defer: Callable[[str], bool] | None = None
        self.paused = False
        #: Counts every change of ``held`` and ``paused`` (the memory census drops one taken
        #: across a change: ``RssSampler.state``).
        self.switches = 0
        self.wrap: StepWrapper | None = None
        self.ended = False
        self.end_reason = ""
        self.freed = False
        #: The schedule's phase under way (``Loop.active``), read on the script's thread.
        self.active = ""
        self.first_start_ns = 0
        self.last_end_ns = 0
        #: Every step's end (8 bytes a step, up to ``ENDS_MAX``): the run's step times outside
        #: the windows too (``blocks``).
        self.ends = _Ends()
        #: The steps that ended a pass over the steps' loop (its iterable ran out, or the
        #: script left it), up to ``PASS_ENDS_MAX``: where a long step holds the loop's end.
        self.pass_ends: list[int] = []
        self.last_ns = 0
        self.open: Any = None
        self.detectors: dict[str, Detector] = {}
        self.facts = Facts()
        self.metrics: dict[str, _Series] = {}
        self.to_script: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self.to_schedule: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        #: The first step is requested before the schedule starts, so the script need not wait.
        self.first = Request(1, [clock()])
        self._req: Request | None = None
        self._end = 0
        self.left = 0
        self._deadline = _FAR
        self._min_end = 0
        self.append: Callable[[int], Any] = self.first.marks.append
        self._arm(self.first, stamp=False)

    # --- the hot path -----------------------------------------------------------------------

    def begin(self) -> None:
        """The first step starts now; everything before it is the script's set-up."""
        t = self.clock()
        self.started = True
        self.first_start_ns = t
        # Read on the script's thread (thread-local), once.
        self.facts.check_numerics = switches.check_numerics()
        if self.done == 0 and self._req is not None:
            self._req.marks[0] = t

    def open_wrap(self) -> None:
        """Leave the previous step's wrapper, enter this step's (the current phase's)."""
        ctx = self.open
        if ctx is not None:
            self.open = None
            ctx.__exit__(None, None, None)
        wrap = self.wrap
        if wrap is not None:
            ctx = wrap(self.done)
            ctx.__enter__()
            self.open = ctx

    def close_wrap(self) -> None:
        """Leave the open step wrapper (before the schedule reads what the phase recorded)."""
        ctx = self.open
        if ctx is not None:
            self.open = None
            ctx.__exit__(None, None, None)

    def boundary(self) -> None:
        """The step in progress ends now (and the next begins)."""
        t = self.clock()
        self.append(t)
        self.last_end_ns = t
        self.ends.append(t)
        self.done += 1
        self.left -= 1
        if self.left <= 0 or (t >= self._deadline and self.done >= self._min_end):
            self._event(t)

    def left_loop(self) -> None:
        """The script left the steps' loop (its last step ended): a variant on for the steps
        is turned off until the loop runs again (``held``)."""
        if len(self.pass_ends) < PASS_ENDS_MAX:
            self.pass_ends.append(self.done - 1)
        held = self.held
        if held is not None and not self.paused:
            self.switches += 1
            self.paused = True
            self._call_held(held[0])

    def entered_loop(self) -> None:
        """The steps' loop runs again after ``left_loop``: the variant is turned back on."""
        held = self.held
        if self.paused:
            self.switches += 1
            self.paused = False
            if held is not None:
                self._call_held(held[1])

    def _call_held(self, fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception as exc:  # the variant records its own errors; the script goes on
            self.facts.notes.append(f"a what-if's switch at the loop's edge failed: {exc!r}"[:300])

    def detector(self, name: str) -> Detector:
        """The counter of one source of steps (created on first use)."""
        return self.detectors.setdefault(name, Detector(name))

    def metric(self, values: dict[str, Any]) -> None:
        """Record metric points after the last step ended (``profiler.metric``).

        Each point's ``cost_ns`` is what converting the values took (a tensor's ``float`` can
        be a device copy). Past ``2 * METRIC_POINTS`` points of a name, every other point is
        dropped and only every other later call is kept, so a metric logged every step keeps
        ~``METRIC_POINTS`` evenly spread points in bounded memory.
        """
        t0 = self.clock()
        step = self.done - 1
        items = [(name, float(value)) for name, value in values.items()]
        cost = self.clock() - t0
        for name, value in items:
            series = self.metrics.get(name)
            if series is None:
                series = self.metrics[name] = _Series()
            series.add(MetricPoint(step=step, name=name, value=value, cost_ns=cost))

    def run_free(self) -> None:
        """Count steps without a schedule (a scratch driver for cost measurements): the first
        step has begun, and only the last boundary is kept."""
        self.started = True
        self._arm(None)

    # --- hand-off, on the script's thread -----------------------------------------------------

    def _arm(self, req: Request | None, stamp: bool = True) -> None:
        self._req = req
        self._deadline = _FAR
        if req is not None and req.max_ns:
            self._deadline = self.clock() + req.max_ns
            self._min_end = self.done + req.min_n
        if req is None:
            self.wrap = None
            # Only the last boundary is kept once the schedule is done: no list grows.
            last: collections.deque[int] = collections.deque(maxlen=1)
            self.append = last.append
            self._end = _FAR
        else:
            self.wrap = req.wrap
            self.append = req.marks.append
            self._end = self.done + req.n
            if stamp:
                # The step starts when the script resumes: the schedule's time is in no step.
                req.marks[0] = self.clock()
        stop = self.max_steps if self.max_steps is not None else _FAR
        self.left = min(self._end, stop) - self.done

    def _event(self, t: int) -> None:
        self.last_ns = t
        stop = self.max_steps is not None and self.done >= self.max_steps
        if stop and not self.ended:
            self.ended, self.end_reason = True, "max_steps"
        if self._req is not None and (self.done >= self._end or stop or t >= self._deadline):
            self._req = None
            self.close_wrap()
            self.to_schedule.put((DONE, None))
            self._serve()  # arms the next request, or frees the script when the schedule is done
        if stop:
            # Raised again at every later boundary (``left`` stays <= 0) if the script
            # swallows it with a bare ``except:``.
            raise StopScript(f"stopped after {self.done} steps (--max-steps {self.max_steps})")

    def _serve(self, until_free: bool = False) -> None:
        """Wait for the schedule: run its calls, return at its next request (or when done)."""
        while True:
            timeout = FINISH_TIMEOUT_S if until_free else None
            try:
                kind, payload = self.to_script.get(timeout=timeout)
            except queue.Empty:
                self.facts.notes.append(
                    f"the phase schedule did not finish within {FINISH_TIMEOUT_S:g} s of the "
                    "script's end; its last phases are missing"
                )
                self.freed = True
                return
            if kind == RUN:
                if self.ended:
                    # The script is over: the request gets no steps (ScriptLoop raises LoopEnded).
                    self.to_schedule.put((DONE, None))
                    continue
                self._arm(payload)
                return
            if kind == CALL:
                try:
                    result: tuple[str, Any] = (RESULT, payload())
                except BaseException as exc:  # handed to the schedule, which re-raises it
                    result = (ERROR, exc)
                self.to_schedule.put(result)
                if result[0] == ERROR and not isinstance(result[1], Exception):
                    raise result[1]
                continue
            if kind == FREE:
                self.freed = True
                if not self.ended:
                    self._arm(None)
                return

    def script_ended(self, reason: str) -> None:
        """The script returned or raised: finish the request in progress, serve the schedule
        until it is done (its remaining requests get no steps)."""
        if not self.ended:
            self.ended, self.end_reason = True, reason
        self.last_ns = self.last_ns or self.clock()
        self.close_wrap()
        if self.freed:
            return
        if self._req is not None:
            self._req = None
            self.to_schedule.put((DONE, None))
        self._serve(until_free=True)

    def metric_points(self) -> list[MetricPoint]:
        """Every kept metric point, in step order."""
        points = [p for series in self.metrics.values() for p in series.points]
        return sorted(points, key=lambda p: (p.step, p.name))


#: Steps between two instrumented phases' spans counted as the phases' (``phases_time``).
BRIDGE_STEPS = 64


def phases_time(
    first_ns: int, ends: Sequence[int], held: Mapping[str, tuple[int, int]]
) -> tuple[float, int]:
    """The wall time (s) and the steps of the spans the instrumented phases held (every phase
    but the timed window's, the what-ifs' blocks among them), overlaps counted once: what the
    budget line tells apart from the script's own slow steps (an autoencoder's XLA what-if
    blocks, ~0.5 s a step, were "not told apart" in 36.9 s of a 49.3 s span). The few steps
    between two phases' spans (the next phase installed, its re-warm steps, a reference block)
    are theirs too: a Keras fit's phase switches (the framework trace's collection among them)
    were ~14 s of the 17.6 s "not told apart" outside the spans, its 2 fits 4.3 s and 3.8 s
    long without the profiler."""
    spans = sorted((a, min(e, len(ends))) for name, (a, e) in held.items() if name != "timed")
    merged: list[tuple[int, int]] = []
    for a, e in spans:
        if e <= a:
            continue
        if merged and a <= merged[-1][1] + BRIDGE_STEPS:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((a, e))
    ns = steps = 0
    for a, e in merged:
        start = ends[a - 1] if a > 0 else first_ns
        ns += max(ends[e - 1] - start, 0)
        steps += e - a
    return ns / 1e9, steps


#: Step ends kept; beyond, the later steps are not in ``blocks`` (~80 MB at most).
ENDS_MAX = 10_000_000


#: The process's CPU time is read at every this many step ends (``_Ends.cpu``): a block's CPU
#: time per step tells more work (it rises) from a machine that lends the process less of
#: its cores (only the wall time rises).
CPU_EVERY = 16
#: What ``_Ends`` adds to the process a step (its end, and a CPU reading every ``CPU_EVERY``):
#: the memory analysis takes it out of the script's growth (a per-sample numpy loop of 8
#: million steps read "grows by 8 bytes every step ... 54.7 MB"; flat without the profiler).
RECORD_BYTES_PER_STEP = 8 + 16 / CPU_EVERY


class _Ends:
    """Step end times in a compact array, bounded; and the process's CPU time (all its
    threads) at every ``CPU_EVERY``-th of them, as (step index, ns) pairs."""

    __slots__ = ("cpu", "values")

    def __init__(self) -> None:
        self.values = array.array("q")
        self.cpu = array.array("q")

    def append(self, t: int) -> None:
        n = len(self.values)
        if n < ENDS_MAX:
            self.values.append(t)
            if n % CPU_EVERY == 0:
                self.cpu.append(n)
                self.cpu.append(time.process_time_ns())


def blocks(
    first_ns: int,
    ends: array.array[int],
    size: int,
    first_step: int = 0,
    cpu: array.array[int] | None = None,
) -> list[dict[str, Any]]:
    """The median step time of each block of ``size`` steps from ``first_step`` (an epoch of
    fit, or a tenth of the run): whether the steps outside the windows ran like the timed ones.
    With ``cpu`` (``_Ends.cpu``), each block's process CPU time per step (``cpu_us``, None
    where the block holds under two readings)."""
    if not ends or size <= 0:
        return []
    readings = list(zip(cpu[0::2], cpu[1::2], strict=True)) if cpu else []
    starts = [first_ns, *ends[:-1]]
    out = []
    for b in range(first_step, len(ends), size):
        durs = sorted(ends[i] - starts[i] for i in range(b, min(b + size, len(ends))))
        if not durs:
            continue
        cut = len(durs) // 10
        kept = durs[cut : len(durs) - cut] or durs
        out.append(
            {
                "from_step": b,
                "to_step": b + len(durs) - 1,
                "median_us": round(durs[len(durs) // 2] / 1e3, 3),
                # Trimmed (10% each side): a bimodal step's level, without an epoch's or a
                # phase switch's single long step.
                "mean_us": round(sum(kept) / len(kept) / 1e3, 3),
                "cpu_us": _cpu_per_step(readings, b, b + len(durs) - 1),
            }
        )
    return out


#: The least time the other processes' load is read over, for a block's figure (s).
OTHERS_MIN_S = 0.2


def others_cores(loads: Sequence[tuple[int, int, int]], first: int, last: int) -> float | None:
    """The cores other processes kept busy, on average, while the steps ``first``..``last``
    ran (``RssSampler.loads``: steps done, time ns, their busy ns so far); None where fewer
    than two readings span ``OTHERS_MIN_S`` of them."""
    inside = [x for x in loads if first <= x[0] <= last + 1]
    if len(inside) < 2:
        return None
    (_, t0, b0), (_, t1, b1) = inside[0], inside[-1]
    if t1 - t0 < OTHERS_MIN_S * 1e9:
        return None
    return round(max(b1 - b0, 0) / (t1 - t0), 3)


def _cpu_per_step(readings: list[tuple[int, int]], first: int, last: int) -> float | None:
    """The process's CPU time per step between its first and last reading inside the steps
    ``first``..``last`` (µs), None under two readings."""
    inside = [(i, ns) for i, ns in readings if first <= i <= last]
    if len(inside) < 2 or inside[-1][0] == inside[0][0]:
        return None
    (i0, c0), (i1, c1) = inside[0], inside[-1]
    return round((c1 - c0) / (i1 - i0) / 1e3, 3)


class _Series:
    """One metric's points, thinned to stay within ``2 * METRIC_POINTS``."""

    __slots__ = ("calls", "points", "stride")

    def __init__(self) -> None:
        self.points: list[MetricPoint] = []
        self.calls = 0
        self.stride = 1

    def add(self, point: MetricPoint) -> None:
        if self.calls % self.stride == 0:
            self.points.append(point)
            if len(self.points) >= 2 * METRIC_POINTS:
                del self.points[1::2]
                self.stride *= 2
        self.calls += 1


class ScriptLoop(Loop):
    """The ``Loop`` the phases see in a script process: ``run`` asks the script for steps.

    ``run`` blocks the schedule's thread until the script has run ``n`` more steps. When the
    script ends during a request, ``run`` returns with the steps that did run (``ended`` is then
    True); asked for steps after the end, it raises ``LoopEnded``.
    """

    def __init__(
        self,
        driver: StepDriver,
        *,
        work: WorkDecl,
        line_targets: tuple[Callable[..., Any], ...] = (),
        info: LoopInfo | None = None,
    ) -> None:
        super().__init__(
            step=self._no_step,
            work=work,
            params=dict,
            eval_loss=lambda _p: float("nan"),
            line_targets=line_targets,
            info=info,
        )
        self.driver = driver
        self.requests = 0

    @staticmethod
    def _no_step() -> None:
        raise LoopEnded("a script drives its own steps: use ScriptLoop.run")

    @property
    def ended(self) -> bool:
        return self.driver.ended

    def _wait(self) -> tuple[str, Any]:
        return self.driver.to_schedule.get()

    def first_segment(self) -> list[int]:
        """Wait for the script's first step (requested up front); its two boundaries."""
        self._wait()
        marks = self.driver.first.marks
        self.steps_done = self.driver.done
        if len(marks) < 2:
            raise LoopEnded("the script ended before its first step")
        return marks

    def run(
        self,
        n: int,
        marks: list[int],
        clock: Clock,
        wrap: StepWrapper | None = None,
        max_ns: int = 0,
        min_n: int = 0,
    ) -> None:
        """Have the script run ``n`` steps, appending each boundary to ``marks`` (fewer where
        ``max_ns`` ran out after ``min_n`` steps: ``Request``)."""
        d = self.driver
        if d.ended:
            raise LoopEnded(f"the script ended after {d.done} steps")
        self.requests += 1
        d.to_script.put((RUN, Request(n, marks, wrap, max_ns, min_n)))
        self._wait()
        self.steps_done = d.done
        if len(marks) < 2 and d.ended:
            raise LoopEnded(f"the script ended after {d.done} steps")

    def set_active(self, phase: str) -> None:
        self.active = self.driver.active = phase

    def in_loop_thread(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the script's thread (it is waiting for the schedule, so it can)."""
        if threading.current_thread() is threading.main_thread():
            return fn()
        self.driver.to_script.put((CALL, fn))
        kind, value = self._wait()
        if kind == ERROR:
            raise value
        return value  # type: ignore[no-any-return]

    def hold(self, off: Callable[[], Any] | None, on: Callable[[], Any] | None = None) -> None:
        """While the steps run with a variant on: ``off`` where the script leaves the steps'
        loop, ``on`` where it comes back (``StepDriver.left_loop``); ``None`` for none. Set
        between requests, while the script's thread waits for the schedule."""
        d = self.driver
        d.switches += 1
        d.held = (off, on or (lambda: None)) if off is not None else None
        d.paused = False
        if off is not None and d.variant_from is None:
            d.variant_from = d.done
        elif off is None and d.variant_from is not None:
            d.variant_spans.append((d.variant_from, d.done))
            d.variant_from = None

    def finish(self) -> None:
        """The schedule is done: the script runs on with cheap counting only."""
        self.driver.to_script.put((FREE, None))


#: A step is long at this multiple of its tenth of the run's median step and this much more
#: than it (ns): what the loop does once in a while between two steps (an evaluation at an
#: epoch's end, a checkpoint), not a step a busy machine preempted for a time slice or two.
LONG_FACTOR = 5.0
LONG_MIN_NS = 20_000_000
#: At most this many long steps are recorded (the longest kept).
LONG_MAX = 200
#: Pass ends kept (a step loop inside an epoch loop ends once an epoch).
PASS_ENDS_MAX = 10_000


def _overlap(spans: Sequence[tuple[int, int]], starts: Sequence[int], a: int, b: int) -> int:
    """The time (ns) ``spans`` (sorted, each start's in ``starts``) hold of ``a`` to ``b``."""
    total = 0
    k = max(bisect.bisect_left(starts, a) - 1, 0)
    while k < len(spans) and spans[k][0] < b:
        s, e = spans[k]
        total += max(min(e, b) - max(s, a), 0)
        k += 1
    return total


def long_steps(
    first_ns: int,
    ends: array.array[int],
    first_step: int,
    runner_ns: Sequence[int],
    edges: Sequence[int],
    held: Mapping[str, tuple[int, int]],
    pass_ends: Collection[int] = (),
    probes: Sequence[int] = (),
    variants: Sequence[tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """The run's long steps from ``first_step`` on, over every step the script ran (windows or
    not): ``steps``, each with ``step``, ``us``, ``median_us`` (its tenth of the run's median
    step), ``phase`` (the phase that held it, "" for none: its time may be inflated by the
    instrument) and ``pass_end`` where it ended a pass over the steps' loop (``pass_ends``: it
    holds the loop's end); ``left_out``: the steps after the warm-up not looked at, ``left``
    the same as ranges ``[from, to)`` (a period's positions are counted among the steps looked
    at: a checkpoint every 110 steps whose first fell next to a phase's switch read "3 of 4 at
    the period", short of a period, and no answer named the saves). Left out:
    the steps next to a phase's switch (``edges``: within one step of each), those during which the
    runner did its own work (``runner_ns``: the windows' gaps' start times), and those the
    what-ifs held (their variants compile and run another loop). The memory probes' slow reads
    (``probes``: start, end, start, end ...) are taken off the steps they fall in, not left
    out: beside a tf.data pipeline filling a 10,000-image shuffle buffer at each epoch's start
    (1 s against 33 ms steps) a probe read took 5 ms or more in every such step, and each was
    left out; no answer named them. Where the steps each what-if variant held are known
    (``variants``), only those (and one on either side) are left out of the what-ifs' span,
    not its steps as written: a CVAE's evaluation at an epoch's end fell in a 30-step span
    whose only what-if failed at once, and was not looked at."""
    n = len(ends)
    out: dict[str, Any] = {"steps": [], "left_out": 0, "left": [], "spans": []}
    if n <= first_step + 1:
        return out
    starts = [first_ns, *ends[:-1]]
    size = max(-(-n // 10), 20)
    runner = sorted(runner_ns)
    near = {b + k for b in edges for k in (-1, 0, 1)}
    if variants is None:
        held_out = {i for name, (a, e) in held.items() if name == "whatif" for i in range(a, e)}
    else:
        held_out = {i for a, e in variants for i in range(a - 1, e + 1)}
    skip = near | held_out
    ended = set(pass_ends)
    spans = sorted(zip(probes[::2], probes[1::2], strict=False))
    spans_start = [a for a, _ in spans]
    rows: list[dict[str, Any]] = []
    left = 0
    gone: list[list[int]] = []
    for b in range(0, n, size):
        durs = [ends[i] - starts[i] for i in range(b, min(b + size, n))]
        med = sorted(durs)[len(durs) // 2]
        for j, d in enumerate(durs):
            i = b + j
            if i < first_step:
                continue
            k = bisect.bisect_left(runner, starts[i])
            if i in skip or (k < len(runner) and runner[k] <= ends[i]):
                left += 1
                if gone and gone[-1][1] == i:
                    gone[-1][1] = i + 1
                else:
                    gone.append([i, i + 1])
                continue
            if d < LONG_FACTOR * med or d - med < LONG_MIN_NS:
                continue
            d -= _overlap(spans, spans_start, starts[i], ends[i])
            if d < LONG_FACTOR * med or d - med < LONG_MIN_NS:
                continue
            phase = next((name for name, (a, e) in held.items() if a <= i < e), "")
            row: dict[str, Any] = {
                "step": i,
                "us": round(d / 1e3, 1),
                "median_us": round(med / 1e3, 1),
                "phase": phase,
            }
            if i in ended:
                row["pass_end"] = True
            elif i - 1 in ended:
                # The first step of a pass holds what the script ran between two passes (an
                # evaluation and a checkpoint at each epoch's end of a custom loop).
                row["after_pass_end"] = True
            rows.append(row)
    if len(rows) > LONG_MAX:
        keep = sorted(rows, key=lambda r: -r["us"])[:LONG_MAX]
        rows = sorted(keep, key=lambda r: r["step"])
    out["steps"], out["left_out"], out["left"] = rows, left, gone
    out["spans"] = [{"phase": name, "from": a, "to": e} for name, (a, e) in held.items()]
    marks = sorted(ended)
    if len(marks) >= 2:
        gaps = sorted(b - a for a, b in itertools.pairwise(marks))
        out["passes"] = {"ends": len(marks), "length": gaps[len(gaps) // 2]}
    return out
