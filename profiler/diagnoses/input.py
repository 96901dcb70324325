"""Input-bound steps: the time a step waits for its next batch, and what the pipeline lacks.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance``). ``input_facts`` reads the attribution's input parts
(``feed_fetch.data_ops``: tf.data's iterator kernels inside the step, from the framework trace;
``feed_fetch.input``: a tf.data iterator's ``next`` between a loop's calls, from the hooks;
``feed_fetch.input_python``: the native call waiting for the script's Python that tf.data runs on
its own threads, a generator's or a ``py_function``'s, from the samples) and
the structure of the pipeline the script iterated (``script.pipelines``, recorded by
``profiler.capture.script.pipeline``), and builds the fix from what that pipeline lacks: only
the changes that apply to it, each naming the stage it changes. ``cpu_facts`` reads the timed
window's CPU (``profiler.analysis.threads``): a pipeline that keeps up with the steps can still
take the cores from the model's kernels (``cpu_competition``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec

from profiler.analysis import sampling
from profiler.analysis import threads as core_use
from profiler.diagnoses.engine import Facts, Rule
from profiler.diagnoses.py_in_step import PY_OPS
from profiler.model import tfdata

#: Attribution parts that are a step waiting for its input.
INPUT_PARTS = ("feed_fetch.data_ops", "feed_fetch.input", "feed_fetch.input_python")
#: Sources whose elements are already in memory: caching after an expensive map costs nothing
#: beyond the mapped data's size.
IN_MEMORY = frozenset({"from_tensor_slices", "from_tensors", "range"})
#: A step waiting this share of its time for input is input-bound.
INPUT_BOUND_PCT = 30
#: Batches made in Python (``generator_facts``) get a finding when they cost the step this share.
GENERATOR_PCT = 15
#: tf.data's thread making the batches this share of the step sets the steps' pace: the step
#: waits for it, and what else the step does overlaps it (the tf.data guide's loop: its
#: generator 96% of the step; without the profiler, taking the step's own 10 ms out left it
#: 17.7 -> 18.0 ms, the generator's 15 ms out 17.7 -> 13.3 ms).
PACE_PCT = 90

#: CPU competition (``cpu_competition``): the process kept at least this share of its cores
#: busy in the timed window (or the machine all its cores, other processes included), and the
#: threads other than the script's, beyond the kernels' time, used at least ``COMPETING_SHARE``
#: of them. Set on the Keras weather example on 2 cores (caching its windows made an epoch 1.9x
#: faster) and tests/test_threads.py's heavy parallel map.
BUSY_SHARE = 0.8
#: The file names of Keras's data adapters (``array_data_adapter.py``, ``py_dataset_adapter.py``).
KERAS_ADAPTER = "adapter.py:"
#: 0.12: the time series tutorial's windows (timeseries_dataset_from_array, then a map after
#: the batch) beside other work: the pipeline's threads 0.29 core of 2 (0.14), estimated at
#: 1.6 ms of a 10.8 ms step, and caching the windows saved 2.0 ms a batch (25%) without the
#: profiler; at 0.25 no finding named it.
COMPETING_SHARE = 0.12


def input_facts(f: dict[str, Any], parts: Mapping[str, float], trace: Any) -> None:
    """``input_us``/``input_pct``, the pipeline in words and the fix that applies to it."""
    cpu_facts(f, trace)
    waits = [parts[p] for p in INPUT_PARTS if p in parts]
    step = f["step_us"]
    if not waits or not step:
        return
    f["input_us"] = sum(waits)
    f["input_pct"] = 100 * f["input_us"] / step
    f["rest_us"] = max(step - f["input_us"], 0.0)
    pipelines = (trace.script or {}).get("pipelines") or []
    # The most iterated pipeline feeds the steps (a validation set is iterated less often).
    pipe = pipelines[0] if pipelines else {}
    stages = pipe.get("stages") or []
    f["pipeline"] = describe(stages) if stages else "not recorded (no tf.data iterated)"
    epochs = ((trace.script or {}).get("fit") or {}).get("epochs")
    if not epochs and pipe.get("iterations"):
        epochs = pipe["iterations"]
    generator = bool(stages) and stages[0].get("kind") == "from_generator"
    python = _sampled_python(parts, trace, any_wait=generator)
    if generator:
        generator_facts(f, trace)
    f["input_fix"] = fixes(
        pipe,
        f["input_us"],
        f["rest_us"],
        epochs,
        python,
        _timed_in_first_epoch(trace),
        fit=bool((trace.script or {}).get("fit")),
        python_waits=bool(f.get("gen_waits")),
    )
    if generator and f.get("gen_fix") == GEN_WAITS_FIX:
        f["input_fix"] = f"{f['input_fix']} {GEN_WAITS_FIX}"


#: A first epoch filling a cache is named when its excess holds this share of the loop's time.
CACHE_FILL_SHARE = 0.1


def cache_fill_facts(f: dict[str, Any], trace: Any, one_off: Any) -> None:
    """A ``fit`` whose pipeline caches after a map, warmed up through its first epoch (the
    schedule does so from ``tfdata.CACHE_EPOCHS`` epochs): that epoch's time beyond the later
    epochs' pace (the warm-up's excess), against the loop's time from its first step to its
    last. The tf.data guide's fixed pipeline (3 epochs of 100 batches): 47-50 ms a step in
    its first epoch, 2.6-2.9 ms in the others, measured without the profiler."""
    script = trace.script or {}
    fit = script.get("fit") or {}
    per_epoch, epochs = int(fit.get("steps_per_epoch") or 0), int(fit.get("epochs") or 0)
    pipes = [p for p in script.get("pipelines") or () if p.get("stages")]
    cached = [p for p in pipes if tfdata.caches_after_map([st["kind"] for st in p["stages"]])]
    loop_s = float((script.get("time") or {}).get("steps_s") or 0.0)
    durations = getattr(getattr(trace, "warmup", None), "durations_ns", None)
    warm = len(durations()) if durations is not None else 0
    if not cached or epochs < tfdata.CACHE_EPOCHS or one_off is None or not loop_s:
        return
    if warm < per_epoch:
        return  # the warm-up did not run through the first epoch
    # Its first step aside: it traces the train function, and a shuffle buffer larger than
    # the data set fills the whole cache before it (the image-loading tutorial's first epoch,
    # 9.0 s beyond the later epochs' pace, 6.0 s of it its first step; without the profiler,
    # decoding its images took 0.2 s and its first epoch was as slow without map or cache).
    n = max(warm, 1)
    steady = (getattr(one_off, "warmup_total_ns", 0) - one_off.warmup_excess_ns) / n
    first = max(getattr(one_off, "first_step_ns", 0) - steady, 0)
    excess_s = max(one_off.warmup_excess_ns - first, 0) / 1e9
    if excess_s < CACHE_FILL_SHARE * loop_s:
        return
    stages = cached[0]["stages"]
    maps = [_name(st.get("function", "")) or "fn" for st in stages if st["kind"] == "map"]
    f["fill_map"] = maps[-1] if maps else "fn"
    f["fill_s"] = excess_s
    f["fill_pct"] = 100 * excess_s / loop_s
    f["fill_loop_s"] = loop_s
    f["fill_later"] = epochs - 1
    f["fill_cost_us"] = excess_s * 1e6 / max(int(script.get("steps") or 0), 1)


def generator_facts(f: dict[str, Any], trace: Any) -> None:
    """Batches made by Python on tf.data's thread (a Keras ``PyDataset``'s ``__getitem__`` or the
    script's generator, run as a ``PyFunc`` there): their time per step in the framework window
    (``gen_cpu_us``, against that window's own step: ``gen_pct``), the script's functions
    sampled in it (``gen_python``), and what it costs the step (``gen_us``).

    The step waits for part of it (``input_us``); the rest runs beside the step, on the cores
    (and under the GIL) the step's kernels and Python use, so it takes about its time spread
    over the cores from them: ``gen_us`` = the wait + the rest / cores. Measured on this machine
    (2 cores; a PyDataset flipping and adding noise to 64 images a batch for a small conv net,
    ~7 ms a batch alone): the step 24.9 ms as written, 18.3 ms with the batches made once
    beforehand (-6.6 ms), 25.4 ms with workers=2; the profiler read the PyFunc at 10.2 ms a step,
    the wait at 3.1 ms: 3.1 + 7.1 / 2 = 6.7 ms."""
    fw, rec = trace.data("framework"), trace.phase("framework")
    table = (fw.xplane_op_table or fw.op_table) if fw is not None else None
    if table is None or not table.steps or rec is None or rec.window is None:
        return
    durations = list(rec.window.durations_ns())
    gen_ns = sum(r.total_ns for r in table.rows if r.input_thread and r.kernel in PY_OPS)
    if not durations or gen_ns <= 0:
        return
    window_step = sum(durations) / len(durations) / 1e3
    f["gen_cpu_us"] = gen_ns / table.steps / 1e3
    f["gen_pct"] = 100 * min(f["gen_cpu_us"] / window_step, 1.0)
    cpu = trace.data("timed")
    cores = max(cpu.usable_cpus or cpu.cpu_count, 1) if cpu is not None else 1
    wait = min(float(f.get("input_us") or 0.0), f["gen_cpu_us"])
    beside = f["gen_cpu_us"] - wait
    timed = trace.phase("timed")
    n = timed.window.n_steps if timed is not None and timed.window is not None else 0
    if cpu is not None and n:
        # What runs beside the step takes a core only while it computes: a generator that
        # waits (a file, a sleep) takes none (the tf.data guide's generator sleeping 15 ms an
        # element: "about 9,498 µs of each 14,153 µs step" from 4,194 µs of wait, the other
        # threads' CPU 0.8 ms a step; its sleep removed, the step lost 4.4 ms without the
        # profiler).
        used = cpu.other_cpu_ns / n / 1e3
        waits = used < 0.5 * beside
        # Its Python as a whole mostly waits (what the step waits for included): parallel
        # calls of a py_function map overlap then (the data performance guide's map sleeping
        # 30 ms an element: 54 ms of PyFunc a step, its threads' CPU a fraction of it).
        f["gen_waits"] = used < 0.5 * f["gen_cpu_us"]
        beside = min(beside, used)
    else:
        waits, used = False, 0.0
    f["gen_us"] = min(wait + beside / cores, float(f["step_us"]))
    if waits:
        f["gen_beside"] = (
            f"the rest runs beside the step, mostly waiting (every thread but the step's used "
            f"{used:,.0f} µs of CPU a step)"
        )
        f["gen_fix"] = GEN_WAITS_FIX
    else:
        f["gen_beside"] = f"shares its {cores} cores and the GIL with the rest"
        f["gen_fix"] = GEN_FIX
    f["gen_step_pct"] = 100 * f["gen_us"] / f["step_us"]
    sampled = trace.phase("sampled")
    own = sampling.analyse(sampled.samples, top=0).input_functions if sampled else {}
    f["gen_python"] = ", ".join(own) if own else "a generator"
    f["gen_cores"] = cores
    f["gen_paces"] = f["gen_pct"] >= PACE_PCT and wait > 0


def describe(stages: Sequence[Mapping[str, Any]]) -> str:
    """``from_tensor_slices -> map(fn, serial, runs Python f (x.py:3)) -> batch(32)``."""
    out = []
    for s in stages:
        kind = s["kind"]
        args = []
        if kind == "map":
            args.append(_name(s.get("function", "")) or "fn")
            args.append(f"num_parallel_calls={s['parallel']}" if s.get("parallel") else "serial")
            if s.get("python"):
                args.append(f"runs Python {s['python']}")
            if s.get("random"):
                args.append("random")
        elif s.get("detail"):
            args.append(s["detail"])
        out.append(f"{kind}({', '.join(args)})" if args else kind)
    return " -> ".join(out)


def _sampled_python(parts: Mapping[str, float], trace: Any, any_wait: bool = False) -> str:
    """The script's own functions tf.data's threads were sampled in, where that Python is part
    of the input wait (``feed_fetch.input_python``) or, with ``any_wait``, the input is a
    generator's (its batches are that Python whatever part the wait was booked to: a Keras
    PyDataset's ``__getitem__``, not the adapter's ``_get_iterator`` that wraps it); "" else."""
    wait = "feed_fetch.input_python" in parts or any_wait
    rec = trace.phase("sampled") if wait else None
    if rec is None or not rec.samples:
        return ""
    return ", ".join(sampling.analyse(rec.samples, top=0).input_functions)


def _timed_in_first_epoch(trace: Any) -> bool:
    """Whether the timed window's steps all ran in a ``fit``'s first epoch (None-safe)."""
    per_epoch = ((trace.script or {}).get("fit") or {}).get("steps_per_epoch")
    timed = trace.phase("timed") if hasattr(trace, "phase") else None
    segments = timed.window.segments if timed is not None and timed.window is not None else ()
    if not per_epoch or not segments:
        return False
    return bool(segments[-1].first_step + segments[-1].n_steps <= int(per_epoch))


P = ParamSpec("P")


def _prefetch_said(
    build: Callable[Concatenate[Mapping[str, Any], P], str],
) -> Callable[Concatenate[Mapping[str, Any], P], str]:
    """``build``'s fix, and where tf.data adds a prefetch itself, that an explicit one adds
    nothing (the tf.data guide's naive loop: its fix, .prefetch(), measured 17.7 -> 17.5 ms a
    step without the profiler, and no run said why it is not advised)."""

    @functools.wraps(build)
    def said(pipe: Mapping[str, Any], *args: P.args, **kwargs: P.kwargs) -> str:
        text = build(pipe, *args, **kwargs)
        kinds = [s["kind"] for s in pipe.get("stages") or []]
        if kinds and kinds[-1] != "prefetch" and pipe.get("auto_prefetch") is True:
            text += (
                " tf.data adds a prefetch at the end of this pipeline itself (TensorFlow 2.12 "
                "and later): an explicit .prefetch() changes nothing here."
            )
        return text

    return said


@_prefetch_said
def fixes(
    pipe: Mapping[str, Any],
    input_us: float,
    rest_us: float,
    epochs: Any,
    python: str = "",
    first_epoch: bool = False,
    fit: bool = False,
    python_waits: bool = False,
) -> str:
    """The changes that apply to this pipeline, most effective first. ``python_waits``: the
    Python the pipeline runs mostly waits (its threads used little CPU): parallel calls of a
    py_function map then overlap.

    Measured on this machine (tests/realworld/tf_data_input_bound.py, 2 cores, TensorFlow
    2.21): a cache after a py_function map made epochs 2 and 3 ~5x faster; parallel calls of
    that py_function map did not help (the GIL), nor did an explicit prefetch (tf.data injects
    one). So a cache comes first, parallel calls only for maps without Python, and a prefetch
    only where tf.data does not add one itself.
    """
    stages = pipe.get("stages") or []
    if not stages:
        return (
            "Feed the steps from a tf.data pipeline that maps in parallel "
            "(num_parallel_calls=tf.data.AUTOTUNE) and ends in .prefetch(tf.data.AUTOTUNE), "
            "so the next batch is prepared while this step computes."
        )
    kinds = [s["kind"] for s in stages]
    out = []
    for i, s in enumerate(stages):
        if s["kind"] != "map":
            continue
        name = _name(s.get("function", "")) or "fn"
        if "cache" not in kinds[i + 1 :] and not s.get("random") and _int(epochs) != 1:
            same = (
                "if its result is the same every epoch"
                if s.get("python")
                else "its result is the same every epoch"
            )
            where = (
                ""
                if kinds[0] in IN_MEMORY or cache_size(s)
                else " (.cache(filename) if it does not fit)"
            )
            times = f", instead of {_int(epochs)} times" if _int(epochs) > 1 else ""
            out.append(
                f"{cache_after(s)} ({same}): it then runs on the first epoch only{times}{where}"
                f"{cache_size(s)}"
            )
        if s.get("python") and python_waits and not s.get("parallel"):
            # Python that waits (a file, a network, a sleep) releases the GIL while it waits:
            # the data performance guide's sleeping map ran 35% less a step with parallel
            # calls, without the profiler, where "holds the GIL" was the advice.
            out.append(
                f"map({name}) runs Python ({s['python']}) for every element through "
                "tf.py_function, and it mostly waits (the pipeline's threads used little CPU): "
                "waiting calls release the GIL, so several at once overlap: "
                f"map({name}, num_parallel_calls=tf.data.AUTOTUNE)"
            )
        elif s.get("python"):
            out.append(
                f"map({name}) runs Python ({s['python']}) for every element through "
                "tf.py_function, which holds the GIL (parallel calls of it barely overlap): "
                "write it in TensorFlow ops (tf.image, tf.math), which tf.data runs in parallel"
            )
        elif (
            not s.get("parallel")
            and not s.get("library")
            and not (pipe.get("auto_parallel") and not s.get("random"))
        ):
            out.append(f"map({name}, num_parallel_calls=tf.data.AUTOTUNE)")
    if kinds[-1] != "prefetch" and pipe.get("auto_prefetch") is not True:
        saving = min(input_us, rest_us)
        out.append(
            ".prefetch(tf.data.AUTOTUNE) at the end of the pipeline, so the next batch is "
            f"prepared while this step computes (up to {saving:,.0f} µs a step: the smaller of "
            f"the input wait, {input_us:,.0f} µs, and the rest of the step, {rest_us:,.0f} µs)"
        )
    if not out and kinds[0] == "from_generator":
        where = python or stages[0].get("python") or stages[0].get("function") or ""
        # A generator of single samples batched by tf.data: each sample crosses into tf.data
        # through its own Python call (a GradientTape loop's from_generator of samples ->
        # batch(32): 5.1 s an epoch, 1.3 s yielding whole batches or from arrays through
        # from_tensor_slices, 3.7 s without its per-sample numpy work; without the profiler).
        per_sample = "batch" in kinds
        what = "samples" if per_sample else "batches"
        first = (
            "Yield whole batches from the generator (a batch dimension in its output_signature, "
            "no .batch() after it), or build the samples as arrays once and use "
            "tf.data.Dataset.from_tensor_slices: each sample crosses from Python into tf.data "
            "on its own call. "
            if per_sample
            else ""
        )
        workers = (
            "let several workers build batches (a Keras PyDataset's workers=N with "
            "use_multiprocessing=True), or "
            if fit
            else ""
        )
        return (
            f"The {what} come from Python ({where or 'a generator'}), one at a time on one "
            f"thread: {input_us:,.0f} µs a step. {first}Do the per-sample work once before "
            f"training (load or decode the data into arrays), or {workers}write it as tf.data "
            "ops that run in parallel."
        )
    if not out and "map" not in kinds:
        return (
            f"The input work takes {input_us:,.0f} µs a step against {rest_us:,.0f} µs for the "
            "rest of the step, in a pipeline without a map to parallelise: read fewer, larger "
            "records, or prepare the data once before training."
        )
    cached = [
        _name(s.get("function", "")) or "fn"
        for i, s in enumerate(stages)
        if s["kind"] == "map" and "cache" in kinds[i + 1 :]
    ]
    if not out and cached and first_epoch and _int(epochs) > 1:
        # A cache after the map fills in the first epoch, where the timed steps ran: the
        # later epochs read it (a fit of 8 epochs: 18.8 ms a step in its first, 7.5 ms in
        # its last), and "cache what does not change" was said of a cached pipeline.
        return (
            f"The timed steps ran in the first of {_int(epochs)} epochs, while the .cache() "
            f"after map({cached[0]}) was filling: only that epoch runs the map ({input_us:,.0f} "
            "µs a step waiting for it), the later epochs read the cache. To shorten the first "
            "epoch, make each element cheaper or prepare the data once before training."
        )
    if not out:
        return (
            "The pipeline already maps in parallel and prefetches: the input work itself is "
            f"slower ({input_us:,.0f} µs a step) than the rest of the step ({rest_us:,.0f} µs): "
            "make each element cheaper, cache what does not change, or read fewer, larger "
            "records."
        )
    return "; ".join(out) + "."


def _name(where: str) -> str:
    return where.split(" (", 1)[0]


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def cpu_facts(f: dict[str, Any], trace: Any) -> None:
    """The timed window's core use (``profiler.analysis.threads``) where the script's own
    tf.data pipeline feeds the steps and maps without a cache after the map (a cached one does
    its work on the first epoch only): ``busy_cores``, ``cores``, ``busy_share`` (the
    process's share of its cores, or the machine's of all its cores if larger),
    ``cores_busy`` (in words), ``competing_cores`` (the cores the pipeline's threads used),
    ``competing_threads`` (which threads, in words), ``competing_cpu_us`` (their CPU per
    step), ``competing_us`` (it spread over the cores: the step's wall time it may take from
    the kernels) and ``cpu_fix``."""
    pipelines = [p for p in (trace.script or {}).get("pipelines") or [] if not keras_made(p)]
    cpu, rec = trace.data("timed"), trace.phase("timed")
    if not pipelines or cpu is None or rec is None or rec.window is None:
        return
    kinds = [s["kind"] for s in pipelines[0].get("stages") or []]
    if "map" not in kinds or "cache" in kinds[len(kinds) - kinds[::-1].index("map") :]:
        return
    use = core_use.core_use(cpu, rec.window.n_steps, f.get("compute_us"))
    if use is None:
        return
    f["cores"] = use.cores
    f["busy_cores"] = use.busy
    f["busy_share"] = use.saturated_share
    f["cores_busy"] = f"the process kept {use.busy:.1f} of {use.cores} cores busy"
    if use.machine is not None and use.saturated_share > use.busy_share:
        f["cores_busy"] += (
            f" (the machine {use.machine:.1f} of {use.machine_cores}, other processes included)"
        )
    f["competing_cores"] = use.competing
    f["competing_share"] = use.competing / use.cores
    f["competing_cpu_us"] = use.competing * use.wall_s * 1e6 / use.steps
    f["competing_us"] = min(f["competing_cpu_us"] / use.cores, f.get("step_us") or 0.0)
    f["competing_threads"] = (
        "tf.data's iterator threads (started after TensorFlow's runtime)"
        if use.late is not None
        else "threads other than the script's and beyond the kernels"
    )
    f["cpu_fix"] = _cpu_fix(pipelines[0], ((trace.script or {}).get("fit") or {}).get("epochs"))


def keras_made(pipe: Mapping[str, Any]) -> bool:
    """Whether Keras built the pipeline from what fit was given (numpy arrays, a generator, a
    PyDataset: its data adapters' ``get_tf_dataset``), not the script: a function of a stage is
    in one of Keras's ``*adapter.py`` modules (``ArrayDataAdapter.get_tf_dataset.<locals>.
    permutation (array_data_adapter.py:128)`` for fit on arrays)."""
    return any(KERAS_ADAPTER in str(s.get("function", "")) for s in pipe.get("stages") or [])


def _map_name(stage: Mapping[str, Any]) -> str:
    return _name(stage.get("function", "")) or "fn"


def _map_at(stage: Mapping[str, Any]) -> str:
    """``map(name)`` with its line where known: two maps of one helper (the data augmentation
    tutorial's prepare() maps a lambda twice) read the same by name."""
    where = str(stage.get("function", ""))
    at = where.split(" (", 1)[1].rstrip(")") if " (" in where else ""
    return f"map({_map_name(stage)})" + (f" at {at}" if at else "")


def cache_after(stage: Mapping[str, Any]) -> str:
    """Where the cache goes: right after the script's map, or, for a map a library made (the
    Keras weather example's ``timeseries_dataset_from_array``: "right after
    map(sequences_from_indices.<locals>.<lambda>)", a lambda inside Keras), on the dataset
    the library returns."""
    fn = str(stage.get("function", ""))
    if not stage.get("library"):
        return f".cache() right after map({_map_name(stage)})"
    module = fn.rsplit("(", 1)[-1].split(":", 1)[0]
    maker = tfdata.KERAS_MAKERS.get(module)
    made = (
        f"the dataset {maker} returns" if maker else f"the dataset a library built with map({fn})"
    )
    return f".cache() on {made} (the map inside it is the library's)"


def cache_size(stage: Mapping[str, Any]) -> str:
    """What the cache keeps in memory, where the map's elements and their size are known: the
    weather example's windows overlap, so the cache holds each row 120 times (188 MB for
    28,599 windows of 120 x 7 float64; ~2 GB at the example's 420,551 rows)."""
    size, count = int(stage.get("element_bytes") or 0), int(stage.get("elements") or 0)
    if not size or not count:
        return ""
    return (
        f"; it keeps {_mb(size * count)} in memory ({count:,} elements of {_mb(size)}): "
        ".cache(filename) where that does not fit"
    )


def _mb(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:,.1f} MB"
    return f"{n / 1e3:,.1f} KB" if n >= 1e3 else f"{n:,.0f} bytes"


def _cpu_fix(pipe: Mapping[str, Any], epochs: Any) -> str:
    """Prepare the input once (a cache after its last deterministic map, or arrays saved before
    training); fewer parallel calls of the maps the script made parallel, on a small machine.

    A random map (an augmentation) is never cached after: the cache would keep the first
    epoch's draws for every epoch (the tf.data guide's rotation by ``tf.py_function`` was told
    to cache after it)."""
    stages = pipe.get("stages") or []
    kinds = [s["kind"] for s in stages]
    maps = [i for i, k in enumerate(kinds) if k == "map"]
    random = [i for i in maps if stages[i].get("random")]
    # The deterministic maps before the first random one: a cache may follow them.
    before = [i for i in maps if not random or i < random[0]]
    out = []
    last = before[-1] if before else None
    cached = [i for i, k in enumerate(kinds) if k == "cache"]
    if last is not None and cached and cached[-1] < last and _int(epochs) != 1:
        # A cache already there, a map after it (TF's overfit-and-underfit tutorial: cached
        # after map(pack_row), then fit given .map(lambda x, y: ...) adding a dimension): "cache
        # right after map(<lambda>)" would cache an infinite repeat; the input in memory ran
        # no faster without the profiler.
        after = [_map_at(stages[i]) for i in before if i > cached[-1]]
        out.append(
            f"the pipeline caches already; what runs at every epoch after its cache is "
            f"{', '.join(after)} and the batching: where such a map does real work, move it "
            "before the .cache(), else the input has nothing left to prepare once"
        )
    elif last is not None and "cache" not in kinds[last + 1 :] and _int(epochs) != 1:
        times = f" instead of {_int(epochs)} times" if _int(epochs) > 1 else ""
        work = "windowing and per-element" if "window" in kinds[:last] else "per-element"
        keep = f", the random {_map_at(stages[random[0]])} after it" if random else ""
        # A shuffle before the cache would be frozen by it: every epoch the first one's order
        # (the time series tutorial's windows are shuffled, batched, then mapped).
        frozen = (
            " and a .shuffle(...) after the cache, as the one before it would repeat the first "
            "epoch's order (the batches' order, where it comes before the batch)"
            if "shuffle" in kinds[:last]
            else ""
        )
        if random:
            # The random map runs every epoch whatever is cached before it, and is often the
            # larger part (the data augmentation tutorial: its RandomFlip and RandomRotation
            # 82 ms of CPU a step, the resize it follows 9 ms, measured; "cache after the
            # resize" had led the verdict).
            out.append(
                f"make the random {_map_at(stages[random[0]])} cheaper, where it holds most of "
                "the input's work: it runs on every epoch (a cache cannot keep its draws), so "
                "only less work there (smaller inputs to it, fewer or cheaper random layers) "
                "removes it"
            )
        out.append(
            f"prepare the input once: {cache_after(stages[last])}{keep}{frozen} (its {work} "
            f"work then runs on the first epoch only{times}{cache_size(stages[last])}), or "
            "build the prepared arrays once and save them"
        )
    elif random:
        name = _map_at(stages[random[0]])
        out.append(
            f"make each element cheaper: {name} draws random numbers (an augmentation), so "
            "caching after it would repeat the first epoch's draws; write its work in "
            "TensorFlow ops, or cache the decoded inputs before it"
        )
    else:
        out.append(
            "prepare the input once before training: build the prepared arrays and save them"
        )
    if any(stages[i].get("parallel") and not stages[i].get("library") for i in maps):
        out.append(
            "on a machine this small, fewer parallel calls of its maps (num_parallel_calls=1 or 2 "
            "instead of AUTOTUNE) leave the kernels their cores"
        )
    return "; ".join(out)[0].upper() + "; ".join(out)[1:] + "."


def not_input_bound(f: Facts) -> bool:
    """Whether the step is not mostly waiting for input (overhead advice applies then)."""
    return (f.get("input_pct") or 0) < INPUT_BOUND_PCT


#: Python making the batches on tf.data's thread, on a core.
GEN_FIX = (
    "Make the batches once, before training: do the per-sample work (decoding, scaling, "
    "resizing) into arrays kept in memory so that what runs per batch only slices, and write "
    "random augmentation as TensorFlow ops (Keras preprocessing layers such as RandomFlip in the "
    "model, or tf.image in a tf.data map), which run as kernels in parallel; more Python "
    "workers only help where a core is free."
)
#: ... mostly waiting (a file, a network, a sleep): several can wait at once.
GEN_WAITS_FIX = (
    "The generator mostly waits rather than computes (reading a file or a network, a sleep): "
    "run several at once, each over a part of the data (tf.data.Dataset.range(k).interleave("
    "lambda i: tf.data.Dataset.from_generator(...), num_parallel_calls=tf.data.AUTOTUNE), as "
    "the tf.data performance guide does), or read the data once before training."
)


def python_batches(f: Mapping[str, Any]) -> bool:
    """Whether the batches are made by Python on tf.data's thread, at a cost worth a finding
    (``python_batches``)."""
    gen, wait = f.get("gen_step_pct"), f.get("input_pct")
    return gen is not None and gen >= GENERATOR_PCT and (wait or 0.0) < INPUT_BOUND_PCT


def shares_cores(f: Mapping[str, Any]) -> bool:
    """Whether the step's kernels ran beside input work that took cores from them: Python
    making the batches, or the pipeline's threads (their kernel times are slowed by it)."""
    return python_batches(f) or competes(f)


def competes(f: Mapping[str, Any]) -> bool:
    """Whether the input pipeline's threads took a part of the cores the step needed
    (``cpu_competition``)."""
    busy, competing = f.get("busy_share"), f.get("competing_share")
    return (
        busy is not None
        and competing is not None
        and busy >= BUSY_SHARE
        and competing >= COMPETING_SHARE
    )


RULES: tuple[Rule, ...] = (
    Rule(
        id="input_bound",
        subject="workload",
        needs=("label", "step_us", "input_us", "input_pct", "pipeline", "input_fix"),
        when=lambda f: f["input_pct"] >= INPUT_BOUND_PCT,
        message="{label} is input-bound: {input_pct:.0f}% of each {step_us:,.0f} µs step "
        "({input_us:,.0f} µs) waits for the next batch from tf.data. The pipeline: {pipeline}.",
        fix="{input_fix}",
        cost="input_us",
    ),
    Rule(
        id="cache_fill",
        subject="workload",
        needs=(
            "label",
            "fill_map",
            "fill_s",
            "fill_pct",
            "fill_loop_s",
            "fill_later",
            "fill_cost_us",
        ),
        when=lambda f: True,
        message="{label}'s first epoch, where the .cache() after map({fill_map}) filled, took "
        "{fill_s:,.1f} s beyond the later epochs' pace (its first step aside, which traces): "
        "{fill_pct:.0f}% of the loop's "
        "{fill_loop_s:,.1f} s. The later {fill_later} epochs' steps read the cache, and the "
        "split above describes them.",
        fix="Make map({fill_map}) cheaper (TensorFlow ops rather than Python, "
        "num_parallel_calls=tf.data.AUTOTUNE where it runs serially), or run it once for every "
        "run of the script: .cache(filename) keeps the mapped data on disk, or dataset.save() "
        "once and tf.data.Dataset.load() in the training script.",
        cost="fill_cost_us",
    ),
    Rule(
        id="python_batches",
        subject="workload",
        needs=(
            "label",
            "step_us",
            "input_us",
            "gen_python",
            "gen_cpu_us",
            "gen_pct",
            "gen_us",
            "gen_step_pct",
            "gen_beside",
            "gen_fix",
        ),
        when=python_batches,
        message="{label}'s batches are made by Python on tf.data's thread, one at a time: "
        "{gen_python} ran {gen_cpu_us:,.0f} µs a step there ({gen_pct:.0f}% of the framework "
        "window's step, as a PyFunc). The step waits {input_us:,.0f} µs for it and "
        "{gen_beside}: about {gen_us:,.0f} µs of each {step_us:,.0f} µs step "
        "({gen_step_pct:.0f}%).",
        fix="{gen_fix}",
        cost="gen_us",
    ),
    Rule(
        id="cpu_competition",
        subject="workload",
        needs=(
            "label",
            "cores_busy",
            "busy_share",
            "competing_threads",
            "competing_cores",
            "competing_share",
            "competing_cpu_us",
            "competing_us",
            "cpu_fix",
        ),
        when=lambda f: competes(f),
        message="{label} shares the cores with its input pipeline: during the timed steps "
        "{cores_busy}; {competing_threads} used {competing_cores:.1f} core-seconds per second "
        "({competing_cpu_us:,.0f} µs of CPU a step): tf.data's input pipeline shares the cores "
        "with the model's kernels.",
        fix="{cpu_fix}",
        cost="competing_us",
    ),
)
