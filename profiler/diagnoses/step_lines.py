"""A line of the script's own code inside its steps that holds much of each step: a Keras
callback evaluating held-out data at every batch end, logging or a host round-trip every step
of a custom loop.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance`` calls ``step_line_facts`` and includes ``RULES``). It reads
the lines phase (``line_profiler`` on every function the script defines): each line's time
per step of that phase's window, against that window's own mean step (no figure from
another window). The lines that are the steps themselves are left out: those that call the
step (``fit``, ``session.run``, the step's ``tf.function``), those whose one execution spans
more than a step (the loop or the ``fit`` call around the steps), and a loop found by the
automatic step (its body is the step's work: the per-line tables show it). A line run fewer
than once every two steps is periodic work (``periodic_slow_steps``); input functions
(``__getitem__``, ``__next__``) are the input pipeline's (``input_bound``).

Measured on this machine (a Keras ``fit`` whose callback calls ``model.evaluate`` on 256
held-out rows at every batch end, 125 batches): 256 ms a batch with the callback, 7.5–10 ms
without it, measured without the profiler; the lines phase put 260 ms of a 273 ms step on the
callback's ``evaluate`` line, while the categories read feed/fetch 52% and tracing 35% (the
dataset ``evaluate`` builds on every call) and the verdict was "no fix found".
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from profiler.analysis import sampling, stacks
from profiler.analysis.stats import OUTLIER_FACTOR
from profiler.capture.collectors.pyspy import MAIN_THREAD
from profiler.diagnoses import calls as call_rules
from profiler.diagnoses.engine import Rule
from profiler.diagnoses.input import INPUT_BOUND_PCT

#: A line worth a finding holds at least this share of the lines window's mean step (the
#: lines phase inflates the loop's other lines: a custom loop's per-step logging, ~45% of a
#: step without the profiler, read 25-35% of the lines window's) ...
MIN_SHARE = 0.2
#: ... runs at least this often a step (less often: periodic work, another finding's) ...
MIN_PER_STEP = 0.5
#: ... and one execution of it takes at most this many steps (more: it holds the steps).
MAX_HIT_STEPS = 1.5
#: The functions of a script's input (a Sequence's batches, a generator's iterator).
INPUT_FUNCTIONS = frozenset({"__getitem__", "__next__", "__iter__", "__len__"})
#: A line that trains the model (an optimizer's update, gradients, a train step's call):
#: the step's own work, whatever runs it.
TRAINING_LINE = re.compile(
    r"apply_gradients|minimi[sz]e\(|optimi[sz]er|\.gradient\(|train_step|train_on_batch|"
    r"\.backward\(|\.step\("
)
#: A line that sleeps (``time.sleep``): no work at all, and never the training's arithmetic (the
#: tf.data performance guide's loop, ``time.sleep(0.01)`` standing for its training step, read
#: "Python 70%" and was told to wrap the loop in tf.function; the waiting diagnoses name it).
SLEEP_LINE = re.compile(r"(^|[^\w.])(time\.)?sleep\(")
#: Logging and progress: printing, tqdm's postfix and description, loggers, summary writers.
LOGGING_LINE = re.compile(
    r"\bprint\(|\.set_postfix(_str)?\(|\.set_description(_str)?\(|\blogg(ing|er)\.|"
    r"\.(info|debug|warning)\(|\.write\(|\.add_(scalar|summary|histogram)\(|"
    r"summary\.(scalar|histogram|image)\(|\b(wandb|mlflow|run|experiment|neptune)\."
    r"log(_metrics?)?\(|\.flush\("
)
#: A loop's header or a ``next()``: fetching the step's batch (``input_bound`` measures it).
INPUT_LINE = re.compile(r"^(async\s+)?(for|while)\b|.*\bnext\(")
#: A line making the step's batch (``generate_batch(...)``, ``next_batch(...)``, ``load_batch``).
BATCH_LINE = re.compile(r"\b\w*(batch|generate|prepare|augment)\w*\s*\(", re.IGNORECASE)
#: An array indexed whole by a permutation (``X[perm]``, ``x[shuffled_idx]``): a shuffled copy
#: of the data set, not of one batch (a slice of the index, ``perm[i:i + b]``, is a batch).
WHOLE_GATHER = re.compile(
    r"\b\w+\[\s*(perm|shuffl)\w*\s*\]",
    re.IGNORECASE,
)
#: An array rebound to itself with a row added (``h = np.vstack([h, w])``, ``a = np.append(a,
#: x)``): the whole array copied at every step, a cost that grows with the steps (a logistic
#: regression's weight history, 90% of its loop without the profiler, read "compute 79%").
GROWING_ARRAY = re.compile(
    r"^\s*(?P<name>[\w.]+)\s*=\s*(np|numpy)\.(append|vstack|hstack|dstack|concatenate|"
    r"row_stack|column_stack|stack)\(\s*[\[(]?\s*(?P=name)\s*[,\])]"
)
#: A weighted draw that sums its weights at every call (``random.choices(..., weights=p)``,
#: ``np.random.choice(n, p=p)``): skip-gram's negative sampling, 43% of its loop without the
#: profiler, unnamed.
WEIGHTED_DRAW = re.compile(r"\bchoices\([^#]*\bweights\s*=|\bchoice\([^#]*\bp\s*=")
#: A whole Python container made into an array (``X = np.array(samples)``, ``y =
#: np.append([], labels)``): every sample converted at every step where it runs in the loop (a
#: softmax regression converting its 20,000-sample list each batch: 93-98% of its loop without
#: the profiler, read "the arrays are too small for numpy to pay off").
WHOLE_CONVERT = re.compile(
    r"^\s*[\w.]+\s*=\s*(np|numpy)\.(array|asarray|asanyarray|stack|vstack|hstack|"
    r"concatenate|append)\(\s*(\[\s*\]\s*,\s*)?[A-Za-z_][\w.]*\s*(,[^()]*)?\)"
    r"(\.astype\([^()]*\))?\s*(#.*)?$"
)
#: Saving the model or the weights (``pickle.dump(params, f)``, ``np.save``, ``model.save``,
#: ``save_weights``) and the file opened for it: a checkpoint (a from-scratch MLP pickling its
#: 7 MB of weights after every step: 15-44% of its loop without the profiler, unnamed).
SAVE_LINE = re.compile(
    r"\b(pickle|joblib|dill|cloudpickle|json|torch)\.dump?s?\(|\b(np|numpy)\.save(z|"
    r"z_compressed|txt)?\(|\.save(_weights)?\(|\.to_(csv|pickle|parquet)\(|"
    r"\bopen\([^#]*['\"][wa]b?\+?['\"]"
)
#: An evaluation on held-out or whole data (``train_loss, train_acc = full_loss()``, ``s_val =
#: forward(params, X_val)``, ``evaluate(...)``): a from-scratch softmax regression computing its
#: loss on all 60,000 rows for a log line at every step (93% of its loop without the profiler)
#: and an MLP validating on its whole validation set after every step (63%) read "compute
#: 93%/96%", their fix float32.
EVAL_LINE = re.compile(
    r"\b(evaluate|validate|validation|full_(loss|acc\w*|eval\w*|metrics?|score)|"
    r"\w+_(val|valid|validation|test)|(val|valid|validation)_\w+)\b",
    re.IGNORECASE,
)
#: Python's built-in ``sum``/``min``/``max`` of an array (``cost = 1 / m * sum(error)``): it
#: iterates the array's first axis, one numpy scalar operation per element (Andrew Ng's
#: logistic regression exercise as its numpy ports write it: 6.5-7.3 ms of every iteration over
#: 20,000 rows, 90% of it with one BLAS thread, 0.76 ms with np.sum, without the profiler; it
#: read "dispatch 43%" and no finding named it). Only a line holding a large share is named.
#: One argument, not a list, tuple or generator written there (``max(best, acc)`` and
#: ``sum(x for x in xs)`` are Python's own work).
PY_REDUCE = re.compile(
    r"(?<![\w.])(sum|min|max)\((?!\s*[\[(])(?![^()]*\bfor\b)([^(),]|\([^()]*\))*\)"
)
#: A Keras callback's per-batch methods.
PER_BATCH = re.compile(r"(^|\.)on_(train_|test_|predict_)?batch_(begin|end)$")


def _step_calls(trace: Any) -> tuple[str, ...]:
    """Source fragments of the lines that call the step: they are the step, not in it."""
    script = getattr(trace, "script", None) or {}
    calls = [".fit(", "fit_generator(", "train_on_batch(", ".run(", "session.run"]
    calls += [f"{c}(" for c in (script.get("auto_step") or {}).get("calls") or []]
    calls += [
        f"{str(s['name']).rsplit('.', 1)[-1]}("
        for s in script.get("functions") or []
        if s.get("name")
    ]
    marked = (script.get("marks") or {}).get("step_function")
    if marked:
        calls.append(f"{str(marked).rsplit('.', 1)[-1]}(")
    return tuple(calls)


def step_call_lines(
    trace: Any, lines: Any, more: tuple[str, ...] = ()
) -> tuple[tuple[str, ...], set[str]]:
    """The source fragments of the lines that call the step (``_step_calls`` and ``more``),
    with the script's functions whose lines call it, followed through their callers to a
    fixed point: a line of those functions runs beside the step's call, and a call of one of
    them holds the step (a DQN's agent.replay(batch_size), whose replay calls fit, read 53% of
    a step; a GAN's iteration(epoch), three train_on_batch steps, read as its slow step).
    Returns (the fragments, the callers' names)."""
    calls = _step_calls(trace) + more
    callers: set[str] = set()
    while True:
        found = {ln.function for ln in lines if any(c in ln.source for c in calls)}
        if found <= callers:
            return calls, callers
        callers |= found
        calls += tuple(f"{fn.rsplit('.', 1)[-1]}(" for fn in found if not fn.startswith("<"))


#: An assignment's targets, before its value (``_, loss_val = ``; not ``==``).
TARGETS = re.compile(r"^[^(=]*[^=!<>(]=(?!=)")


def _called(source: str) -> str:
    """A line's value, without the names it assigns: a TF1 loop's training call
    ``_, loss_val = sess.run([train_op, loss])`` read as an evaluation by its target's name,
    and its step, all of it, as "100% of the time in the steps, in a few long calls"."""
    m = TARGETS.match(source)
    return source[m.end() :] if m else source


def step_line_facts(f: dict[str, Any], trace: Any) -> None:
    """The script's line inside the lines window's steps that holds the most of a step."""
    script = trace.script or {}
    detection = script.get("detection") or {}
    if not script.get("path"):
        return
    # A loop found by the automatic step (or --step-line): its body is the step's work, but
    # for logging and progress bars (tqdm's set_postfix every step: 32-43% of a numpy loop,
    # measured without the profiler, left unnamed in "Python 35%").
    only_logging = detection.get("source") in ("auto_loop", "step_line")
    rec = trace.phase("lines")
    data = getattr(rec, "data", None) if rec is not None else None
    steps = int(getattr(data, "steps_profiled", 0) or 0)
    if rec is None or not steps or not rec.lines or rec.window is None:
        return
    durations = list(rec.window.durations_ns())
    if not durations:
        return
    # The mean step, as the line's time per step is a mean (a median step of a window whose
    # callback varies put a line at 100% of it).
    step_ns = sum(durations) / len(durations)
    if step_ns <= 0:
        return
    # A line calling the Keras method predict_in_loop names is that finding's (a DQN's
    # per-sample ``model.predict`` line read 33% of its step beside it).
    named = call_rules.looped(f)
    calls, callers = step_call_lines(trace, rec.lines, (named,) if named else ())
    # The step's own tf.functions: their body's lines run each step only where the functions
    # run eagerly (tf.config.run_functions_eagerly(True)), and they are the step's work (a
    # custom loop's `logits = model(x, training=True)` read "the script's own work beside
    # the step, not the model's").
    step_bodies = {
        str(s["name"]).rsplit(".", 1)[-1] for s in script.get("functions") or [] if s.get("name")
    }
    best = None
    logging = []
    for ln in rec.lines:
        if not ln.hits or "-packages/" in ln.file or "/profiler/" in ln.file:
            continue
        function = ln.function.rsplit(".", 1)[-1]
        source = ln.source.strip()
        if function in INPUT_FUNCTIONS or (
            any(c in source for c in calls) and not EVAL_LINE.search(_called(source))
        ):
            continue  # a call of the step (but an evaluation with the step's own functions)
        if INPUT_LINE.match(source) or TRAINING_LINE.search(source):
            continue  # the loop's next batch (input_bound's), or the model's training
        if (only_logging or function in step_bodies) and not _beside_the_math(source):
            continue
        if ln.hits / steps < MIN_PER_STEP or ln.total_ns / ln.hits > MAX_HIT_STEPS * step_ns:
            continue
        per_step = ln.total_ns / steps
        if best is None or per_step > best[1]:
            best = (ln, per_step)
        if LOGGING_LINE.search(source) or SAVE_LINE.search(source) or EVAL_LINE.search(source):
            logging.append((ln, per_step))
    if best is None:
        return
    ln, per_step = best
    group = [x for x in logging if (x[0].file, x[0].function) == (ln.file, ln.function)]
    lines = [ln.line]
    f["hot_line_where"] = f"line {ln.line} of {ln.function} (`{ln.source.strip()}`) holds"
    if len(group) >= 2 and sum(p for _, p in group) > per_step:
        # The step's logging lines together: each under the finding's share, together over
        # it (a custom loop's two tf.summary.scalar calls and a print, 12%, 17% and 9% of the
        # lines window's step; 57-62% of the loop without the profiler, unnamed).
        group.sort(key=lambda x: x[0].line)
        lines = [x[0].line for x in group]
        per_step = sum(p for _, p in group)
        f["hot_line_where"] = (
            f"lines {', '.join(str(n) for n in lines[:-1])} and {lines[-1]} of {ln.function} "
            f"({'; '.join(f'`{x[0].source.strip()}`' for x in group)}) hold"
        )
        ln = max(group, key=lambda x: x[1])[0]
    share = min(per_step / step_ns, 1.0)
    f["hot_line"] = ln.line
    f["hot_line_function"] = ln.function
    f["hot_line_source"] = ln.source.strip()
    f["hot_line_per_step"] = ln.hits / steps
    f["hot_line_how"] = (
        f"the lines phase, its steps {step_ns / 1e3:,.0f} µs on average, which slows the Python "
        "it traces more than the native calls"
    )
    sampled = sampled_share(trace, ln.file, lines)
    rare = False
    mean_factor = 1.0
    if sampled is not None:
        # The samples' share, where there are enough: line_profiler slows the script's own
        # Python (the lines it times) and not the native calls beside it (word2vec's
        # generate_batch, 20% of a step without the profiler: 45% of the lines window's step,
        # 13% ±5 of the samples).
        hit, total, mean_factor = sampled
        half = 1.96 * (share_s := hit / total) ** 0.5 * (1 - share_s) ** 0.5 / total**0.5
        f["hot_line_how"] = (
            f"{hit} of {total} samples in the steps, ±{100 * half:.0f} points; the lines phase "
            f"read {100 * share:.0f}%, as it slows the Python it traces"
        )
        lines_share = share
        share = share_s
        rare = _in_few_calls(f, share - half)
        outside = _outside_share(f)
        if outside is not None and share_s + half < min(lines_share, outside) and not rare:
            # A tf.function step's logging beside the call: the hooks time the script's
            # Python outside the call, and the lines phase names its lines; the samples read
            # less (two tf.summary.scalar calls and a print each step: 60% in the lines
            # phase, 58% outside the call by the hooks, 26% ±5 of the samples; 57-62%
            # without the profiler).
            share = min(lines_share, outside)
            f["hot_line_how"] = (
                f"the hooks timed {100 * outside:.0f}% of the step in the script's own Python "
                f"outside the tf.function call, and the lines phase put {100 * lines_share:.0f}% "
                f"in these lines; {hit} of {total} samples in the steps had them"
            )
    f["hot_line_share_pct"] = 100 * share
    # Its share of the step, at the timed step's speed (the lines phase slows the Python it
    # traces: its absolute figures are not the step's).
    f["hot_line_us"] = share * f["step_us"]
    f["hot_line_holds"] = (
        f"{100 * share:.0f}% of each step, about {f['hot_line_us']:,.0f} µs of the "
        f"{f['step_us']:,.0f} µs step"
    )
    f["hot_line_beside_call"] = ln.function in callers
    f["hot_line_fix"] = _fix(ln.function, ln.source)
    if _eager(trace, ln.file, lines):
        # Keras's PPO example: `value_t = critic(observation)`, an eager model call at each
        # environment step beside the tf.function that samples the action, 64% of the step,
        # was told to run "every N steps or once after the loop" as logging; the critic and
        # the log-probability inside the sampling tf.function made the step 15.5 -> 2.6 ms,
        # without the profiler.
        f["hot_line_fix"] = EAGER_FIX
    f["hot_line_rare"] = rare
    if rare:
        # Its samples are more than the typical step's Python can hold: the time is in a few
        # long calls, the slow steps (a course's next_batch, 3.4 µs a call, copies the whole
        # 172 MB training set at each epoch's end: 37-700 ms once in 429 steps; the samples
        # put it at 36-52% "of each step", where the typical step had 11 µs of the script's
        # Python beside session.run). Its cost is at most what the timed window's slow steps
        # add to its mean step (the sampled window's few long calls, slowed by other load,
        # read 1.3 ms a step where they took 0.1-0.5 ms without the profiler).
        sampled_us = share * f["step_us"] * mean_factor
        excess = _slow_excess_us(trace)
        f["hot_line_us"] = min(sampled_us, excess) if excess else sampled_us
        added = (
            f"; the timed window's slow steps add {excess:,.0f} µs to its mean step"
            if excess
            else "; the timed window had none of its long calls, the sampled one "
            f"{sampled_us:,.0f} µs a step"
            if excess is not None
            else ""
        )
        source = ((trace.script or {}).get("detection") or {}).get("source") or ""
        between = (
            "between the session.run calls"
            if f.get("framework") == "tf1" or str(source).startswith("session")
            else "beside the step's framework calls"
        )
        f["hot_line_holds"] = (
            f"{100 * share:.0f}% of the time in the steps, in a few long calls: a typical "
            f"{f['step_us']:,.0f} µs step has {f['script_python_us']:,.0f} µs of the "
            f"script's own Python {between}{added}"
        )
        f["hot_line_fix"] = (
            # Summaries or logs every step: a writer buffers them and flushes its queue to
            # disk now and then (a TF2 loop's tf.summary.scalar lines read "a few long calls"
            # and were told to shuffle an index array).
            "Write the summaries or logs every N steps (if step % N == 0, or under "
            "tf.summary.record_if), not every step: a writer buffers them and flushes its "
            "queue to disk in a few long calls (the slow steps)"
            if LOGGING_LINE.search(ln.source)
            else "Find what it does once in a while (a shuffle or copy of the whole data set "
            "each epoch, a reload, a save) and do that on less data (shuffle an index array "
            "and take each batch by it) or less often: its time comes in a few long calls (the "
            "slow steps), not in every step"
        )


#: Samples in the steps that give a line's share instead of the lines phase's (±10 points at
#: worst, 95%; word2vec's sampled phase took 148-154).
MIN_SAMPLES = 100


#: The samples put a line at least this many times the script's own Python of the typical
#: step (its interval's lower end): its time is in a few long calls.
RARE_FACTOR = 2.0


def _in_few_calls(f: Mapping[str, Any], low_share: float) -> bool:
    """Whether the samples' share of a line (its interval's lower end) exceeds what the
    typical step leaves the script's own Python between the framework's calls (TF1's hooks
    measure it: ``script_python_us``) by ``RARE_FACTOR`` and a twentieth of the step."""
    bound = f.get("script_python_us")
    step = float(f.get("step_us") or 0.0)
    if bound is None or step <= 0:
        return False
    return low_share * step > max(RARE_FACTOR * float(bound), float(bound) + 0.05 * step)


def _slow_excess_us(trace: Any) -> float | None:
    """What the timed window's steps over ``OUTLIER_FACTOR`` times its median add to its mean
    step, µs; None without a timed window."""
    rec = trace.phase("timed")
    window = getattr(rec, "window", None) if rec is not None else None
    d = sorted(window.durations_ns()) if window is not None else []
    if not d:
        return None
    med = d[len(d) // 2]
    return sum(x - med for x in d if x > OUTLIER_FACTOR * med) / len(d) / 1e3


def sampled_share(trace: Any, file: str, lines: Collection[int]) -> tuple[int, int, float] | None:
    """(samples whose stack runs one of ``file``'s ``lines``, samples, the sampled window's
    mean step over its median) of the script's thread in the sampled phase's steps; None
    without ``MIN_SAMPLES`` of them."""
    rec = trace.phase("sampled")
    if rec is None or not rec.samples:
        return None
    factor = 1.0
    window = getattr(rec, "window", None)
    durations = sorted(window.durations_ns()) if window is not None else []
    if durations and durations[len(durations) // 2] > 0:
        factor = max(sum(durations) / len(durations) / durations[len(durations) // 2], 1.0)
    main = [s for s in rec.samples if s.thread in (MAIN_THREAD, "")]
    if any(stacks.in_steps(s.frames) for s in main):
        main = [s for s in main if stacks.in_steps(s.frames)]
    total = sum(s.count for s in main)
    if total < MIN_SAMPLES:
        return None
    hit = sum(
        s.count
        for s in main
        if any(not fr.native and fr.line in lines and fr.file == file for fr in s.frames)
    )
    return hit, total, factor


def _outside_share(f: Mapping[str, Any]) -> float | None:
    """The share of a tf.function step the hooks timed in the script's Python outside the
    call (``script_python_us``); None for other steps."""
    outside, step = f.get("script_python_us"), f.get("step_us")
    if f.get("framework") != "tf2" or not outside or not step:
        return None
    return min(float(outside) / float(step), 1.0)


def _beside_the_math(source: str) -> bool:
    """Whether a line of a loop's body (all of it the step's work) is still the script's own
    work beside the training's arithmetic: logging, saving, a whole container made into an
    array, an array copied whole to grow by a row, a weighted draw that sums its weights each
    call, a data set copied whole in a new order."""
    return bool(
        LOGGING_LINE.search(source)
        or SLEEP_LINE.search(source)
        or SAVE_LINE.search(source)
        or EVAL_LINE.search(source)
        or WHOLE_CONVERT.match(source)
        or GROWING_ARRAY.match(source)
        or WEIGHTED_DRAW.search(source)
        or WHOLE_GATHER.search(source)
        or PY_REDUCE.search(source)
    )


def holds(f: Mapping[str, Any], pct: float) -> bool:
    """Whether a line of the script in the steps holds at least ``pct``% of the step (and
    enough for a finding): time measured in the steps is inside that line's work."""
    share = f.get("hot_line_share_pct")
    return share is not None and share >= max(100 * MIN_SHARE, pct)


#: A hot line whose samples run TensorFlow or Keras eagerly under it (a model called op by
#: op) at least this share of them, from at least ``EAGER_SAMPLES`` samples ...
EAGER_SHARE = 0.5
EAGER_SAMPLES = 20
#: ... gets this fix, not the catalogue's (logging or an evaluation every N steps).
EAGER_FIX = (
    "It runs TensorFlow eagerly at every step (a model or ops called one op at a time, outside "
    "any tf.function): run that work inside a tf.function (the step's own, or one of its own "
    "around the model call), keeping .numpy() and the numpy work outside it; its ops then run "
    "as one graph call (Keras's PPO example: its eager critic call and log-probability moved "
    "into the sampling tf.function, the step 15.5 -> 2.6 ms, without the profiler)"
)


def _eager(trace: Any, file: str, lines: Collection[int]) -> bool:
    """Whether the sampled steps show the line running TensorFlow eagerly (``EAGER_SHARE``)."""
    rec = trace.phase("sampled")
    if rec is None or not rec.samples:
        return False
    got = sampling.eager_line_share(rec.samples, file, list(lines))
    return got is not None and got[1] >= EAGER_SAMPLES and got[0] >= EAGER_SHARE


def _fix(function: str, source: str) -> str:
    if PER_BATCH.search(function):
        fix = (
            f"Make {function} do its work every N batches (return early unless batch % N == 0) "
            "or once an epoch in on_epoch_end"
        )
        if re.search(r"\.(evaluate|predict)\(", source):
            fix += (
                "; metrics on held-out data are fit's validation_data (with validation_freq), "
                "once an epoch, not a call of their own every batch"
            )
        return fix
    if SAVE_LINE.search(source) and not LOGGING_LINE.search(source):
        return (
            "It saves at every step: save every N steps (if step % N == 0), once an epoch or "
            "after the loop, and keep the best weights in memory (a copy of the arrays) until "
            "then; a checkpoint is worth what it costs only as often as a restart needs it"
        )
    if EVAL_LINE.search(source):
        return (
            "It evaluates on held-out or whole data at every step: do it every N steps (if "
            "step % N == 0) or once an epoch, on a sample of the data where a log line needs "
            "a figure each time; the training step does not need it"
        )
    if LOGGING_LINE.search(source):
        return (
            "Log, print or update the progress bar every N steps (if step % N == 0), not every "
            "step: it is the script's own work, not the model's"
        )
    if WHOLE_CONVERT.match(source):
        return (
            "It makes an array of a whole Python container at every step: where that holds the "
            "data set, convert it once before the loop (X = np.asarray(samples)) and take each "
            "batch as a slice or an index of that array (X[i:i + batch]); where samples are "
            "added as the loop goes, keep them in an array allocated once and fill row i"
        )
    if GROWING_ARRAY.match(source):
        return (
            "It copies the whole array to add to it at every step (the array joined with "
            "itself: the copy grows with the steps, and so does the step): append to a Python "
            "list and make the array once after the loop (np.array(rows) or np.stack(rows)), "
            "or allocate it once (np.empty((steps, ...))) and assign row i"
        )
    if WEIGHTED_DRAW.search(source):
        return (
            "The weighted draw sums all its weights at every call: compute the cumulative "
            "weights once before the loop (random.choices(..., cum_weights=cum), cum = "
            "list(itertools.accumulate(weights))), or draw many samples in one call "
            "(rng.choice(n, size=(steps, k), p=p)) and take them a step at a time"
        )
    if WHOLE_GATHER.search(source):
        # A train_on_batch loop shuffling its 60,000 rows at every batch (X_train[perm]):
        # 91% of the step without the profiler, told "logging ... every N steps".
        return (
            "It copies the whole data set in a new order at every step (an array indexed by a "
            "permutation of all its rows): shuffle once an epoch, before the batch loop, and "
            "take each batch as X[perm[i:i + batch_size]], a copy of one batch's rows"
        )
    reduce = PY_REDUCE.search(source)
    if reduce and not LOGGING_LINE.search(source):
        name = reduce.group(1)
        return (
            f"Python's built-in {name}() goes through an array one element (or row) at a time, "
            f"a numpy operation each: use np.{name}(...) or the array's .{name}(), one native "
            "call over all of it (where its argument is a Python list of numbers, the built-in "
            "is right and the cost is the list's)"
        )
    if BATCH_LINE.search(source):
        # word2vec's generate_batch was told "logging, metrics or an evaluation every N steps".
        return (
            "It makes the step's batch in Python, beside the step: make the batches once before "
            "training (arrays the loop indexes), or in a tf.data pipeline (from_generator, or "
            "tensor slices and a map, with prefetch) that prepares the next batch while the "
            "step runs"
        )
    return (
        "It is the script's own work beside the step, not the model's: logging, metrics or an "
        "evaluation every N steps or once after the loop; a batch's preparation once before "
        "training, or in a tf.data map (num_parallel_calls, prefetch) that overlaps the steps"
    )


RULES: tuple[Rule, ...] = (
    Rule(
        id="step_line",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "hot_line",
            "hot_line_function",
            "hot_line_source",
            "hot_line_share_pct",
            "hot_line_per_step",
            "hot_line_how",
            "hot_line_holds",
            "hot_line_us",
            "hot_line_fix",
            "hot_line_where",
        ),
        # Input-bound steps wait for their batches: a line of a generator or a py_function
        # map feeding them is the input pipeline's work (input_bound names it); a line beside
        # the step's call is not (a custom loop logging every step: 920 µs of a 2,633 µs
        # step, its input 32%).
        when=lambda f: (
            f["hot_line_share_pct"] >= 100 * MIN_SHARE
            and (f.get("hot_line_beside_call") or (f.get("input_pct") or 0.0) < INPUT_BOUND_PCT)
        ),
        message="{label}: {hot_line_where} "
        "{hot_line_holds} ({hot_line_per_step:,.1f} times a step; {hot_line_how}).",
        fix="{hot_line_fix}.",
        cost="hot_line_us",
    ),
)
