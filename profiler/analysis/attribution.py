"""Attribution: every nanosecond of every timed step gets a named cause.

Place in the pipeline: pure analysis of one ``WorkloadTrace`` (no I/O, no printing). The timed
window (markers only) is the truth for wall time; the instrumented phases tell what a step is
made of. This module combines them into the composition of a *typical step* and applies it to
every timed step, in integer nanoseconds, so each step's categories sum to its wall time exactly.

Sources, best first, per part of a step:

* **hooks** (TF1 ``session.run``, TF2 ``tf.function`` call path): a partition of the hooks phase's
  steps into timed parts (feed conversion, fetch set-up, the native call, ...). The native call
  enters as an absolute time (the hooks do not slow native code); the Python-side parts, which
  the hooks do slow, enter as shares: less the hooks' own measured cost, each part's share of
  the Python side is applied to the timed step less the native call.
* **kernels** (framework phase): the union of kernel intervals per step splits a native call
  into ``compute`` and ``dispatch``. TensorFlow's steady-state capture records only the kernels
  it deems expensive, so for TF1 the ops that only ``step_stats`` (FULL_TRACE) saw are added at
  their ``step_stats`` time; data-pipeline ops (tf.data iterator kernels) count as ``feed_fetch``.
* **samples** (sampled phase): the shares of main-thread samples per category (rules in
  ``profiler.analysis.stacks``) applied to the timed step; temporary native labels are resolved into
  ``compute`` (kernel time) and ``dispatch`` (the rest). Samples in the toolkit's own code are
  left out (their cost is measured separately as the marker cost).

The typical step is the mean of the timed steps between the window's 10th and 90th percentiles
(the *reference*). If the sources explain less than the reference, the rest is ``other``; if they
explain more (they were measured in other windows of a noisy machine), they are scaled down to
it and a note says by how much. Each timed step then gets the composition: a step at least as
long as the explained total keeps every explained part and puts its excess in ``other`` (a GC
pause, a slow step: what no source explains); a shorter one gets the parts scaled to it.

Named parts of categories (used by the experiments' predictions): ``feed_fetch.feed`` (feed
conversion and handling), ``feed_fetch.cast`` (the dtype cast inside it), ``feed_fetch.fetch``
(fetch-handler set-up and result building), ``feed_fetch.fetch_value`` (one fetched value's
share of that), ``dispatch.per_call`` (the session/function call machinery outside the executor)
and ``dispatch.per_op`` (the executor's or eager runtime's per-op work between kernels).
``python.gc`` is the cyclic garbage collector's pauses inside the steps (``profiler.analysis.gc``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from profiler.analysis import gc, sampling, stacks, stats
from profiler.analysis.stacks import TEMPORARY_LABELS
from profiler.capture.collectors.xplane import DATA_OPS
from profiler.model import CATEGORIES, OK, WorkloadTrace, central_bounds, median_ns
from profiler.model.records import (
    ATTRIBUTION_PARTS,
    FrameworkData,
    HookParts,
    HooksData,
    OpTable,
    SampledData,
)

COMPUTE, DISPATCH, FEED_FETCH, PYTHON, TRACING, COMMUNICATION, OTHER = CATEGORIES
EXPLAINED = (COMPUTE, DISPATCH, FEED_FETCH, PYTHON, TRACING, COMMUNICATION)

#: What measures each category when it is missing (``Attribution.not_measured``).
FRAMEWORK_PHASE = "the framework phase (kernel time)"
SAMPLED_NATIVE = "the sampled phase with --native (numpy's kernels)"
PYTHON_SIDE = "the sampled or hooks phase (the Python side of a step)"


class ConservationError(ArithmeticError):
    """A step's categories do not sum to its wall time (a bug, never a rounding matter)."""


@dataclass(frozen=True)
class Attribution:
    """The attribution of one workload's timed steps.

    Attributes:
        workload: the workload's name.
        method: the sources combined (``hooks+kernels+samples``, ``samples+kernels``, ...).
        reference_ns: the typical step's wall time (per training step).
        typical: ns per category of the typical step; sums to ``reference_ns`` exactly.
        parts: ns of named parts (``feed_fetch.feed``) of the typical step.
        sources: per category, the sources it came from and how inflation was corrected.
        steps: per timed unit, ns per category in ``CATEGORIES`` order (per *unit*: a unit of
            k training steps is split as a whole); each row sums to that unit's wall time.
        units_per_step: training steps per unit (divide a row by it for per-step figures).
        notes: anything a reader must know (scaling, bounds, what could not be resolved).
        not_measured: categories no source measured in this run, each with the phase that
            would measure it; their time is in ``other``, never counted as zero.
        share_interval: per measured category, its share's 95% interval (``INTERVAL_METHOD``).
        drift_pts: per measured category, how much of that interval's half-width is the
            machine's drift between the windows its figure came from (share points).
        reference_interval_ns: the typical step's 95% interval (batch means), or None.
    """

    workload: str
    method: str
    reference_ns: int
    typical: dict[str, int]
    parts: dict[str, int]
    sources: dict[str, list[str]]
    steps: tuple[tuple[int, ...], ...]
    units_per_step: int = 1
    notes: list[str] = field(default_factory=list)
    not_measured: dict[str, str] = field(default_factory=dict)
    share_interval: dict[str, tuple[float, float]] = field(default_factory=dict)
    drift_pts: dict[str, float] = field(default_factory=dict)
    reference_interval_ns: tuple[int, int] | None = None

    def share(self, category: str) -> float:
        return self.typical[category] / self.reference_ns if self.reference_ns else 0.0

    def measured(self, category: str) -> bool:
        return category not in self.not_measured

    @property
    def overhead_share(self) -> float | None:
        """Everything but ``compute`` and ``communication`` (a job's collectives: waiting or
        transferring, not per-call work), as a share of the typical step (None when the
        kernels were not measured: unknown is not zero)."""
        if not self.measured(COMPUTE):
            return None
        return 1.0 - self.share(COMPUTE) - self.share(COMMUNICATION)


# --- helpers ---------------------------------------------------------------------------------


def central_mean(values: list[int] | tuple[int, ...]) -> int:
    """Mean of the values in the typical range (``central_bounds``: the 10th to 90th
    percentiles, outliers left out where they are more than a tenth), as an integer."""
    lo, hi = central_bounds(values)
    middle = [v for v in values if lo <= v <= hi] or list(values)
    return sum(middle) // len(middle)


@dataclass
class _Builder:
    """Accumulates ns per category and per part, with the sources of each."""

    ns: dict[str, float] = field(default_factory=lambda: dict.fromkeys(EXPLAINED, 0.0))
    parts: dict[str, float] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unresolved: float = 0.0
    not_measured: dict[str, str] = field(default_factory=dict)
    #: Per category, the standard deviation of its ns from counting samples (added in
    #: quadrature), and the phases' windows its figure came from.
    sd: dict[str, float] = field(default_factory=dict)
    windows: dict[str, set[str]] = field(default_factory=dict)

    def add(
        self,
        category: str,
        ns: float,
        source: str,
        part: str = "",
        *,
        sd: float = 0.0,
        windows: tuple[str, ...] = (),
    ) -> None:
        if ns <= 0:
            return
        self.sd[category] = (self.sd.get(category, 0.0) ** 2 + sd**2) ** 0.5
        self.windows.setdefault(category, set()).update(windows)
        self.ns[category] += ns
        if part:
            key = f"{category}.{part}"
            self.parts[key] = self.parts.get(key, 0.0) + ns
        srcs = self.sources.setdefault(category, [])
        if source not in srcs:
            srcs.append(source)


# --- kernel time -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Kernels:
    """Kernel and executor time per training step from the framework phase."""

    compute_ns: float
    data_ns: float
    executor_ns: float
    source: str
    run_call_ns: float = 0.0
    #: Collective ops' time outside compute kernels (all-reduce and the wait in it).
    communication_ns: float = 0.0
    #: The capture window's own median step (0: unknown): the native call's share of it.
    window_step_ns: float = 0.0


def kernels(trace: WorkloadTrace) -> Kernels | None:
    """Per-step kernel time from the framework capture, completed by step_stats for TF1."""
    fw: FrameworkData | None = trace.data("framework")
    if fw is None or fw.median_ns is None:
        return None
    k = trace.work.units_per_step
    union = float(fw.median_ns.kernel_union_ns) / k
    executor = float(fw.median_ns.executor_ns) / k
    source = "kernels: union of kernel events per step in the framework capture"
    xtable = fw.xplane_op_table or fw.op_table
    data_ns = 0.0
    if fw.steps is not None and fw.steps.data_op_ns and fw.median_ns is not None:
        # The typical step's input-pipeline kernels (a median, like the kernel union).
        data_ns = float(fw.median_ns.data_op_ns) / k
    elif xtable is not None and xtable.source == "xplane" and xtable.steps:
        data_ns = sum(r.total_ns for r in xtable.rows if DATA_OPS.search(r.kernel)) / (
            xtable.steps * k
        )
    extra = 0.0
    stats_table = fw.op_table
    if stats_table is not None and stats_table.source == "step_stats" and fw.xplane_op_table:
        seen = fw.xplane_op_table.names()
        steps = max(stats_table.steps * k, 1)
        extra = (
            sum(r.total_ns for r in stats_table.rows if r.op not in seen and r.kernel not in seen)
            / steps
        )
        if extra:
            source += (
                f"; + {extra / 1e3:.1f} µs of ops the capture does not trace, at their "
                "step_stats (FULL_TRACE) time"
            )
    if fw.steps is not None and fw.steps.compute_union_ns:
        # Kernels outside the input pipeline, their own union (the pipeline's threads overlap).
        compute = float(fw.median_ns.compute_union_ns) / k + extra
    else:
        compute = max(union + extra - data_ns, 0.0)
    m = fw.median_ns
    communication = float(max(m.collective_ns - m.collective_overlap_ns, 0)) / k
    rec = trace.phase("framework")
    window = rec.window.durations_ns() if rec is not None and rec.window is not None else ()
    step = float(median_ns(list(window))) / k if window else 0.0
    run_call = float(m.run_call_ns) / k
    xla = xla_compiled(trace)
    if xla and run_call > 0 and compute < XLA_UNSEEN * run_call:
        # XLA's compiled code runs as one launch whose kernels the tracer does not see on a
        # CPU: the call less its input-pipeline and collective time is that code's (the image
        # classification example's jit_compile=True read "0 µs of kernels, dispatch 82%: the
        # graph executor's cost per op", and its fix was the XLA it had on).
        # The input pipeline's kernels on tf.data's threads run beside that code (the
        # example's 179 ms a step of DecodeImage there read "feed/fetch 15%", where in-memory
        # tensors made its step no faster, without the profiler): only those on the step's own
        # threads are its (an epoch's MakeIterator). A step that waits for a slow pipeline
        # reads that wait as XLA's too.
        data_ns = _own_data_ns(xtable, k)
        compute = max(run_call - data_ns - communication, compute)
        executor = max(executor, compute)
        source = (
            f"XLA-compiled ({xla}): the native call's time in the framework capture (XLA's own "
            "kernels are not traced on a CPU; the input pipeline's run beside it on tf.data's "
            "threads)"
        )
    return Kernels(compute, data_ns, executor, source, run_call, communication, step)


def _own_data_ns(table: OpTable | None, k: int) -> float:
    """The input-pipeline kernels on the step's own threads a step (an epoch's
    ``MakeIterator``, the iterator's reads), the mean over the capture's steps: not those on
    tf.data's threads, which run beside the step."""
    if table is None or not table.steps:
        return 0.0
    own = sum(r.total_ns for r in table.rows if is_data_kernel(r.kernel) and not r.input_thread)
    return float(own) / (table.steps * k)


def is_data_kernel(kernel: str) -> bool:
    """Whether a kernel is the input pipeline's (a tf.data iterator's op)."""
    return bool(DATA_OPS.search(kernel))


#: Kernels under this share of the native call, in a step XLA compiles: its kernels unseen.
XLA_UNSEEN = 0.1


def xla_compiled(trace: WorkloadTrace) -> str:
    """How the script's step is compiled with XLA (``compile(jit_compile=True)``, or its
    step's ``tf.function(jit_compile=True)``), or '' where it is not (or not recorded)."""
    script = trace.script or {}
    if (script.get("fit") or {}).get("jit_compile"):
        return "compile(jit_compile=True)"
    own = [fn for fn in script.get("functions") or () if fn.get("own") and fn.get("calls")]
    if own:
        step = max(own, key=lambda fn: int(fn.get("calls") or 0))
        if step.get("jit_compile"):
            return f"{step.get('name', 'the step')}: tf.function(jit_compile=True)"
    return ""


# --- the sources -----------------------------------------------------------------------------


def _hooks_composition(
    trace: WorkloadTrace,
    b: _Builder,
    kern: Kernels | None,
    reference: int,
    near: stats.Neighbours | None = None,
) -> float | None:
    """Add the hooks phase's partition to ``b``; returns the native call's ns, or None.

    The native call enters as an absolute time (the hooks do not slow native code). The
    Python-side parts, which the hooks do slow, enter as shares: less the hooks' measured cost,
    each part's share of the Python side is applied to the timed step less the native call.
    Drift between the hooks window and the timed window so lands in proportion, and a note
    says how large it was. Where the window has uninstrumented neighbours (a script's reference
    blocks, ``near``), the native call enters as its share of their step instead, applied to
    the timed step: they ran at nearly the same moment as the hooks window. Neighbours slower
    than the window itself, or faster than its native call alone, met another load than the
    window did and are not used.
    """
    data: HooksData | None = trace.data("hooks")
    if data is None or not data.partition or not data.central_mean_ns:
        return None
    cats = data.categories
    k = trace.work.units_per_step
    mean = {p: data.central_mean_ns.get(p, 0) / k for p in data.partition}
    native = mean.get(HookParts.NATIVE, 0.0)
    python_side = {p: v for p, v in mean.items() if p != HookParts.NATIVE}
    side_total = sum(python_side.values())
    cost = data.self_cost.per_step_ns / k
    corrected = max(side_total - cost, 0.0)
    window = native + corrected
    drift = window / reference - 1 if reference else 0.0
    # The time the Python side would absorb beyond what it measured, were the native call
    # taken absolute in a faster window.
    absorbed = reference - native - corrected
    scaled = bool(window) and (
        drift < -DRIFT_FASTER
        or (native > NATIVE_MOST * reference and drift > 0)
        or (drift < -DRIFT_NOTED and absorbed > ABSORB_MOST * corrected)
    )
    # The hooks only add time to the window: at the window's speed its neighbours ran no slower
    # than the window (less the hooks' measured cost) and no faster than its native call alone.
    # Neighbours outside that met another load than the window did (TensorBoard's guide: blocks
    # of 13.5 ms around a 7.5 ms window read the native call as 42% of the step, and 91% in a
    # run beside a busy process; the window's own ratio was 75% and 68%): the window's own step
    # is then the one its native call is measured against.
    if (
        near is not None
        and near.step_ns > 0
        and native > 0
        and window > 0
        and not native <= near.step_ns <= window * (1 + NEAR_SLACK)
    ):
        than = (
            "slower than the window itself"
            if near.step_ns > window
            else "faster than its native call alone"
        )
        b.notes.append(
            f"the uninstrumented reference blocks beside the hooks window ran "
            f"{near.step_ns / 1e3:.1f} µs a step, {than} ({window / 1e3:.1f} µs, its native "
            f"call {native / 1e3:.1f} µs): they met another load than the window did, and the "
            "native call is measured against the window's own step"
        )
        near = None
    if near is not None and near.step_ns > 0 and native > 0:
        at = native / near.step_ns
        if abs(near.step_ns / reference - 1) > 0.05:
            b.notes.append(
                f"the native call ({native / 1e3:.1f} µs in the hooks window) is taken as its "
                f"share ({at:.0%}) of the uninstrumented reference blocks beside that window "
                f"({near.step_ns / 1e3:.1f} µs a step, the timed window's "
                f"{reference / 1e3:.1f} µs): the machine's speed differed between the windows"
            )
        native = reference * min(at, 1.0)
        scaled = False
        drift = 0.0
    if scaled:
        # The hooks window ran much faster than the timed one (hooks never speed a step up: the
        # timed window met a loaded machine), or slower with a native call that alone nearly
        # fills the timed step. Taken absolute, the native call would carry that drift and the
        # Python side absorb it all, so the whole window is scaled to the timed step.
        b.notes.append(
            f"the hooks window's steps, less the hooks' cost, ran {window / reference:.2f}x the "
            f"timed window's (machine drift between windows): the native call "
            f"({native / 1e3:.1f} µs there) and the Python side are scaled to the timed step"
        )
        native *= reference / window
        corrected *= reference / window
    if native > reference:
        b.notes.append(
            f"the native call ({native / 1e3:.1f} µs) exceeds the timed step "
            f"({reference / 1e3:.1f} µs): capped at it"
        )
        native = float(reference)
    budget = reference - native
    if abs(drift) > DRIFT_NOTED and not scaled:
        b.notes.append(
            f"the hooks window's steps, less the hooks' cost, were {abs(drift):.0%} "
            f"{'slower' if drift > 0 else 'faster'} than the timed window's (machine drift "
            "between windows): the Python side is split by its shares"
        )
    correction = (
        f"hooks: Python-side parts as shares (their hooks' measured cost, {cost / 1e3:.1f} "
        "µs/step, removed first) of the timed step less the native call"
    )
    keep = corrected / side_total if side_total > 0 else 0.0
    python_side = {
        p: v * keep * (budget / corrected if corrected > 0 else 0.0) for p, v in python_side.items()
    }
    P = HookParts
    feeds = python_side.get(P.FEED_CONVERT, 0.0) + python_side.get(P.FEED_OTHER, 0.0)
    cast = float(data.feed_cast.cast_ns if data.feed_cast else 0) / k
    fetches = max(data.loop_info.fetches or 1, 1)
    for part, ns in python_side.items():
        b.add(
            cats.get(part, PYTHON),
            ns,
            correction,
            ATTRIBUTION_PARTS.get(part, ""),
            windows=("hooks",),
        )
    if feeds and data.feed_cast is not None:
        b.parts["feed_fetch.cast"] = min(cast, python_side.get(P.FEED_CONVERT, 0.0))
    if P.BUILD_RESULTS in python_side:
        # One fetched value costs its result building and its share of the handler's set-up.
        b.parts["feed_fetch.fetch_value"] = (
            python_side.get(P.BUILD_RESULTS, 0.0) + python_side.get(P.FETCH_SETUP, 0.0) / fetches
        )
    how = "as its share of the reference blocks beside it" if near is not None else "absolute"
    _split_native(
        native, kern, b, f"hooks: the native call, {how}", window="hooks", reference=reference
    )
    return native


#: Neighbours this much slower than the hooks window (less the hooks' measured cost) are still
#: taken as running at its speed (their medians' own noise).
NEAR_SLACK = 0.05
#: A native call above this share of the timed step, in a slower hooks window, is scaled with
#: the window instead of taken absolute.
NATIVE_MOST = 0.9
#: A hooks window (less the hooks' cost) this much faster than the timed window is scaled as a
#: whole; within it, the native call is taken absolute and the Python side absorbs the drift
#: (a slower window is mostly the hooks' cost beyond its measured lower bound).
DRIFT_FASTER = 0.25


#: A faster hooks window (by ``DRIFT_NOTED`` or more) whose drift would more than add
#: ``ABSORB_MOST`` times the Python side it measured to it is scaled as a whole too: TF's DCGAN
#: tutorial, its 1.3 s steps 99.8% inside the graph call (measured), read "Python 299 ms (23%)"
#: from a hooks window 18% faster than the timed one.
DRIFT_NOTED = 0.05
ABSORB_MOST = 1.0


#: A native call over this many times the share of the step the framework capture's run call
#: held is doing more than running the capture's kernels (``_split_native``).
NATIVE_BEYOND = 2.0


def _split_native(
    native: float,
    kern: Kernels | None,
    b: _Builder,
    source: str,
    *,
    rel_sd: float = 0.0,
    window: str = "",
    reference: float = 0.0,
) -> None:
    """Split time inside a native framework call into compute, data ops and dispatch.

    ``rel_sd``: the native time's relative standard deviation (from counting samples);
    ``window``: the phase whose window measured it; ``reference``: the step the shares apply
    to (ns; 0: not known)."""
    if native <= 0:
        return
    wins = tuple(w for w in (window, "framework" if kern is not None else "") if w)

    def add(category: str, ns: float, src: str, part: str = "") -> None:
        b.add(category, ns, src, part, sd=ns * rel_sd, windows=wins)

    if kern is None:
        b.unresolved += native
        b.not_measured.setdefault(COMPUTE, FRAMEWORK_PHASE)
        b.not_measured.setdefault(DISPATCH, FRAMEWORK_PHASE)
        b.notes.append(
            f"{native / 1e3:.1f} µs/step inside the native framework call: its kernels and "
            "dispatch were not measured (the framework phase did not run); that time is in "
            "other"
        )
        return
    if kern.run_call_ns > 0:
        # The kernels' share of the native call in the capture's own steps, applied to this
        # native call: windows run at different moments of a drifting machine, so no absolute
        # time of one window is subtracted from another's (a 52 ms kernel in a faster capture
        # window is never "18 ms of dispatch" in a 70 ms timed step).
        def share(ns: float) -> float:
            return native * min(ns / kern.run_call_ns, 1.0)

        compute = share(kern.compute_ns)
        captured = kern.run_call_ns / kern.window_step_ns if kern.window_step_ns > 0 else 0.0
        if reference > 0 and captured > 0 and native > NATIVE_BEYOND * captured * reference:
            # A native call holding far more of the step than the capture's run call held of
            # its own does more than run kernels (a TF1 loop making an op each iteration:
            # every 2nd call extends the graph and builds an executor, 25 ms, where the
            # capture's run call was 0.5 ms): its extra time is not kernels, which are then
            # the kernels' share of the capture's own step (compute read 39% of the step, 4%
            # measured without the profiler).
            compute = min(compute, reference * min(kern.compute_ns / kern.window_step_ns, 1.0))
        data = min(share(kern.data_ns), native - compute)
        comm = min(share(kern.communication_ns), native - compute - data)
    else:
        compute = min(kern.compute_ns, native)
        data = min(kern.data_ns, native - compute)
        comm = min(kern.communication_ns, native - compute - data)
    rest = native - compute - data - comm
    add(COMPUTE, compute, kern.source)
    add(FEED_FETCH, data, "kernels: tf.data iterator ops in the capture", "data_ops")
    add(
        COMMUNICATION,
        comm,
        "kernels: collective ops in the capture (the all-reduce and its wait for the other "
        "workers), less the time they overlap compute kernels",
    )
    executor = (
        native * min(kern.executor_ns / kern.run_call_ns, 1.0)
        if kern.run_call_ns > 0
        else kern.executor_ns
    )
    per_op = min(max(executor - compute - data - comm, 0.0), rest) if executor else 0.0
    add(DISPATCH, per_op, f"{source}, less kernels; executor time from the capture", "per_op")
    if kern.executor_ns:
        add(DISPATCH, rest - per_op, f"{source}, less the executor's time", "per_call")
    else:
        add(DISPATCH, rest, f"{source}, less kernel time", "per_op")


def _samples(
    trace: WorkloadTrace, analysed: sampling.Analysis | None
) -> tuple[dict[str, int] | None, int]:
    """The in-step samples per label (None without any), and how many of them were in tf.data's
    iterator ops (a loop waiting in ``next``)."""
    rec = trace.phase("sampled")
    if rec is None or rec.status != OK or not rec.samples:
        return None, 0
    if analysed is None:
        analysed = sampling.analyse(rec.samples, top=0)
    counts = dict(analysed.by_label)
    counts.pop("instrumentation", None)
    return (counts if sum(counts.values()) else None), analysed.by_rule.get(stacks.TF_DATA, 0)


def _samples_composition(
    trace: WorkloadTrace,
    b: _Builder,
    kern: Kernels | None,
    reference: int,
    counts: dict[str, int],
    data_n: int = 0,
) -> None:
    """Shares of samples applied to the reference step (the sampled phase's inflation cancels).
    ``data_n`` of the ``feed_fetch`` samples waited in tf.data's iterator ops: the part
    ``input`` (an eager loop iterating a dataset: the input diagnoses read it; the tf.data
    guide's generator, 30% of the step in ``next``, had no input finding)."""
    total = sum(counts.values())
    sampled: SampledData | None = trace.data("sampled")
    rate = sampled.rate_hz if sampled is not None else None
    tensorflow = any(label in counts for label in TEMPORARY_LABELS) or kern is not None
    if sampled is not None and not sampled.native and not tensorflow:
        # Without native frames a ufunc's inner loop is the Python line that called it.
        b.not_measured.setdefault(COMPUTE, SAMPLED_NATIVE)
        b.notes.append(
            "sampled without --native: numpy's kernels cannot be told from the calls around "
            "them, so compute is not measured and dispatch or python hold it"
        )
    source = f"samples: {total} main-thread samples at {rate} Hz, shares of the timed step"
    native = 0.0
    native_n = 0
    for label, n in counts.items():
        ns = reference * n / total
        # A count's binomial standard deviation, in ns of the step.
        sd = reference * (n / total * (1 - n / total) / total) ** 0.5
        if label in CATEGORIES:
            if label == OTHER:
                b.unresolved += ns
                b.sd[OTHER] = (b.sd.get(OTHER, 0.0) ** 2 + sd**2) ** 0.5
                continue
            part = "per_op" if label == DISPATCH else ""
            if label == FEED_FETCH and 0 < data_n <= n:
                data = ns * data_n / n
                # The category's deviation once (two parts of one count).
                b.add(label, data, source, "input", sd=sd, windows=("sampled",))
                ns, sd = ns - data, 0.0
                if ns <= 0:
                    continue
            b.add(label, ns, source, part, sd=sd, windows=("sampled",))
        else:  # a temporary native label
            native += ns
            native_n += n
    rel = ((1 - native_n / total) / native_n) ** 0.5 if native_n else 0.0
    _split_native(
        native,
        kern,
        b,
        "samples inside the native call",
        rel_sd=rel,
        window="sampled",
        reference=reference,
    )


def _refine_outside(counts: dict[str, int] | None, b: _Builder, reference: int) -> None:
    """Move data-loading and tracing found by samples out of the hooks' 'outside the call' time.

    The TF2 call-path hooks see only the function call; what Keras does around it (the data
    adapter, the epoch iterator, callbacks) is one Python part. Samples say which of it is
    feeding data (``feed_fetch``) or tracing.
    """
    if not counts:
        return
    # The hooks measured the typical step's Python side; samples only say how it divides.
    # Their shares of that side (not of the whole window: an epoch's set-up step, an outlier
    # the typical step leaves out, weighs far more in the samples than in the step).
    side = sum(counts.get(c, 0) for c in (PYTHON, FEED_FETCH, TRACING))
    budget = b.ns[PYTHON]
    if not side or budget <= 0:
        return
    for category in (FEED_FETCH, TRACING):
        q = counts.get(category, 0) / side
        move = budget * q
        if move > 0:
            b.ns[PYTHON] -= move
            b.add(
                category,
                move,
                "samples: their share of the Python side in data loading/tracing",
                sd=budget * (q * (1 - q) / side) ** 0.5,
                windows=("sampled", "hooks"),
            )


#: Traces per step above which every step retraced (no quiet step to measure instantiation).
ALWAYS_TRACES = 0.9
#: Ops created per step above which a TF1 graph grows in the loop.
GROWING_OPS = 0.5


def _per_call_is_tracing(trace: WorkloadTrace, b: _Builder) -> None:
    """Where every call builds something new, the native call's per-call dispatch is that
    building, not dispatch: a ``tf.function`` retracing at every call instantiates a new concrete
    function inside it; a TF1 graph that grows every step makes the session extend its graph and
    set up a new executor inside ``TF_SessionRun``."""
    hooks: HooksData | None = trace.data("hooks")
    why = ""
    if (
        hooks is not None
        and hooks.calls_per_step.get(HookParts.TRACING, 0.0) >= ALWAYS_TRACES
        and not hooks.median_ns.get(HookParts.INSTANTIATE)
    ):
        why = "every call retraced: instantiating the new concrete function inside the native call"
    growth = (trace.script or {}).get("graph_growth") or {}
    if growth.get("ops_per_step", 0) >= GROWING_OPS:
        why = (
            f"the graph grows by {growth['ops_per_step']:g} ops a step: extending the session's "
            "graph and setting up a new executor inside the native call"
        )
    moved = b.parts.pop("dispatch.per_call", 0.0)
    if not why or moved <= 0:
        if moved:
            b.parts["dispatch.per_call"] = moved
        return
    b.ns[DISPATCH] -= moved
    b.add(
        TRACING,
        moved,
        f"the native call's per-call time: {why}",
        "retrace",
        windows=tuple(b.windows.get(DISPATCH, ())),
    )
    b.notes.append(f"{moved / 1e3:.1f} µs/step of the native call is tracing: {why}")


#: tf.data's Python threads busy at least this share of the sampled time: the native call's
#: time beyond the executor is, in that share, a wait for the input (see below).
INPUT_PYTHON_MIN = 0.2


def _per_call_is_input_python(trace: WorkloadTrace, b: _Builder) -> None:
    """Where tf.data runs the script's Python on its own threads (a generator, a Keras
    ``PyDataset``, a ``py_function`` map), the step's native call waits for it: for the next
    batch inside the iterator op, and for the interpreter lock that Python holds, which the
    call needs to return. The native call's per-call time beyond the executor is input in the
    share of the sampled time those threads ran Python (a Keras ``Sequence`` loading .npy
    files ran 72% of it; measured without the profiler, loading the data once made its epoch
    37-46% shorter)."""
    rec = trace.phase("sampled")
    per_call = b.parts.get("dispatch.per_call", 0.0)
    if rec is None or rec.status != OK or not rec.samples or per_call <= 0:
        return
    a = sampling.analyse(rec.samples, top=0)
    busy = min(a.input_python / a.ticks, 1.0) if a.ticks else 0.0
    if busy < INPUT_PYTHON_MIN:
        return
    moved = per_call * busy
    b.parts["dispatch.per_call"] = per_call - moved
    b.ns[DISPATCH] -= moved
    where = ", ".join(a.input_functions) or "tf.data's Python callbacks"
    b.add(
        FEED_FETCH,
        moved,
        f"samples: tf.data's threads ran the script's Python ({where}) {busy:.0%} of the "
        "sampled time; that share of the native call's time beyond the executor waits for it",
        "input_python",
        windows=tuple(b.windows.get(DISPATCH, ())),
    )
    b.notes.append(
        f"{moved / 1e3:.1f} µs/step of the native call waits for the input: tf.data's threads "
        f"ran Python {busy:.0%} of the sampled time ({where})"
    )


def _kernels_only(b: _Builder, kern: Kernels, reference: int) -> None:
    """Only the framework capture measured the step: its kernels and the native call around
    them; the Python side is not measured (it is in ``other``)."""
    native = max(kern.run_call_ns, kern.compute_ns + kern.data_ns + kern.communication_ns)
    if kern.window_step_ns > 0:
        # The native call's share of the capture window's own step, applied to the timed step
        # (the windows ran at different moments).
        native = reference * min(native / kern.window_step_ns, 1.0)
    native = min(native, float(reference))
    _split_native(
        native, kern, b, "kernels: the native call in the framework capture", window="framework"
    )
    for c in (FEED_FETCH, PYTHON, TRACING):
        b.not_measured.setdefault(c, PYTHON_SIDE)
    b.notes.append(
        "only the framework capture measured this step: kernels and the native call; the "
        "Python side (feed/fetch, Python, tracing) was not measured and is in other"
    )


# --- the attribution -------------------------------------------------------------------------


def attribute(
    trace: WorkloadTrace,
    samples: sampling.Analysis | None = None,
    drift: stats.Drift | None = None,
) -> Attribution | None:
    """Attribute every timed step of ``trace``; None if it has no timed window.

    ``samples`` is the sampled phase's analysis, ``drift`` the run's drift
    (``stats.drift``), when the caller has them already.
    """
    timed = trace.phase("timed")
    if timed is None or timed.window is None or timed.window.n_steps == 0:
        return None
    k = trace.work.units_per_step
    units = timed.window.durations_ns()
    reference = central_mean([u // k for u in units])
    b = _Builder()
    kern = kernels(trace)
    counts, data_n = _samples(trace, samples)
    if drift is None:
        drift = stats.drift(trace)
    near = drift.neighbours.get("hooks") if drift is not None else None
    methods = []
    native = _hooks_composition(trace, b, kern, reference, near)
    if native is not None:
        methods.append("hooks")
        if kern is not None:
            methods.append("kernels")
        hooks: HooksData | None = trace.data("hooks")
        if hooks is not None and hooks.outside == HookParts.OUTSIDE_CALL:
            _refine_outside(counts, b, reference)
            if counts:
                methods.append("samples")
    elif counts is not None:
        methods.append("samples")
        if kern is not None:
            methods.append("kernels")
        _samples_composition(trace, b, kern, reference, counts, data_n)
    elif kern is not None:
        methods.append("kernels")
        _kernels_only(b, kern, reference)
    else:
        for c in EXPLAINED:
            b.not_measured[c] = PYTHON_SIDE if c not in (COMPUTE, DISPATCH) else FRAMEWORK_PHASE
        b.notes.append(
            "no hooks, samples or kernels for this workload: nothing was measured but the "
            "step's wall time (run the sampled, hooks or framework phase to attribute it)"
        )
    _per_call_is_tracing(trace, b)
    _per_call_is_input_python(trace, b)
    typical, parts = _settle(b, reference)
    gc.place(gc.analyse(trace), typical, parts, b.notes, reference, "samples" in methods)
    intervals, drift_pts = share_intervals(b, typical, reference, drift)
    steps = tuple(_split_step(u, typical, reference * k, k) for u in units)
    for row, u in zip(steps, units, strict=True):
        if sum(row) != u or min(row) < 0:
            raise ConservationError(f"{trace.workload}: {row} does not sum to {u}")
    return Attribution(
        workload=trace.workload,
        method="+".join(methods) or "none",
        reference_ns=reference,
        typical=typical,
        parts=parts,
        sources={c: v for c, v in b.sources.items()},
        steps=steps,
        units_per_step=k,
        notes=b.notes,
        not_measured=dict(b.not_measured),
        share_interval=intervals,
        drift_pts=drift_pts,
        reference_interval_ns=reference_interval([u // k for u in units], reference),
    )


def _settle(b: _Builder, reference: int) -> tuple[dict[str, int], dict[str, int]]:
    """Integer ns per category of the typical step, summing to ``reference`` exactly."""
    explained = sum(b.ns.values())
    scale = 1.0
    if explained + b.unresolved > reference and explained > 0:
        scale = max(reference - b.unresolved, 0.0) / explained
    # Half a percent over is rounding between windows, not over-attribution worth a note.
    if explained + b.unresolved > reference * 1.005 and explained > 0:
        over = 100 * (explained + b.unresolved) / reference
        b.notes.append(
            f"the instrumented windows' steps add up to {over:.0f}% of the timed step "
            "(machine drift between windows, or instrumentation cost not "
            "measured); their composition is scaled to the timed step"
        )
    typical = {c: int(b.ns[c] * scale) for c in EXPLAINED}
    if scale < 1.0:
        # Scaled to fit: hand the ns lost to rounding to the largest remainders, so a fully
        # explained step has no "other" made of truncation.
        target = max(reference - int(b.unresolved), 0)
        order = sorted(EXPLAINED, key=lambda c: -(b.ns[c] * scale - typical[c]))
        for c in order[: max(target - sum(typical.values()), 0)]:
            typical[c] += 1
    typical[OTHER] = reference - sum(typical.values())
    parts = {p: int(v * scale) for p, v in b.parts.items()}
    return typical, parts


#: How every figure's interval is made (profiler/docs/measuring.md, "Steps, windows and intervals",
#: says
#: the same).
INTERVAL_METHOD = (
    "95% intervals: a sampled share's binomial interval from its samples' count; a figure "
    "taken from another window than the timed one widened by the machine's drift between "
    "them (by the share's shift were its parts slowed r times against the rest, "
    "s(1-s)(r-1) / (1 + min(s, 1-s)(r-1)), r the speed ratio of the uninstrumented blocks "
    "beside those windows beyond their own noise, added in quadrature); the typical step's "
    "by batch means (the timed window cut into consecutive batches, Student's t over their "
    "means, which holds for autocorrelated steps); a time per step is its share's interval "
    "times the step's"
)
#: Batches of the timed window for the typical step's interval (at least ``BATCH_MIN`` steps
#: each, at least 3 batches).
BATCHES = 20
BATCH_MIN = 5


def reference_interval(durations: list[int], reference: int) -> tuple[int, int] | None:
    """The typical step's 95% interval by batch means: the steps cut into up to ``BATCHES``
    runs of consecutive steps, each run's central mean, Student's t over them (runs of steps
    are nearly independent where single steps are not); the steps' whole range under
    3 runs; None for no steps."""
    from profiler.model.intervals import t975

    n = len(durations)
    if not n:
        return None
    batches = min(BATCHES, n // BATCH_MIN)
    if batches < 3:
        return min(durations), max(durations)
    per = n // batches
    means = [central_mean(durations[i * per : (i + 1) * per]) for i in range(batches)]
    mean = sum(means) / batches
    var = sum((m - mean) ** 2 for m in means) / (batches - 1)
    half = t975(batches - 1) * (var / batches) ** 0.5
    # Around the typical step (a central mean of all the steps), the batches' spread.
    return max(int(reference - half), 0), int(reference + half)


def share_intervals(
    b: _Builder, typical: dict[str, int], reference: int, drift: stats.Drift | None
) -> tuple[dict[str, tuple[float, float]], dict[str, float]]:
    """Per measured category, its share's 95% interval (``INTERVAL_METHOD``), and the drift's
    part of its half-width in points."""
    if reference <= 0:
        return {}, {}
    explained = sum(b.ns.values())
    scale = typical_scale(b, reference, explained)
    used = sorted(set().union(*b.windows.values())) if b.windows else []
    out: dict[str, tuple[float, float]] = {}
    pts: dict[str, float] = {}
    for c in CATEGORIES:
        if c in b.not_measured:
            continue
        share = typical[c] / reference
        stat = 1.96 * b.sd.get(c, 0.0) * (scale if c != OTHER else 1.0) / reference
        windows = used if c == OTHER else sorted(b.windows.get(c, ()))
        ratio = drift.speed_ratio(windows) if drift is not None and windows else 1.0
        # The share's shift were the parts it holds (or the rest) slowed by ``ratio``
        # against the others: s·r / (s·r + 1 - s) - s, the wider of the two ways.
        moved = share * (1 - share) * (ratio - 1) / (1 + min(share, 1 - share) * (ratio - 1))
        half = (stat**2 + moved**2) ** 0.5
        out[c] = (round(max(share - half, 0.0), 5), round(min(share + half, 1.0), 5))
        pts[c] = round(100 * moved, 1)
    return out, pts


def typical_scale(b: _Builder, reference: int, explained: float) -> float:
    """The factor ``_settle`` scaled the explained parts by (1.0: not scaled)."""
    if explained + b.unresolved > reference and explained > 0:
        return max(reference - b.unresolved, 0.0) / explained
    return 1.0


def _split_step(unit_ns: int, typical: dict[str, int], ref_unit: int, k: int) -> tuple[int, ...]:
    """One unit's ns per category (``CATEGORIES`` order), summing to ``unit_ns`` exactly."""
    explained = [typical[c] * k for c in EXPLAINED]
    total = sum(explained)
    if unit_ns >= total:
        row = [*explained, unit_ns - total]
    else:
        row = [e * unit_ns // total if total else 0 for e in explained]
        row.append(unit_ns - sum(row))
    return tuple(row)


# --- figures for the summary and the experiments ----------------------------------------------


def removal_ns(att: Attribution, keys: tuple[str, ...]) -> int:
    """ns per training step a variant removing ``keys`` (categories or parts) should save."""
    whole = {k for k in keys if "." not in k}
    total = sum(att.typical.get(c, 0) for c in whole)
    for key in keys:
        if "." in key and key.split(".")[0] not in whole:
            total += att.parts.get(key, 0)
    return total


def step_totals(att: Attribution) -> dict[str, int]:
    """ns per category summed over every timed unit."""
    totals = dict.fromkeys(CATEGORIES, 0)
    for row in att.steps:
        for c, v in zip(CATEGORIES, row, strict=True):
            totals[c] += v
    return totals
