"""Sampled stacks -> counts and shares by cause, top stacks, top lines. Pure: no I/O.

Place in the pipeline: runs in the parent at summary time (``profiler.reports.summary``) on the
sampled phase's record of a ``WorkloadTrace``; classification is ``profiler.analysis.stacks``. The
attribution step reads ``category_counts`` and resolves the temporary labels
(``rules.TEMPORARY_LABELS``) with kernel time from the framework trace.

Which samples count:

* **the main thread only.** The training loop runs there; TensorFlow's kernels run on native
  threads py-spy does not see as Python threads, and other Python threads (a Keras or tf.data
  helper) are not the step. Their sample counts are reported separately (``other_threads``).
* **inside steps only.** A main-thread sample is inside a step when its stack passes through the
  workload process's step driver (``rules.STEP_SCOPE``); the few taken while the phase attached
  or stopped py-spy are counted as ``outside_steps`` and left out. A capture with no step driver
  in any stack (a foreign script) is analysed whole, and says so.
* ``instrumentation`` (the toolkit's own code inside a step) is counted and shown, and its share
  is part of the total, as it is part of the sampled steps' time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from profiler.analysis import stacks as rules
from profiler.capture.collectors.pyspy import MAIN_THREAD
from profiler.model import CATEGORIES, Frame, Sample, is_own_frame

#: Where TensorFlow calls back into Python from its own threads: a tf.data ``py_function``,
#: ``numpy_function`` or ``from_generator`` (a Keras ``PyDataset`` is one) runs there.
PY_FUNC_ENTRY = ("tensorflow/python/ops/script_ops.py", "FuncRegistry.__call__")

THREAD_POLICY = (
    "main thread only, samples inside steps only; other threads' and out-of-step samples are "
    "counted, not classified"
)


@dataclass(frozen=True)
class Analysis:
    """What the samples of one capture say.

    Attributes:
        total: main-thread samples inside steps (the denominator of every share).
        by_label: samples per label (categories, temporary labels, instrumentation).
        by_rule: samples per deciding rule (an audit of the table).
        outside_steps: main-thread samples outside steps (left out).
        other_threads: samples per other thread (left out).
        scoped: whether the step-driver filter applied (False: no stack had the driver).
        top_stacks: (count, label, rule, frames from the step driver inward), most first.
        top_lines: ((file, line, function), count, labels) of the innermost Python frame.
    """

    total: int
    by_label: dict[str, int]
    by_rule: dict[str, int]
    outside_steps: int
    other_threads: dict[str, int]
    scoped: bool
    top_stacks: list[tuple[int, str, str, tuple[Frame, ...]]] = field(default_factory=list)
    top_lines: list[tuple[tuple[str, int, str], int, dict[str, int]]] = field(default_factory=list)
    #: Main-thread samples in all (the sampling ticks: py-spy samples it idle or not).
    ticks: int = 0
    #: Other threads' samples in tf.data's Python callbacks (``PY_FUNC_ENTRY``), and per
    #: innermost frame of the script's own code in them (``function (file)``).
    input_python: int = 0
    input_functions: dict[str, int] = field(default_factory=dict)
    #: Samples inside steps asleep (``rules.SLEEP``), per innermost Python frame (file, line,
    #: function) that called the sleep, most first.
    asleep: list[tuple[tuple[str, int, str], int]] = field(default_factory=list)
    #: Likewise for the samples waiting on a queue or a Pool's imap (``rules.QUEUE_WAIT``,
    #: ``rules.POOL_STREAM``): the line
    #: of the script's own code that waits (the innermost frame outside the queue's modules).
    queued: list[tuple[tuple[str, int, str], int]] = field(default_factory=list)
    #: Likewise for the samples reading data (``rules.DATA_LOADING`` and the native frames
    #: under it): the script's line that reads.
    loading: list[tuple[tuple[str, int, str], int]] = field(default_factory=list)
    #: Likewise for the samples waiting for a Pool's map or apply (``rules.POOL_WAIT``).
    pooled: list[tuple[tuple[str, int, str], int]] = field(default_factory=list)


def _from_driver(frames: tuple[Frame, ...]) -> tuple[Frame, ...]:
    """The frames inside the step driver (the worker's own frames above it say nothing)."""
    for i, f in enumerate(frames):
        if rules.frame_fits(rules.STEP_SCOPE, f):
            return frames[i + 1 :]
    return frames


def _leaf_python(frames: tuple[Frame, ...]) -> Frame | None:
    return next((f for f in reversed(frames) if not f.native), None)


#: The rows whose samples are a wait or a read of the script's, by the ``Analysis`` field that
#: counts them per line, and the rows whose frames are the waiting code's own (the line is the
#: innermost Python frame outside them).
_QUEUES = (rules.QUEUE_WAIT, rules.POOL_STREAM)
_WAIT_ROWS: dict[str, tuple[str, tuple[str, ...]]] = {
    rules.SLEEP: ("asleep", ()),
    rules.QUEUE_WAIT: ("queued", _QUEUES),
    rules.POOL_STREAM: ("queued", _QUEUES),
    rules.POOL_WAIT: ("pooled", (rules.POOL_WAIT,)),
    rules.DATA_LOADING: ("loading", (rules.DATA_LOADING,)),
    rules.DATA_LOADING_NATIVE: ("loading", (rules.DATA_LOADING,)),
}


def _outside(frames: tuple[Frame, ...], *rows: str) -> Frame | None:
    """The innermost Python frame none of ``rows`` fits (the script's line that waits on a
    queue, or reads a file, rather than the queue's or the reader's own code)."""
    fit = [rules.rule_named(r) for r in rows]
    return next(
        (
            f
            for f in reversed(frames)
            if not f.native and not any(rules.frame_fits(r, f) for r in fit)
        ),
        None,
    )


def analyse(samples: Sequence[Sample], top: int = 10) -> Analysis:
    """Classify and count ``samples`` (see the module docstring for which ones count)."""
    main = [s for s in samples if s.thread in (MAIN_THREAD, "")]
    other: Counter[str] = Counter()
    input_functions: Counter[str] = Counter()
    input_python = 0
    for s in samples:
        if s.thread not in (MAIN_THREAD, ""):
            other[s.thread] += s.count
            if any(
                f.function == PY_FUNC_ENTRY[1] and f.file.endswith(PY_FUNC_ENTRY[0])
                for f in s.frames
            ):
                input_python += s.count
                own = _innermost_own(s.frames)
                if own is not None:
                    input_functions[own] += s.count
    scoped = any(rules.in_steps(s.frames) for s in main)
    inside = [s for s in main if rules.in_steps(s.frames)] if scoped else main
    outside = sum(s.count for s in main) - sum(s.count for s in inside)
    by_label: Counter[str] = Counter()
    by_rule: Counter[str] = Counter()
    stacks: Counter[tuple[tuple[Frame, ...], str, str]] = Counter()
    lines: Counter[tuple[str, int, str]] = Counter()
    line_labels: dict[tuple[str, int, str], Counter[str]] = {}
    waits: dict[str, Counter[tuple[str, int, str]]] = {
        name: Counter() for name, _rows in _WAIT_ROWS.values()
    }
    for s in inside:
        m = rules.match(s.frames)
        by_label[m.label] += s.count
        by_rule[m.rule] += s.count
        stacks[(_from_driver(s.frames), m.label, m.rule)] += s.count
        leaf = _leaf_python(s.frames)
        if leaf is not None:
            key = (leaf.file, leaf.line, leaf.function)
            lines[key] += s.count
            line_labels.setdefault(key, Counter())[m.label] += s.count
        wait = _WAIT_ROWS.get(m.rule)
        if wait is not None:
            name, rows = wait
            at = _outside(s.frames[: m.frame], *rows)
            if at is not None:
                waits[name][(at.file, at.line, at.function)] += s.count
    top_stacks = [
        (n, label, rule, frames)
        for (frames, label, rule), n in sorted(
            stacks.items(), key=lambda kv: (-kv[1], [f.function for f in kv[0][0]])
        )[:top]
    ]
    top_lines = [
        (key, n, dict(line_labels[key].most_common()))
        for key, n in sorted(lines.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    ]
    return Analysis(
        total=sum(s.count for s in inside),
        by_label=dict(by_label),
        by_rule=dict(by_rule.most_common()),
        outside_steps=outside,
        other_threads=dict(other.most_common()),
        scoped=scoped,
        top_stacks=top_stacks,
        top_lines=top_lines,
        ticks=sum(s.count for s in main),
        input_python=input_python,
        input_functions=dict(input_functions.most_common(3)),
        asleep=waits["asleep"].most_common(3),
        queued=waits["queued"].most_common(3),
        loading=waits["loading"].most_common(3),
        pooled=waits["pooled"].most_common(3),
    )


def _innermost_own(frames: tuple[Frame, ...]) -> str | None:
    """The innermost frame of the user's own code (``is_own_frame``), as ``function (file)``."""
    for f in reversed(frames):
        if is_own_frame(f):
            return f"{f.function} ({f.file.rsplit('/', 1)[-1]})"
    return None


def category_counts(samples: Sequence[Sample]) -> dict[str, int]:
    """Samples per label over the counted samples, every category present (0 if none)."""
    counts = dict.fromkeys(CATEGORIES, 0)
    counts.update(analyse(samples, top=0).by_label)
    return counts


def mean_ratio(phase_ns: Sequence[int], timed_ns: Sequence[int]) -> float | None:
    """Mean step of a phase over the timed window's mean step.

    py-spy pauses the process for each sample (hundreds of µs, more with ``--native``), so
    only about one step in a hundred or more carries a pause: the median step (the summary's
    ``inflation``) hides that cost, the mean shows it.
    """
    if not phase_ns or not timed_ns:
        return None
    timed_mean = sum(timed_ns) / len(timed_ns)
    return (sum(phase_ns) / len(phase_ns)) / timed_mean if timed_mean > 0 else None


def _in_steps(samples: Sequence[Sample]) -> list[Sample]:
    """The script's thread's samples inside steps, or all of them where none passed through
    the step driver (a foreign script, as ``analyse`` takes them)."""
    main = [s for s in samples if s.thread in (MAIN_THREAD, "")]
    return [s for s in main if rules.in_steps(s.frames)] or main


#: Frames of a model's training update: the gradient (a GradientTape's) and the optimizer's
#: apply (Keras 3's, and the tf.keras optimizers').
UPDATE_FRAMES = (
    ("tensorflow/python/eager/backprop.py", "GradientTape.gradient"),
    ("keras/src/optimizers/base_optimizer.py", "BaseOptimizer.apply_gradients"),
    ("keras/optimizers/optimizer.py", "apply_gradients"),
    ("keras/src/optimizers/optimizer_v2/optimizer_v2.py", "apply_gradients"),
)
#: A frame of a tf.function's call or trace: the update inside one is not eager.
FUNCTION_FRAME = "tensorflow/python/eager/polymorphic_function/"


@dataclass(frozen=True, slots=True)
class Update:
    """The share of the script's thread's samples inside steps that run a training update
    (``UPDATE_FRAMES``), and of those the share outside any tf.function (run eagerly)."""

    share: float
    eager: float
    samples: int


def update_share(samples: Sequence[Sample]) -> Update | None:
    """How much of the sampled steps a training update holds; None without main-thread samples.
    Keras's DQN example, its update every 4 frames, eager: 36% of the samples inside the
    frames in tape.gradient or apply_gradients, all of them eager."""
    inside = _in_steps(samples)
    total = sum(s.count for s in inside)
    if not total:
        return None
    update = eager = 0
    for s in inside:
        if not any(
            not f.native and f.file.endswith(path) and f.function.endswith(fn)
            for f in s.frames
            for path, fn in UPDATE_FRAMES
        ):
            continue
        update += s.count
        if not any(FUNCTION_FRAME in f.file for f in s.frames):
            eager += s.count
    return Update(share=update / total, eager=eager / update if update else 0.0, samples=total)


def function_share(samples: Sequence[Sample], name: str) -> tuple[float, int] | None:
    """The share of the script's thread's samples inside steps that run in the user's own
    function ``name`` (anywhere on the stack), and how many samples that share is of; None
    without samples."""
    inside = _in_steps(samples)
    total = sum(s.count for s in inside)
    if not total:
        return None
    hits = sum(
        s.count
        for s in inside
        if any(
            (f.function == name or f.function.endswith(f".{name}")) and is_own_frame(f)
            for f in s.frames
        )
    )
    return hits / total, total


def own_functions(samples: Sequence[Sample]) -> list[tuple[str, float]]:
    """The user's own functions the script's thread ran in inside steps, innermost own frame
    first (``function (file)``), with their share of those samples, largest first."""
    inside = _in_steps(samples)
    total = sum(s.count for s in inside)
    if not total:
        return []
    by: Counter[str] = Counter()
    for s in inside:
        own = _innermost_own(s.frames)
        if own is not None:
            by[own] += s.count
    return [(name, n / total) for name, n in by.most_common()]


#: Frames of TensorFlow's or Keras's Python: below a function of the script, its ops or model.
_FRAMEWORK_FILES = ("/tensorflow/", "/keras/", "/tf_keras/")


def _eager_below(frames: Sequence[Frame]) -> bool:
    """Whether ``frames`` (those under one of the user's) run TensorFlow's or Keras's Python
    outside any tf.function: its ops or its model called eagerly."""
    return not any(FUNCTION_FRAME in b.file for b in frames) and any(
        not b.native and any(p in b.file for p in _FRAMEWORK_FILES) for b in frames
    )


def eager_share(samples: Sequence[Sample], names: Sequence[str]) -> tuple[str, float, int] | None:
    """Of the user's own functions ``names`` (those the steps' loop calls), the one whose
    samples inside steps most often run TensorFlow's or Keras's Python under it outside any
    tf.function (its ops or its model called eagerly, one op at a time): (its name, that share
    of the samples inside steps, how many samples that is of); None without samples or hits."""
    inside = _in_steps(samples)
    total = sum(s.count for s in inside)
    if not total or not names:
        return None
    hits: Counter[str] = Counter()
    for s in inside:
        frames = s.frames
        for i, f in enumerate(frames):
            name = next((n for n in names if f.function == n or f.function.endswith(f".{n}")), None)
            if name is None or not is_own_frame(f):
                continue
            if _eager_below(frames[i + 1 :]):
                hits[name] += s.count
            break
    if not hits:
        return None
    name, n = hits.most_common(1)[0]
    return name, n / total, total


def eager_line_share(
    samples: Sequence[Sample], file: str, lines: Sequence[int]
) -> tuple[float, int] | None:
    """Of the script's thread's samples inside steps on one of ``file``'s ``lines``, the share
    that run TensorFlow's or Keras's Python under that line outside any tf.function (the line
    calls a model or ops eagerly), and how many samples that share is of; None without any."""
    inside = _in_steps(samples)
    hit = eager = 0
    for s in inside:
        for i, f in enumerate(s.frames):
            if f.native or f.file != file or f.line not in lines:
                continue
            hit += s.count
            if _eager_below(s.frames[i + 1 :]):
                eager += s.count
            break
    return (eager / hit, hit) if hit else None
