"""What each phase records besides its window: typed, frozen records, one class per phase.

Place in the pipeline: the collectors build these inside the measured process
(``profiler.capture.collectors``); they travel in ``PhaseRecord.data`` of the trace
(``profiler.model.trace``); attribution, diagnoses and the renderers read their fields by name.
``PHASE_DATA`` says which class a phase's record holds, so a saved trace is read back into the
same types. Every time is integer nanoseconds with the unit in the name, as in the rest of the
model; the summary (``profiler.reports.summary``) is the one place that converts them.

The hooks phase's parts of a step (``HookParts``) are named here, once: the phase's targets
declare them and attribution reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class HookParts:
    """The names of the parts of a step the hooks phase measures or derives.

    TF1 ``session.run``: ``outside_run`` (the user's loop around the call), ``session_run``,
    ``feed_convert``, ``feed_other``, ``fetch_setup``, ``do_run``, ``native``,
    ``build_results``, ``run_rest``. TF2 ``tf.function``: ``outside_call``, ``function_call``,
    ``bind_args``, ``lookup``, ``tracing``, ``instantiate`` (in a step that traced, the native
    call's time beyond a step that did not: the new concrete function's instantiation),
    ``call_flat``, ``native``, ``iterator_next`` (a tf.data iterator's ``next`` between calls:
    the loop waiting for its input).
    """

    NATIVE = "native"
    OUTSIDE_RUN = "outside_run"
    SESSION_RUN = "session_run"
    RUN_INNER = "run_inner"
    FEED = "feed"
    FEED_CONVERT = "feed_convert"
    FEED_OTHER = "feed_other"
    FETCH_SETUP = "fetch_setup"
    DO_RUN = "do_run"
    BUILD_RESULTS = "build_results"
    RUN_REST = "run_rest"
    OUTSIDE_CALL = "outside_call"
    FUNCTION_CALL = "function_call"
    BIND_ARGS = "bind_args"
    LOOKUP = "lookup"
    TRACING = "tracing"
    INSTANTIATE = "instantiate"
    CALL_FLAT = "call_flat"
    ITERATOR_NEXT = "iterator_next"


#: Named parts of categories the attribution reports (``feed_fetch.feed`` ...), by hooks part.
ATTRIBUTION_PARTS: dict[str, str] = {
    HookParts.FEED_CONVERT: "feed",
    HookParts.FEED_OTHER: "feed",
    HookParts.FETCH_SETUP: "fetch",
    HookParts.BUILD_RESULTS: "fetch",
    HookParts.TRACING: "retrace",
    HookParts.INSTANTIATE: "retrace",
    HookParts.ITERATOR_NEXT: "input",
    # session.run's own Python (not the loop around it): what a native callable removes.
    HookParts.SESSION_RUN: "run",
    HookParts.DO_RUN: "run",
    HookParts.RUN_REST: "run",
}


# --- per-op tables (framework phase) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpRow:
    """One op's kernel executions in a capture.

    ``input_thread``: the executions ran on the input pipeline's own threads (tf.data's), beside
    the steps rather than in them: a PyDataset's ``__getitem__`` as a ``PyFunc``, a map's ops.
    The step feels them as its wait for the next batch, not as its kernels.
    """

    op: str
    kernel: str
    count: int
    mean_ns: int
    total_ns: int
    share: float
    input_thread: bool = False


@dataclass(frozen=True, slots=True)
class OpTable:
    """Kernel executions grouped by op (``profiler.capture.collectors.op_table``).

    Attributes:
        source: ``step_stats`` (TF1 FULL_TRACE steps) or ``xplane`` (a profiler capture).
        steps: steps the executions came from.
        kernel_ns: every kernel's time, summed (parallel kernels in full).
        kernel_ns_per_step: ``kernel_ns`` over ``steps``.
        top_op, top_kernel, top_share: the op with the most time, and its share.
        rows: the ops by total time (at most ``op_table.MAX_ROWS``).
        rows_omitted: ops left out of ``rows``.
        kernel_union_ns_per_step: (``step_stats``) the median per step of the time at least one
            kernel ran.
    """

    source: str
    steps: int
    kernel_ns: int
    kernel_ns_per_step: int
    top_op: str | None
    top_kernel: str | None
    top_share: float | None
    rows: tuple[OpRow, ...]
    rows_omitted: int
    kernel_union_ns_per_step: int | None = None

    def total_ns(self, ops: set[str] | None = None, exclude: set[str] = frozenset()) -> int:  # type: ignore[assignment]
        """Kernel ns of the rows whose op or kernel is in ``ops`` (all if None), less
        ``exclude``."""
        return sum(
            r.total_ns
            for r in self.rows
            if (ops is None or r.op in ops or r.kernel in ops)
            and r.op not in exclude
            and r.kernel not in exclude
        )

    def names(self) -> set[str]:
        """Every op and kernel name of the rows."""
        return {r.op for r in self.rows} | {r.kernel for r in self.rows}


# --- sampled ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PySpyReport:
    """What py-spy said when it stopped."""

    returncode: int | None = None
    samples: int | None = None
    errors: int | None = None


@dataclass(frozen=True, slots=True)
class SampledData:
    """The sampled phase's settings and what py-spy reported.

    Attributes:
        rate_hz: samples per second asked for.
        native: ``--native`` (native frames; never with TensorFlow loaded).
        native_note: why native was or was not used.
        idle: ``--idle`` (threads waiting in native calls are sampled too).
        nonblocking: ``--nonblocking``.
        pid: the sampled process.
        capture_s: attach to stop, seconds.
        samples: stack samples parsed, every thread.
        pyspy: what py-spy reported.
        command: the command line.
    """

    rate_hz: int
    native: bool
    native_note: str
    idle: bool
    nonblocking: bool
    pid: int = 0
    capture_s: float = 0.0
    samples: int = 0
    pyspy: PySpyReport = field(default_factory=PySpyReport)
    command: str = ""


# --- lines --------------------------------------------------------------------------------------


#: How to read the lines phase's figures (``LinesData.note``), shown with every table.
INFLATION_NOTE = (
    "line_profiler slows the Python lines it traces (~1.6x measured on BaseSession._run) but "
    "not the native calls they make: shares of Python lines are overstated. Hits count line "
    "events: a statement spanning several lines can count more than once per execution."
)


@dataclass(frozen=True, slots=True)
class LinesData:
    """The lines phase's set-up (its rows are the record's ``lines``).

    Attributes:
        steps_profiled: training steps line_profiler was on for (re-warm and window).
        targets: the functions registered, by qualified name.
        note: how to read the figures (line_profiler inflates Python lines).
    """

    steps_profiled: int
    targets: tuple[str, ...]
    note: str = ""


# --- framework ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProfilerSession:
    """The TF profiler session: options, what starting and stopping it cost, what it wrote."""

    options: dict[str, int]
    start_ns: int
    stop_ns: int
    xplane: str | None
    xplane_bytes: int


@dataclass(frozen=True, slots=True)
class StepColumns:
    """Per-step figures of a capture, as columns (one entry per marked step, in order)."""

    step: tuple[int, ...] = ()
    wall_ns: tuple[int, ...] = ()
    function_call_ns: tuple[int, ...] = ()
    run_call_ns: tuple[int, ...] = ()
    executor_ns: tuple[int, ...] = ()
    kernel_union_ns: tuple[int, ...] = ()
    kernel_sum_ns: tuple[int, ...] = ()
    kernels: tuple[int, ...] = ()
    eager_ops: tuple[int, ...] = ()
    eager_op_ns: tuple[int, ...] = ()
    data_op_ns: tuple[int, ...] = ()
    compute_union_ns: tuple[int, ...] = ()
    collective_ns: tuple[int, ...] = ()
    collective_overlap_ns: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class StepMedians:
    """The median of each ``StepColumns`` column (0 for a column without values)."""

    wall_ns: int = 0
    function_call_ns: int = 0
    run_call_ns: int = 0
    executor_ns: int = 0
    kernel_union_ns: int = 0
    kernel_sum_ns: int = 0
    kernels: int = 0
    eager_ops: int = 0
    eager_op_ns: int = 0
    data_op_ns: int = 0
    compute_union_ns: int = 0
    collective_ns: int = 0
    collective_overlap_ns: int = 0


@dataclass(frozen=True, slots=True)
class ClockAlignment:
    """Offset from the capture's clock to ours and the bound on its error."""

    offset_ns: int
    uncertainty_ns: int


@dataclass(frozen=True, slots=True)
class KernelCoverage:
    """How many ops each TF1 source saw (the capture traces only "expensive" kernels)."""

    xplane_ops: int
    step_stats_ops: int


@dataclass(frozen=True, slots=True)
class BesideFetch:
    """A value the step's ``session.run`` fetches beside its training ops, and the graph's ops
    only it needs (``ops``: their names, the training ops' inputs left out)."""

    fetch: str
    ops: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FullTrace:
    """TF1 steps run with ``RunOptions(FULL_TRACE)`` after the window; ``beside``: the values
    the first of them fetched that the training ops do not need (``profiler.capture.collectors
    .fetches``), empty where it fetched no training op or nothing else."""

    steps: int
    first_step: int | None = None
    step_median_ns: int | None = None
    run_metadata: tuple[str, ...] = ()
    note: str = ""
    beside: tuple[BesideFetch, ...] = ()


@dataclass(frozen=True, slots=True)
class SpanCount:
    """How many spans of the capture were kept, for how many steps."""

    count: int
    steps: int
    max_spans: int


@dataclass(frozen=True, slots=True)
class FrameworkData:
    """The framework phase's capture, parsed (``profiler.capture.phases.framework``).

    ``op_table`` is step_stats' table for TF1 (``xplane_op_table`` is then the capture's own),
    the capture's otherwise. Fields after ``profiler`` are None when the capture could not be
    read. ``peak_gflops`` is this machine's float32 matmul rate, measured after the capture;
    ``flops_per_step`` TensorFlow's own count of a step's float ops (per timed unit), where it
    could count them (``flops_source`` says how).
    """

    profiler: ProfilerSession
    steps: StepColumns | None = None
    median_ns: StepMedians | None = None
    missing_steps: tuple[int, ...] = ()
    clock: ClockAlignment | None = None
    op_table: OpTable | None = None
    xplane_op_table: OpTable | None = None
    kernel_coverage: KernelCoverage | None = None
    full_trace: FullTrace | None = None
    notes: tuple[str, ...] = ()
    spans: SpanCount | None = None
    peak_gflops: float | None = None
    flops_per_step: int | None = None
    flops_source: str = ""


# --- hooks --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HookDoc:
    """What a measured part times: the hooked function (or ``interval``), in words."""

    target: str
    what: str


@dataclass(frozen=True, slots=True)
class HooksCost:
    """The hooks' own cost.

    Attributes:
        per_call_ns: a no-op called through the hook, less bare (micro-benchmark).
        step_wrapper_ns: the step wrapper's enter and exit.
        method: how those two were measured.
        on_off_ns: the step-time difference of alternating blocks with the hooks on and off
            (None when not measured).
        on_off_pairs: each pair's difference.
        on_off_block_steps: steps per block.
        on_off_note: why the on/off blocks did not run, if they did not.
        calls_per_step: hooked calls per step.
        per_step_ns_microbench: the micro-benchmark's cost per step.
        per_step_ns: the cost taken off the Python side: the larger of the two.
        share_of_step: ``per_step_ns`` over the median step.
    """

    per_call_ns: int = 0
    step_wrapper_ns: int = 0
    method: str = ""
    on_off_ns: int | None = None
    on_off_pairs: tuple[int, ...] = ()
    on_off_block_steps: int | None = None
    on_off_note: str = ""
    calls_per_step: float = 0.0
    per_step_ns_microbench: int = 0
    per_step_ns: int = 0
    share_of_step: float | None = None


@dataclass(frozen=True, slots=True)
class FeedCast:
    """What converting the fed arrays to the placeholders' dtype costs per step."""

    cast_ns: int
    dtypes: tuple[str, ...]
    to: str
    method: str


@dataclass(frozen=True, slots=True)
class LoopFacts:
    """What the step feeds and fetches (attribution splits fetch costs per fetched value), and
    whether it feeds the very same arrays every step (``same_feeds``; None: not known)."""

    fetches: int | None = None
    feeds: int | None = None
    k: int | None = None
    mode: str = ""
    same_feeds: bool | None = None


@dataclass(frozen=True, slots=True)
class HooksData:
    """The hooks phase's split of its steps (``profiler.capture.collectors.hooks.split``).

    Attributes:
        target: ``tf1_session`` or ``tf_function``.
        hooks: per measured part, what it times.
        steps: steps split.
        partition: parts that add up to a step's wall time exactly (``HookParts``).
        categories: part -> category (``native``: the native call, split by kernel time).
        outside: the part that is the user's loop outside the framework call.
        median_ns, mean_ns: per part (and ``wall``), over the steps.
        central_mean_ns: per part, the mean over the steps whose wall lies between the 10th
            and 90th percentiles (a typical step's composition; attribution reads it).
        inclusive_median_ns: per hooked function, its inclusive time.
        calls_per_step: per hooked function.
        per_step: columns ``step``, ``wall_ns`` and each part, the first ``per_step_steps``.
        self_cost: the hooks' own cost.
        feed_cast: (TF1 feeds) the dtype cast of the fed arrays.
        loop_info: what the step feeds and fetches.
        note: anything a reader must know.
    """

    target: str
    hooks: dict[str, HookDoc]
    steps: int
    partition: tuple[str, ...]
    categories: dict[str, str]
    outside: str
    median_ns: dict[str, int]
    mean_ns: dict[str, int]
    central_mean_ns: dict[str, int]
    inclusive_median_ns: dict[str, int]
    calls_per_step: dict[str, float]
    per_step: dict[str, tuple[int, ...]]
    per_step_steps: int
    self_cost: HooksCost
    feed_cast: FeedCast | None = None
    loop_info: LoopFacts = field(default_factory=LoopFacts)
    note: str = ""


@dataclass(frozen=True, slots=True)
class WhatIfResult:
    """One what-if: a fix applied by the toolkit at run time, measured in alternating blocks of
    baseline and variant steps (``profiler.capture.phases.whatif``).

    Attributes:
        id: ``tf1_callable``, ``tf1_feeds_once``, ``tensor_args``, ``function_jit``, ``keras_jit``,
            ``eager_function`` ...
        title: what it changes, in words (naming the script's own objects).
        removes: the attribution's categories or parts it removes: its predicted saving.
        keeps_results: whether the training's results stay the same (else it runs only with
            ``--whatif all``).
        results_note: how the results are kept, or how they may change.
        status: ``ok``, ``failed`` (the variant raised: ``error``) or ``partial`` (the script
            ended during its blocks).
        block_steps: steps per block.
        baseline_ns, variant_ns: the median step of each block, in the order run (pairs
            alternate which goes first, so drift cancels).
        error: the variant's exception, if it raised.
        results_check: how the results were checked to stay the same, with its figures
            ("" if not checked).
        removes_share: the share of ``removes`` it removes (1: all of it; ``keras_steps_k``:
            1 - 1/k, one call in k left).
        group: steps the variant runs as one (``keras_steps_k``: k batches per call); each
            block is whole groups and its figure the median of the groups' mean step.
        block_mean: each block's figure is its mean step (its slow steps in it), not its median.
        baseline_grew, variant_grew: the process's resident bytes gained over each block
            (negative when it gave memory back), in the order run; empty where resident
            memory cannot be read. A fix for a growing loop shows its growth stop here.
    """

    id: str
    title: str
    removes: tuple[str, ...]
    keeps_results: bool
    results_note: str
    status: str
    block_steps: int
    baseline_ns: tuple[int, ...] = ()
    variant_ns: tuple[int, ...] = ()
    error: str = ""
    results_check: str = ""
    removes_share: float = 1.0
    group: int = 1
    baseline_grew: tuple[int, ...] = ()
    variant_grew: tuple[int, ...] = ()
    block_mean: bool = False


@dataclass(frozen=True, slots=True)
class WhatIfData:
    """The what-if phase's record: each what-if run, and the ones that did not run and why."""

    results: tuple[WhatIfResult, ...] = ()
    not_run: tuple[tuple[str, str], ...] = ()


#: The record class each phase's ``PhaseRecord.data`` holds (the timed phase's, ``ThreadCpu``, is
#: added below its class).
PHASE_DATA: dict[str, type] = {
    "sampled": SampledData,
    "lines": LinesData,
    "framework": FrameworkData,
    "hooks": HooksData,
    "whatif": WhatIfData,
}


# --- timed: CPU time of the process's threads ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class ThreadCpu:
    """The CPU time the process's threads used during the timed window
    (``profiler.capture.threads``): two reads, at the window's first and last boundary.

    Attributes:
        wall_ns: the window's wall time between the two reads.
        process_cpu_ns: the whole process's CPU time (user + system), every thread, those that
            ended during the window included.
        main_cpu_ns: the script's thread's (the main thread, which runs the steps).
        other_cpu_ns: every other thread's: ``process_cpu_ns - main_cpu_ns``.
        by_name: the other threads' CPU by thread name (``/proc/self/task/*/comm``, at clock-tick
            resolution): TensorFlow's intra-op pool is ``tf_Compute``; tf.data's and most of
            TensorFlow's other threads keep the name they inherit (``python``).
        threads: threads alive at the end of the window.
        cpu_count: ``os.cpu_count()``.
        usable_cpus: the cores the process may run on (``len(os.sched_getaffinity(0))``).
        python_threads_cpu_ns: the other threads Python's ``threading`` started (the
            profiler's own, the script's), at clock-tick resolution: not TensorFlow's.
        late_cpu_ns: the other threads started after TensorFlow's runtime started its pools
            (``profiler.capture.threads.RUNTIME_TICKS``), or ended during the window, Python's
            aside: tf.data's iterator threads (an iterator starts its own, each epoch of
            ``fit`` a new one; they end with it), where the runtime's pools run the kernels.
            None: no TensorFlow runtime thread was found.
        machine_busy_ns: every core's time not idle (``/proc/stat``: this process and every
            other), summed over the cores; None where not read.
        children_cpu_ns: the process's child processes' CPU time (a multiprocessing Pool's
            workers): the script's own work, not another process's load.
        main_wait_ns: the main thread's time runnable but waiting for a core (the scheduler's
            run-queue wait, ``/proc/<pid>/task/<tid>/schedstat``); None where not read.
    """

    wall_ns: int
    process_cpu_ns: int
    main_cpu_ns: int
    other_cpu_ns: int
    by_name: dict[str, int]
    threads: int
    cpu_count: int
    usable_cpus: int
    machine_busy_ns: int | None = None
    python_threads_cpu_ns: int = 0
    late_cpu_ns: int | None = None
    children_cpu_ns: int = 0
    main_wait_ns: int | None = None


PHASE_DATA["timed"] = ThreadCpu
#: The timed phase's record: its threads' CPU time (a script's timed window; none elsewhere).
PhaseData = SampledData | LinesData | FrameworkData | HooksData | WhatIfData | ThreadCpu
