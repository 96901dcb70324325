"""The waiting diagnoses: steps that spend their time asleep, or waiting on a queue that
another thread or process fills, or reading data on the steps' thread.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance`` calls ``wait_facts`` and includes ``RULES``). Both read the
sampled phase's samples inside the steps (the phase records idle samples):

* asleep: the classification table's ``sleep`` row (``time.sleep``'s native frames, seen where
  the script is sampled with ``--native``: numpy scripts); the attribution books them as
  ``other``, and ``sleep_in_steps`` names them with the line that sleeps. Without native
  frames (TensorFlow scripts) the step's hottest line is the sleep where its text calls
  ``time.sleep`` (booked as Python then). Asleep is taken out of the overhead the per-call
  findings read;
* waiting on a queue or a Pool's imap (``queue-wait``, ``pool-stream``, booked as ``feed_fetch``;
  a Pool's map or apply is ``other``: work farmed out, not data in): ``waits_for_batches``
  names the line that waits, where no tf.data pipeline's finding says it (``input_bound``);
* reading data on the steps' thread (``data-loading``: np.load, PIL, imageio, pandas's
  readers, Keras's ``load_img``, and the native frames under them; ``feed_fetch``):
  ``loads_in_steps`` names the line that reads.

Samples are taken evenly in time, so their shares are of the loop's time: the cost is the share
of the timed window's mean step (a loop waiting on its loader's queue had a median step of 32 µs
and a mean of 481 µs: most of its time is in the steps the queue was empty).

Measured here (a numpy loop loading a batch with ``np.load`` and sleeping 3 ms in each step of
~3.8 ms, 1,500 steps in 5.7 s without the profiler): before idle samples were recorded, the
answer was "Python 52%, dispatch 26%, compute 22%, no finding fired", the shares of the 0.5 ms
of work spread over the whole step.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis import sampling
from profiler.diagnoses.engine import Rule
from profiler.diagnoses.step_lines import SLEEP_LINE

#: The sleeping share of the steps worth a finding (its 95% interval's lower end above
#: ``SLEEP_MIN_LOW``).
SLEEP_SHARE = 0.10
SLEEP_MIN_LOW = 0.05


#: The share of the loop's time waiting on a queue worth a finding (``input_bound``'s 30%), its
#: interval's low end above ``QUEUE_MIN_LOW``.
QUEUE_SHARE = 0.30
QUEUE_MIN_LOW = 0.20


#: The share of the loop's time waiting for a Pool's map or apply worth a finding.
POOL_SHARE = 0.30
POOL_MIN_LOW = 0.20


#: The share of the loop's time reading data on the steps' thread worth a finding, its
#: interval's low end above ``LOAD_MIN_LOW``.
LOAD_SHARE = 0.20
LOAD_MIN_LOW = 0.10


def wait_facts(f: dict[str, Any], trace: Any) -> None:
    """The shares of the steps' samples asleep, waiting on a queue and reading data, each with
    the script's line that does it; asleep is taken out of the step's overhead."""
    rec = trace.phase("sampled")
    if rec is None or not rec.samples:
        return
    a = sampling.analyse(rec.samples, top=0)
    if not a.total:
        return
    mean = _mean_step_us(trace) or float(f.get("step_us") or 0.0)
    waits = (
        ("sleep", a.asleep),
        ("queue", a.queued),
        ("load", a.loading),
        ("pool", a.pooled),
    )
    for key, found in waits:
        n = sum(c for _line, c in found)
        if not n:
            continue
        _put_share(f, key, n / a.total, a.total, mean)
        (file, line, function), _n = found[0]
        where = _where(trace, file, line, function)
        # Other lines holding a quarter of it too (the labels' file read beside the inputs').
        more = [ln for (fl, ln, _fn), c in found[1:] if fl == file and c >= 0.25 * n]
        if more:
            where += "; and at line " + ", ".join(str(ln) for ln in more)
        f[f"{key}_where"] = where
    f["mean_step_us"] = mean
    if "sleep_share" in f:
        f["sleep_booked"] = "other"
    else:
        _sleep_from_hot_line(f, a.total)
    if "sleep_share" in f:
        _sleep_gain(f)
    if "sleep_share" in f and f.get("overhead_us") is not None and f.get("step_us"):
        # Asleep is no framework overhead a larger batch or several steps a call would spread
        # (a tf.function loop sleeping 4 ms a step: "96% of each step is overhead ... the
        # tf.function call's per-call cost").
        f["overhead_us"] = max(float(f["overhead_us"]) - f["sleep_us"], 0.0)
        f["overhead_pct"] = 100 * f["overhead_us"] / float(f["step_us"])
    if f.get("sleep_booked") == "Python" and f.get("python_us") is not None and f.get("step_us"):
        # Nor Python's work tf.function would take away (the tf.data guide's loop, its
        # training step a 10 ms sleep: "eager execution spends 9,960 µs per step in Python
        # ... wrap the body of the loop in tf.function").
        f["python_us"] = max(float(f["python_us"]) - f["sleep_us"], 0.0)
        if f.get("python_dispatch_us") is not None:
            f["python_dispatch_us"] = f["python_us"] + float(f.get("dispatch_us") or 0.0)
            f["python_dispatch_pct"] = 100 * f["python_dispatch_us"] / float(f["step_us"])


#: The step's wait for input, in % of the step, from which its input paces it.
PACED_PCT = 20.0


def _sleep_gain(f: dict[str, Any]) -> None:
    """What taking the sleep out would save: the sleep, or nothing where tf.data's thread
    makes the batches at the steps' pace (``gen_paces``: the sleep overlaps their making)."""
    f["sleep_gain"] = f"the step would lose about {f['sleep_us']:,.0f} µs"
    f["sleep_gain_us"] = f["sleep_us"]
    paced = float(f.get("input_pct") or 0.0) >= PACED_PCT
    if paced and not f.get("gen_paces"):
        # The step waits for its input beside the sleep: tf.data makes the next batch while
        # the step sleeps, so the sleep's time would become waiting (the data performance
        # guide's loop, its training step a 10 ms sleep: "the step would lose about 8,156
        # µs"; without the profiler, no less a median step, 3.2 ms of the mean).
        f["sleep_gain"] = (
            f"the step would not be faster while its input paces it: it waits "
            f"{f['input_us']:,.0f} µs a step for the next batch besides the sleep, and tf.data "
            "makes that batch while the step sleeps, so the sleep's time would become waiting "
            "(the input's fix comes first)"
        )
        f["sleep_gain_us"] = 0.0
    if f.get("gen_paces"):
        f["sleep_gain"] = (
            f"the step would not be faster while its batches take longer: "
            f"{f['gen_python']} makes each on tf.data's thread in about "
            f"{f['gen_cpu_us']:,.0f} µs ({f['gen_pct']:.0f}% of a step), and the step "
            "would wait for them instead of sleeping"
        )
        f["sleep_gain_us"] = 0.0


def _put_share(f: dict[str, Any], key: str, share: float, samples: int, mean_us: float) -> None:
    """``{key}_share``, its 95% interval (``_low``, ``_interval_pts``: binomial over
    ``samples``), ``_pct`` and ``_us`` (of the mean step)."""
    half = 1.96 * (share * (1 - share) / samples) ** 0.5
    f[f"{key}_share"] = share
    f[f"{key}_low"] = share - half
    f[f"{key}_pct"] = 100 * share
    f[f"{key}_interval_pts"] = 100 * half
    f[f"{key}_us"] = share * mean_us


def _sleep_from_hot_line(f: dict[str, Any], total: int) -> None:
    """Without native frames (a TensorFlow script is sampled without ``--native``) a sleep's
    samples are its line's: the step's hottest line (``profiler.diagnoses.step_lines``) is
    the sleep where its text calls ``time.sleep``; its finding gives way to this one."""
    source = str(f.get("hot_line_source") or "")
    if not SLEEP_LINE.search(source) or not f.get("hot_line_share_pct"):
        return
    share = min(float(f["hot_line_share_pct"]) / 100, 1.0)
    _put_share(f, "sleep", share, total, float(f.get("mean_step_us") or f.get("step_us") or 0.0))
    f["sleep_where"] = f"line {f.get('hot_line')} (`{source}`), in {f.get('hot_line_function')}"
    f["sleep_booked"] = "Python"
    f.pop("hot_line_us", None)


def _mean_step_us(trace: Any) -> float | None:
    """The timed window's mean step (µs), None where it has no steps."""
    rec = trace.phase("timed")
    window = getattr(rec, "window", None) if rec is not None else None
    durs = list(window.durations_ns()) if window is not None else []
    return sum(durs) / len(durs) / 1e3 if durs else None


def _where(trace: Any, file: str, line: int, function: str) -> str:
    """``line 17 (`time.sleep(0.003)`) in <module>``, the text from the lines phase if it ran."""
    text = ""
    lines = trace.phase("lines")
    for ln in getattr(lines, "lines", None) or ():
        if ln.line == line and ln.file == file and ln.source.strip():
            text = f" (`{ln.source.strip()}`)"
            break
    name = file.rsplit("/", 1)[-1]
    return f"line {line} of {name}{text}, in {function}"


def _wait_rule(
    id: str,
    key: str,
    share: float,
    low: float,
    message: str,
    fix: str,
    needs: tuple[str, ...] = (),
    tf_data_says_it: bool = False,
    cost: str = "",
) -> Rule:
    """A finding on one kind of wait (``key``: its facts ``{key}_share`` ... ``{key}_where``),
    from ``share`` of the loop's time with its interval's low end above ``low``; with
    ``tf_data_says_it``, not where a tf.data pipeline's wait was measured (``input_bound``
    says it, with the pipeline's stages and their fix)."""
    fields = ("share", "low", "pct", "interval_pts", "us", "where")

    def when(f: Any) -> bool:
        return (
            f[f"{key}_share"] >= share
            and f[f"{key}_low"] >= low
            and not (tf_data_says_it and f.get("input_pct") is not None)
        )

    return Rule(
        id=id,
        subject="workload",
        needs=("label", *(f"{key}_{x}" for x in fields), *needs, "mean_step_us"),
        when=when,
        message=message,
        fix=fix,
        cost=cost or f"{key}_us",
    )


RULES: tuple[Rule, ...] = (
    _wait_rule(
        "sleep_in_steps",
        "sleep",
        SLEEP_SHARE,
        SLEEP_MIN_LOW,
        "{label}: the steps sleep {sleep_pct:.0f}% ±{sleep_interval_pts:.0f} of the loop's "
        "time ({sleep_us:,.0f} µs of the {mean_step_us:,.0f} µs mean step, in time.sleep "
        "called at {sleep_where}): time in no work, booked as {sleep_booked}.",
        "Take the sleep out of the training loop (a throttle for printing or polling belongs "
        "outside the steps, or behind a check that runs every N steps): {sleep_gain}.",
        needs=("step_us", "sleep_booked", "sleep_gain", "sleep_gain_us"),
        cost="sleep_gain_us",
    ),
    _wait_rule(
        "waits_for_batches",
        "queue",
        QUEUE_SHARE,
        QUEUE_MIN_LOW,
        "{label} waits for its batches: {queue_pct:.0f}% ±{queue_interval_pts:.0f} of the "
        "loop's time ({queue_us:,.0f} µs of the {mean_step_us:,.0f} µs mean step) is the main "
        "thread waiting on a queue (or a Pool's imap) another thread or process fills, at "
        "{queue_where}: the batches are made slower than the steps use them.",
        "Make each batch faster where it is made (per-sample Python in the producer as array "
        "operations on the whole batch), make them in several processes (Python work in "
        "threads shares one interpreter lock), or once before the loop if they are the same "
        "every epoch: the steps would lose up to {queue_us:,.0f} µs of waiting.",
        tf_data_says_it=True,
    ),
    _wait_rule(
        "loads_in_steps",
        "load",
        LOAD_SHARE,
        LOAD_MIN_LOW,
        "{label} reads its data inside the steps: {load_pct:.0f}% ±{load_interval_pts:.0f} of "
        "the loop's time ({load_us:,.0f} µs of the {mean_step_us:,.0f} µs mean step) reads or "
        "decodes files at {load_where}, on the thread that runs the steps.",
        "Read the data once before the loop where it fits in memory, or read it beside the "
        "steps (a tf.data pipeline over the file names with a parallel map that reads and "
        ".prefetch(tf.data.AUTOTUNE), or a loader process feeding a queue), so reading "
        "overlaps the steps: up to {load_us:,.0f} µs a step.",
        tf_data_says_it=True,
    ),
    _wait_rule(
        "waits_for_workers",
        "pool",
        POOL_SHARE,
        POOL_MIN_LOW,
        "{label}: the main process waits for its Pool's worker processes {pool_pct:.0f}% "
        "±{pool_interval_pts:.0f} of the loop's time ({pool_us:,.0f} µs of the "
        "{mean_step_us:,.0f} µs mean step, in a map or apply at {pool_where}): the work is the "
        "workers', which this profile does not split (booked as other).",
        "The function the pool runs is the cost: profile it on its own (a script calling it in "
        "a loop), make it cheaper or give it more data per call (fewer, larger tasks: "
        "chunksize), and give the pool a process per free core; the main process idles "
        "meanwhile, so its own work can overlap the map (map_async).",
    ),
)
