"""Memory over the steps: what the process holds, its peak, and how it grows per step.

Place in the pipeline: pure analysis of a script's memory record (``profiler.capture.memory``:
resident bytes sampled with the steps done at each moment). Growth is the Theil-Sen slope of
resident bytes against steps after the warm-up (the first ``WARMUP_SHARE`` of the steps, at
least ``WARMUP_STEPS``: allocators and caches fill first), over the medians of at most
``POINTS`` runs of samples, taken only within stretches of steps no instrumented phase ran in
(``within_theil_sen``: a phase's trace buffers are the profiler's, not the script's), with its
95% interval (Sen's, widened for autocorrelation). A process grows when that interval excludes
zero.

What grows (``explain``): the candidates the script process followed
(``profiler.capture.memory_causes``: graphs' ops, tf.functions' traces, the script's
containers), each as a rate per step after the same warm-up, and the script record's Keras
``predict`` calls per step; a container's rate times its newest item's bytes is the share of
the growth it holds. ``Cause`` is one of them, ranked: a container that holds at least
``HOLDS_SHARE`` of the growth, then graph ops, then retraces, then per-step ``predict`` calls.

What held the peak (``peak_of``): the census nearest the peak (``profiler.capture.memory_peak``:
the arrays, tensors and models the script's names held at the highest resident size a census
was taken at), the bytes those names account for, the runtime (resident bytes before the first
step less what the names held at the first step: the interpreter, the libraries, TensorFlow's
runtime) and the rest (the census' resident bytes less both: allocator caches, freed memory not
returned, what libraries hold that no name reaches).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from profiler.model import median_ns
from profiler.model.memory import (
    ARRAY,
    CONTAINER,
    FUNCTION,
    GRAPH,
    Candidate,
    Causes,
    Censuses,
    Holder,
)

WARMUP_SHARE = 0.1
WARMUP_STEPS = 10
POINTS = 60
#: A candidate counts as growing at this rate per step or more (ops, traces, items) ...
#: (a graph: the time finding's ``GRAPH_OPS_PER_STEP``; a loop of two session.run calls an
#: iteration, one making an op, grows 0.499 ops a step and read no cause at 0.5)
MIN_RATE = {GRAPH: 0.1, FUNCTION: 0.02, CONTAINER: 0.02, "predict": 0.5, ARRAY: 8.0}
#: ... and a container is the cause first when its items hold this share of the growth.
HOLDS_SHARE = 0.25


@dataclass(frozen=True)
class Cause:
    """One thing that grows with the steps.

    Attributes:
        kind: ``container``, ``array`` (a numpy array a name holds, made anew larger each
            step), ``graph``, ``function`` or ``predict`` (Keras predict calls).
        label: the script's name for it (``history``, ``the default graph``, ``train_step``).
        per_step: items, ops, traces or calls per step after the warm-up (an array: bytes).
        bytes_per_step: the bytes that adds a step, where known (a container's items).
        share: those bytes over the process's growth per step (None: not known).
        detail: what an item is (``a tf.Tensor float32 (1024, 1)``), the ops' types, or for
            ``predict`` the calls the run made in all (digits).
        line, text: the script's line that creates the ops (a graph), None if not seen.
    """

    kind: str
    label: str
    per_step: float
    bytes_per_step: float | None = None
    share: float | None = None
    detail: str = ""
    line: int | None = None
    text: str = ""


@dataclass(frozen=True)
class Peak:
    """What held the process's memory at the census nearest its peak.

    Attributes:
        step, rss_bytes: the census' steps done and resident bytes (at most ``RISE_SHARE``
            below the peak sampled, unless the rise came within ``MIN_GAP_S`` of the end).
        holders: the script's names that held the most, largest first.
        held_bytes: what all the names held (not only those kept).
        found: the holders found (more than ``holders`` when some were left off).
        runtime_bytes: resident before the first step less what the names held at the first
            step (None: not measured: no sample before a first step).
        rest_bytes: ``rss_bytes`` less ``held_bytes`` and ``runtime_bytes`` (where the runtime
            is not measured: less ``held_bytes`` only); may be negative when a name's buffer is
            not resident (zeros never touched).
        cost_ns, max_cost_ns, censuses: what a census cost (median, largest; ns of the sampling
            thread's CPU time) and how many were taken.
    """

    step: int
    rss_bytes: int
    holders: tuple[Holder, ...]
    held_bytes: int
    found: int
    runtime_bytes: int | None
    rest_bytes: int
    cost_ns: int | None
    max_cost_ns: int | None
    censuses: int
    before_steps_bytes: int | None = None
    frameworks: tuple[str, ...] = ()
    #: The peak came before the first step and its census found no name holding anything
    #: (the script's data was being made, in temporaries): the census is the first step's.
    before_steps_peak: bool = False


@dataclass(frozen=True)
class AllocatorUse:
    """TensorFlow's allocator on one device over the run (bytes it handed out).

    Attributes:
        device: ``CPU:0``, ``GPU:0`` ...
        last_bytes: in use at the last read.
        most_bytes: the most in use at any read (reads are ``memory_causes.EVERY_S`` apart).
        peak_bytes: the allocator's own peak (every allocation counted, between reads too).
        at_rss_peak_bytes: in use at the read nearest the resident peak.
        reads: the reads kept.
    """

    device: str
    last_bytes: int
    most_bytes: int
    peak_bytes: int
    at_rss_peak_bytes: int | None
    reads: int


def allocator_of(
    record: Mapping[str, Any], peak_t_ns: int | None
) -> tuple[tuple[AllocatorUse, ...], str]:
    """The record's allocator figures per device, and why there are none (empty: there are)."""
    got = record.get("allocator")
    if not isinstance(got, Mapping):
        return (), "not read (a run before allocator figures were read)"
    out = []
    for name, d in (got.get("devices") or {}).items():
        current, ts = list(d.get("current_bytes") or []), list(d.get("t_ns") or [])
        if not current or len(current) != len(ts):
            continue
        at_peak = None
        if peak_t_ns is not None:
            i = min(range(len(ts)), key=lambda k: abs(ts[k] - peak_t_ns))
            at_peak = current[i]
        out.append(
            AllocatorUse(
                device=str(name),
                last_bytes=current[-1],
                most_bytes=max(current),
                peak_bytes=int(d.get("peak_bytes") or max(current)),
                at_rss_peak_bytes=at_peak,
                reads=len(current),
            )
        )
    why = str(got.get("why") or "")
    errors = got.get("errors") or {}
    if not out and errors:
        why = "; ".join(f"{k}: {v}" for k, v in errors.items())
    return tuple(out), why


def peak_of(record: Mapping[str, Any]) -> Peak | None:
    """The memory record's census nearest the peak; None: no census (not measured)."""
    got = Censuses.from_json(record.get("census"))
    if got is None or got.peak is None:
        return None
    c = got.peak
    # A peak before the first step whose census saw no name holding anything (a CS231n data
    # loader's float64 copy, its int64 source alive beside it: 1,086 MB, the names not bound
    # yet) read "no array, tensor or model"; the first step's census names what the script
    # then kept (a 516 MB array).
    early = c.step == 0 and not c.held_bytes and got.start is not None and got.start.held_bytes > 0
    if early and got.start is not None:
        c = got.start
    runtime = None
    if got.before_steps_bytes is not None and got.start is not None:
        runtime = max(got.before_steps_bytes - got.start.held_bytes, 0)
    return Peak(
        step=c.step,
        rss_bytes=c.rss_bytes,
        holders=c.holders,
        held_bytes=c.held_bytes,
        found=c.found,
        runtime_bytes=runtime,
        rest_bytes=c.rss_bytes - c.held_bytes - (runtime or 0),
        cost_ns=got.cost_ns,
        max_cost_ns=got.max_cost_ns,
        censuses=got.taken,
        before_steps_bytes=got.before_steps_bytes,
        frameworks=got.frameworks,
        before_steps_peak=early,
    )


@dataclass(frozen=True)
class Memory:
    """A script's memory over its steps (bytes).

    Attributes:
        first_bytes, last_bytes: resident at the first step and at the last.
        peak_bytes, peak_step: the largest resident size sampled, and the steps done then.
        growth_per_step: bytes per step after the warm-up (None: too few steps or samples).
        growth_low, growth_high: its 95% interval.
        steps: the steps the growth was measured over.
    """

    first_bytes: int
    last_bytes: int
    peak_bytes: int
    peak_step: int
    growth_per_step: float | None
    growth_low: float | None
    growth_high: float | None
    steps: int
    #: The fit's resident size at the run's last step (first after the warm-up + growth).
    projected_bytes: float | None = None
    last_step: int = 0
    #: What grows, the likeliest cause first (``explain``); empty: nothing seen growing.
    causes: tuple[Cause, ...] = ()
    #: The cause probes' median cost (ns) and count.
    probe_cost_ns: int | None = None
    probes: int = 0
    #: Whether the growth was measured in the second half of the steps after the warm-up too
    #: (not only early: an allocator filling up rises early and levels off).
    late: bool = False
    #: What held the memory at the census nearest the peak (None: not measured).
    peak: Peak | None = None
    #: TensorFlow's allocator per device (empty: not read, ``allocator_why`` says why).
    allocator: tuple[AllocatorUse, ...] = ()
    allocator_why: str = ""
    #: The instrumented phase whose window (or what-if blocks) held the peak ("": none), and
    #: then the largest resident size sampled outside every such window, with its step.
    peak_phase: str = ""
    own_peak_bytes: int | None = None
    own_peak_step: int | None = None
    #: The resident bytes the instrumented phases' spans added and the run kept after them
    #: (each span: the first sample after it less the last before it, the rises summed); None:
    #: no span with samples on both sides.
    phases_added_bytes: int | None = None
    #: What the profiler's own record of the steps' ends holds at the last step (bytes; None:
    #: not known): part of the rise, not the script's.
    recorder_bytes: int | None = None
    #: Jumps of the resident size told apart from the growth (``_split_at_jumps``): the step
    #: and the bytes (negative: given back), the growth measured between them.
    jumps: tuple[tuple[int, int], ...] = ()

    @property
    def grows(self) -> bool:
        return self.growth_low is not None and self.growth_low > 0


#: Phases that allocate nothing per step in the script's process (markers only; py-spy reads
#: the process from outside): their windows are clean stretches for the growth.
CLEAN_PHASES = ("timed", "sampled")


def clean_spans(trace: Any) -> list[tuple[int, int]]:
    """Steps ``[from, to]`` the script ran without an instrumented phase: the windows of
    ``CLEAN_PHASES`` and every step after the last window of any phase and the what-if blocks
    that follow it (the script runs on with the step counter only)."""
    spans, last = [], -1
    for p in getattr(trace, "phases", ()) or ():
        for seg in p.window.segments if p.window is not None else ():
            end = seg.first_step + seg.n_steps
            last = max(last, end + _blocks_after(p))
            if p.name in CLEAN_PHASES:
                spans.append((seg.first_step, end))
    if last >= 0:
        spans.append((last + 1, 1 << 62))
    return spans


#: A peak in a phase's span is that phase's where it is this share (and these bytes) above the
#: largest sample outside every span.
PHASE_PEAK_SHARE = 0.1
PHASE_PEAK_BYTES = 50 * 2**20


def instrumented_spans(trace: Any) -> list[tuple[str, int, int]]:
    """``(phase, from, to)``, end excluded, of the steps each phase that allocates in the
    script's process held (every phase but ``CLEAN_PHASES``; the what-if phase's blocks
    after its window included)."""
    out = []
    for p in getattr(trace, "phases", ()) or ():
        if p.name in CLEAN_PHASES or p.window is None:
            continue
        for seg in p.window.segments:
            end = seg.first_step + seg.n_steps
            out.append(
                (p.name, seg.first_step, end + (_blocks_after(p) if p.name == "whatif" else 0))
            )
    return out


def _own_peak(
    steps: list[int], rss: list[int], peak_step: int, spans: list[tuple[str, int, int]] | None
) -> tuple[str, int | None, int | None]:
    """(the phase whose span held the peak step, "" for none; the largest resident bytes
    sampled in no span and its step, where a phase held the peak). The text generation
    tutorial's peak, 2,140 MB, was sampled while TensorFlow's profiler traced its fit (800 MB
    before that window, 812 MB after it); the script alone peaked at 906 MB."""
    # A sample's step is the steps done then: a phase's start and stop run at its window's
    # edges (TensorFlow's profiler gathers its trace at its stop), counted in.
    phase = next((name for name, a, e in spans or () if a <= peak_step <= e), "")
    if not phase:
        return "", None, None
    outside = [
        (r, s)
        for s, r in zip(steps, rss, strict=True)
        if not any(a <= s <= e for _, a, e in spans or ())
    ]
    if not outside:
        return phase, None, None
    r, s = max(outside)
    peak = max(rss)
    if peak - r < max(PHASE_PEAK_SHARE * r, PHASE_PEAK_BYTES):
        return "", None, None  # about the script's own peak: not the phase's
    return phase, r, s


def _blocks_after(p: Any) -> int:
    """The steps a phase runs after its window: the what-if phase's baseline and variant blocks
    (a variant compiled with XLA added 250 MB there), with a margin for the steps that switch
    a variant off."""
    results = getattr(p.data, "results", ()) if p.name == "whatif" else ()
    steps = sum((len(r.baseline_ns) + len(r.variant_ns)) * r.block_steps + r.group for r in results)
    return int(steps * 1.1) + 2 * len(results)


def analyse(
    record: Mapping[str, Any] | None,
    script: Mapping[str, Any] | None = None,
    clean: list[tuple[int, int]] | None = None,
    spans: list[tuple[str, int, int]] | None = None,
) -> Memory | None:
    """The script record's ``memory`` analysed; None where memory was not measured.

    Args:
        record: the script record's ``memory``.
        script: the script record (its Keras calls), where the caller has it.
        clean: the steps no instrumented phase ran in (``clean_spans``); None: all.
        spans: the steps each instrumented phase held (``instrumented_spans``).
    """
    if not record or not record.get("measured"):
        return None
    rss, steps = list(record.get("rss_bytes") or []), list(record.get("steps") or [])
    if not rss or len(rss) != len(steps):
        return None
    in_steps = [(s, r) for s, r in zip(steps, rss, strict=True) if s > 0]
    first = in_steps[0][1] if in_steps else rss[0]
    last_step = steps[-1]
    start = max(WARMUP_STEPS, int(WARMUP_SHARE * last_step))
    after = [(s, r) for s, r in in_steps if s >= start]
    growth = low = high = projected = None
    late = False
    clean = _tail_past_peak(clean, steps, rss)
    segments = _clean_segments(after, clean)
    points = sum(len(xs) for xs, _ in segments)
    split, jumps = _split_at_jumps(segments)
    if jumps and points >= 6:
        # A few jumps, flat between them: the slope is taken between them.
        segments = split
    if points >= 6 and sum(xs[-1] - xs[0] for xs, _ in segments) >= 10:
        fit = within_theil_sen(segments)
        if fit is not None:
            growth, low, high = fit
            # Less what the profiler's own record of the steps' ends adds a step.
            own = float(record.get("recorder_bytes_per_step") or 0.0)
            if own and last_step <= int(record.get("recorder_steps_max") or 0):
                growth -= own
                low = low - own if low is not None else None
                high = high - own if high is not None else None
            xs, ys = segments[-1]
            projected = ys[-1] + growth * (last_step - xs[-1])
            late = max(x[-1] for x, _ in segments) >= start + 0.5 * (last_step - start)
    causes = Causes.from_json(record.get("causes"))
    peak_t = _peak_time(record, rss)
    allocator, allocator_why = allocator_of(record, peak_t)
    peak_step = int(record.get("peak_step") or 0)
    peak_phase, own_bytes, own_step = _own_peak(steps, rss, peak_step, spans)
    added = _phases_added(steps, rss, spans, growth)
    return Memory(
        first_bytes=first,
        last_bytes=rss[-1],
        peak_bytes=int(record.get("peak_bytes") or max(rss)),
        peak_step=int(record.get("peak_step") or 0),
        growth_per_step=growth,
        growth_low=low,
        growth_high=high,
        steps=max(last_step - start, 0),
        projected_bytes=projected,
        last_step=last_step,
        causes=explain(causes, script or {}, start, growth),
        probe_cost_ns=causes.probe_cost_ns if causes else None,
        probes=causes.probes if causes else 0,
        late=late,
        peak=peak_of(record),
        allocator=allocator,
        allocator_why=allocator_why,
        peak_phase=peak_phase,
        own_peak_bytes=own_bytes,
        own_peak_step=own_step,
        phases_added_bytes=added,
        recorder_bytes=_recorder_bytes(record, last_step),
        jumps=tuple((int(x), int(d)) for x, d in jumps) if points >= 6 else (),
    )


#: A change between two of the reduced samples this many times their median change, and at
#: least ``JUMP_MIN_BYTES``, is a jump: memory taken (or given back) at once, a buffer made
#: anew, not a growth per step. d2l's softmax regression (a shuffle buffer of the whole data
#: set refilled each epoch) jumped by ~175 MB up and down at epoch ends without the profiler
#: (927, 841, 845, 1022, 1145, 970 ... MB); profiled, two jumps up read "grows by 135.2 KB a
#: step ... 277.9 MB over 2,105 steps".
JUMP_FACTOR = 20.0
JUMP_MIN_BYTES = 16 * 2**20
#: Jumps are told apart from the growth where they are at most this share of the changes and
#: those down give back this share of those up or more: a buffer's churn (a leak growing in
#: steps rises at every one).
JUMPS_SHARE = 0.25
CHURN_SHARE = 0.25


def _split_at_jumps(
    segments: list[tuple[list[float], list[float]]],
) -> tuple[list[tuple[list[float], list[float]]], list[tuple[float, float]]]:
    """The stretches split at their jumps, and the jumps (step, bytes); the stretches as they
    are and no jumps where there are none, too many, or nearly all up."""
    diffs = sorted(abs(ys[i + 1] - ys[i]) for _, ys in segments for i in range(len(ys) - 1))
    if len(diffs) < 5:
        return segments, []
    big = max(JUMP_FACTOR * diffs[len(diffs) // 2], JUMP_MIN_BYTES)
    out: list[tuple[list[float], list[float]]] = []
    jumps: list[tuple[float, float]] = []
    for xs, ys in segments:
        cur_x, cur_y = [xs[0]], [ys[0]]
        for i in range(1, len(xs)):
            if abs(ys[i] - ys[i - 1]) >= big:
                jumps.append((xs[i], ys[i] - ys[i - 1]))
                if len(cur_x) >= 2:
                    out.append((cur_x, cur_y))
                cur_x, cur_y = [], []
            cur_x.append(xs[i])
            cur_y.append(ys[i])
        if len(cur_x) >= 2:
            out.append((cur_x, cur_y))
    up = sum(d for _, d in jumps if d > 0)
    down = -sum(d for _, d in jumps if d < 0)
    if not jumps or len(jumps) > JUMPS_SHARE * len(diffs) or down < CHURN_SHARE * up or not out:
        return segments, []
    return out, jumps


def _recorder_bytes(record: Mapping[str, Any], last_step: int) -> int | None:
    """What the profiler's record of every step's end holds at ``last_step`` (bytes)."""
    own = float(record.get("recorder_bytes_per_step") or 0.0)
    if not own:
        return None
    return int(own * min(last_step, int(record.get("recorder_steps_max") or 0)))


def _phases_added(
    steps: list[int],
    rss: list[int],
    spans: list[tuple[str, int, int]] | None,
    growth: float | None = None,
) -> int | None:
    """The resident bytes the phases' spans added and kept (``Memory.phases_added_bytes``). A
    script calling fit 80 times in a loop went from 547 to 695 MB under the profiler, 544 to
    551 MB without it: the what-ifs' variants (train functions compiled with XLA, several
    batches a call) and TensorFlow's profiler kept theirs. Less the script's own growth over
    each span's steps, where one was measured outside them (a callback keeping every batch's
    weights, 408 KB a step: 1,551 MB of it read as the phases')."""
    total, seen = 0, False
    for _name, a, e in spans or ():
        before = [r for s, r in zip(steps, rss, strict=True) if s < a]
        after = [r for s, r in zip(steps, rss, strict=True) if s > e]
        if not after and any(s >= a for s in steps):
            # A span to the run's end (the what-ifs' blocks, last): what it held at the end
            # (that script's last 1,700 steps were the what-ifs': 600 -> 685 MB, unsaid).
            after = rss[-1:]
        if before and after:
            seen = True
            rise = after[0] - before[-1]
            if growth is not None and growth > 0:
                s0 = max(s for s in steps if s < a)
                s1 = next((s for s in steps if s > e), steps[-1])
                rise -= int(growth * (s1 - s0))
            total += max(rise, 0)
    return total if seen else None


def _peak_time(record: Mapping[str, Any], rss: list[int]) -> int | None:
    """The time (ns) of the largest resident sample kept."""
    ts = list(record.get("t_ns") or [])
    if not ts or len(ts) != len(rss):
        return None
    return int(ts[max(range(len(rss)), key=rss.__getitem__)])


def _tail_past_peak(
    clean: list[tuple[int, int]] | None, steps: list[int], rss: list[int]
) -> list[tuple[int, int]] | None:
    """``clean`` with the stretch after the last phase (``clean_spans``'s last) starting where
    resident bytes pass their peak during the phases: the heap a phase freed is reused first,
    and resident bytes stay flat while the script grows into it (a tf.function loop keeping a
    4.7 KB tensor a step read flat for its last 150 steps after the hooks phase)."""
    if not clean or clean[-1][1] != 1 << 62:
        return clean
    begin = clean[-1][0]
    before = [r for s, r in zip(steps, rss, strict=True) if s < begin]
    if not before:
        return clean
    peak = max(before)
    past = next((s for s, r in zip(steps, rss, strict=True) if s >= begin and r > peak), None)
    if past is None:
        return clean[:-1]
    return [*clean[:-1], (past, 1 << 62)]


def _clean_segments(
    after: list[tuple[int, int]], clean: list[tuple[int, int]] | None
) -> list[tuple[list[float], list[float]]]:
    """The samples in stretches of steps no instrumented phase ran in (``clean``: a phase's
    own buffers are not the script's growth, and they come and go with the phase), each
    reduced to the medians of runs of samples; one stretch of all the samples where the
    stretches are not known (too few clean samples leave the growth not measured, rather
    than measured with the phases' buffers in it)."""
    # Stretches that touch (a timed window and the steps right after it) are one stretch.
    merged: list[tuple[int, int]] = []
    for a, b in sorted(clean or []):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    clean = merged if clean is not None else None
    runs: list[list[tuple[int, int]]] = [[]]
    where = -1
    for s, r in after:
        i = next((k for k, (a, b) in enumerate(clean or [(0, 1 << 62)]) if a < s <= b), -1)
        if i != where and runs[-1]:
            runs.append([])
        where = i
        if i >= 0:
            runs[-1].append((s, r))
    runs = [run for run in runs if len(run) >= 3 and run[-1][0] > run[0][0]]
    if clean is None:
        runs = [after]
    total = sum(len(run) for run in runs)
    out = []
    for run in runs:
        per = max(len(run) * len(runs) // POINTS, 1) if total > POINTS else 1
        xs, ys = [], []
        for i in range(0, len(run) - per + 1, per):
            part = run[i : i + per]
            xs.append(float(median_ns([s for s, _ in part])))
            ys.append(float(median_ns([r for _, r in part])))
        if len(xs) >= 2:
            out.append((xs, ys))
    return out


def within_theil_sen(
    segments: list[tuple[list[float], list[float]]],
) -> tuple[float, float | None, float | None] | None:
    """The slope of bytes on steps from pairs within each stretch only (a jump between two
    stretches is no slope), the median of those pairwise slopes, with its 95% interval: Sen's
    order statistics at the summed Kendall variance of the stretches (Hirsch, Slack & Smith
    1982), widened for the residuals' lag-1 autocorrelation as ``stats.theil_sen_interval``
    does."""
    slopes = sorted(
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for xs, ys in segments
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if xs[j] != xs[i]
    )
    if not slopes:
        return None
    b = slopes[len(slopes) // 2]
    res: list[float] = []
    num = 0.0
    var = 0.0
    for xs, ys in segments:
        a = sorted(y - b * x for x, y in zip(xs, ys, strict=True))[len(xs) // 2]
        r = [y - (a + b * x) for x, y in zip(xs, ys, strict=True)]
        num += sum(r[i] * r[i + 1] for i in range(len(r) - 1))
        res.extend(r)
        n = len(xs)
        var += n * (n - 1) * (2 * n + 5) / 18
    den = sum(v * v for v in res)
    r1 = min(max(num / den if den else 0.0, 0.0), 0.9)
    if len(res) < 3 or len(slopes) < 2:
        return b, None, None
    c = 1.96 * (var * (1 + r1) / (1 - r1)) ** 0.5
    big_n = len(slopes)
    lo = max(int((big_n - c) / 2), 0)
    hi = min(int((big_n + c) / 2) + 1, big_n - 1)
    return b, slopes[lo], slopes[hi]


def rate(c: Candidate, start: int) -> float | None:
    """A candidate's rise per step from ``start`` on, where it rose in both halves of that
    span (a one-off rise is not growth); None: too few reads."""
    pts = [(s, v) for s, v in zip(c.steps, c.values, strict=False) if s >= start]
    if len(pts) < 3 or pts[-1][0] - pts[0][0] < 10:
        return None
    (s0, v0), (s1, v1) = pts[0], pts[-1]
    mid = min(pts, key=lambda p: abs(p[0] - (s0 + s1) / 2))
    if not (mid[1] > v0 and v1 > mid[1]):
        return 0.0
    return (v1 - v0) / (s1 - s0)


def explain(
    causes: Causes | None, script: Mapping[str, Any], start: int, growth: float | None
) -> tuple[Cause, ...]:
    """What grew after the warm-up (``start``), the likeliest cause of ``growth`` first."""
    found: list[Cause] = []
    for c in causes.grew if causes else ():
        r = rate(c, start)
        if r is None or r < MIN_RATE.get(c.kind, 1.0):
            continue
        if c.kind == CONTAINER:
            b = r * c.item_bytes if c.item_bytes is not None else None
            share = b / growth if b is not None and growth and growth > 0 else None
            found.append(Cause(CONTAINER, c.label, r, b, share, c.item))
        elif c.kind == ARRAY:
            # Its rise is bytes a step: the array made anew larger (np.vstack of itself).
            share = r / growth if growth and growth > 0 else None
            found.append(Cause(ARRAY, c.label, r, r, share, c.item))
        elif c.kind == GRAPH:
            site = next((o for o in c.ops if o.line is not None), None)
            types = ", ".join(dict.fromkeys(o.type for o in c.ops))
            found.append(
                Cause(
                    GRAPH,
                    c.label,
                    r,
                    detail=types,
                    line=site.line if site else None,
                    text=site.text if site else "",
                )
            )
        else:
            found.append(Cause(c.kind, c.label, r))
    steps = int(script.get("steps") or 0)
    predict = (script.get("keras_calls") or {}).get("predict") or {}
    if steps and predict.get("calls", 0) / steps >= MIN_RATE["predict"]:
        # Its calls, whether or not the steps make them (a generation loop between fits).
        found.append(
            Cause(
                "predict", "model.predict", predict["calls"] / steps, detail=str(predict["calls"])
            )
        )

    def rank(c: Cause) -> tuple[int, float]:
        if c.kind in (CONTAINER, ARRAY) and (c.share or 0) >= HOLDS_SHARE:
            return (0, -(c.share or 0))
        order = {GRAPH: 1, FUNCTION: 2, "predict": 3, CONTAINER: 4, ARRAY: 4}
        return (order.get(c.kind, 5), -(c.bytes_per_step or c.per_step))

    return tuple(sorted(found, key=rank))


def to_json(m: Memory | None) -> dict[str, Any] | None:
    """The summary's ``memory`` object (MB and bytes per step)."""
    if m is None:
        return None

    def mb(b: float) -> float:
        return round(b / 2**20, 2)

    def r(v: float | None) -> float | None:
        return round(v, 1) if v is not None else None

    return {
        "first_mb": mb(m.first_bytes),
        "last_mb": mb(m.last_bytes),
        "peak_mb": mb(m.peak_bytes),
        "peak_step": m.peak_step,
        "peak_phase": m.peak_phase,
        "own_peak_mb": mb(m.own_peak_bytes) if m.own_peak_bytes is not None else None,
        "own_peak_step": m.own_peak_step,
        "phases_added_mb": mb(m.phases_added_bytes) if m.phases_added_bytes is not None else None,
        "recorder_mb": mb(m.recorder_bytes) if m.recorder_bytes is not None else None,
        "growth_bytes_per_step": r(m.growth_per_step),
        "growth_interval": [r(m.growth_low), r(m.growth_high)]
        if m.growth_low is not None
        else None,
        "grows": m.grows,
        "late": m.late,
        "steps": m.steps,
        "last_step": m.last_step,
        "projected_mb": mb(m.projected_bytes) if m.projected_bytes is not None else None,
        "causes": [
            {
                "kind": c.kind,
                "label": c.label,
                "per_step": round(c.per_step, 4),
                "bytes_per_step": r(c.bytes_per_step),
                "share": round(c.share, 3) if c.share is not None else None,
                "detail": c.detail,
                "line": c.line,
                "text": c.text,
            }
            for c in m.causes
        ],
        "probe_cost_us": round(m.probe_cost_ns / 1e3, 1) if m.probe_cost_ns is not None else None,
        "probes": m.probes,
        "peak": peak_json(m.peak),
        "allocator": [
            {
                "device": a.device,
                "last_mb": mb(a.last_bytes),
                "most_mb": mb(a.most_bytes),
                "peak_mb": mb(a.peak_bytes),
                "at_rss_peak_mb": mb(a.at_rss_peak_bytes)
                if a.at_rss_peak_bytes is not None
                else None,
                "reads": a.reads,
            }
            for a in m.allocator
        ],
        "allocator_why": m.allocator_why,
        "jumps": [{"step": step, "mb": mb(b)} for step, b in m.jumps],
    }


def peak_json(p: Peak | None) -> dict[str, Any] | None:
    """The summary's ``memory.peak`` (MB to two places, bytes too); None: not measured."""
    if p is None:
        return None

    def mb(b: float | None) -> float | None:
        return round(b / 2**20, 2) if b is not None else None

    return {
        "step": p.step,
        "rss_mb": mb(p.rss_bytes),
        "held_mb": mb(p.held_bytes),
        "runtime_mb": mb(p.runtime_bytes),
        "rest_mb": mb(p.rest_bytes),
        "before_steps_mb": mb(p.before_steps_bytes),
        "before_steps_peak": p.before_steps_peak,
        "found": p.found,
        "frameworks": list(p.frameworks),
        "holders": [
            {
                "name": h.name,
                "kind": h.kind,
                "what": h.what,
                "bytes": h.bytes,
                "mb": mb(h.bytes),
                "count": h.count,
                "item": h.item,
                "looked": h.looked,
                "capped": h.capped,
                "optimizer_bytes": h.optimizer_bytes,
                "optimizer_mb": mb(h.optimizer_bytes),
            }
            for h in p.holders
        ],
        "censuses": p.censuses,
        "cost_us": round(p.cost_ns / 1e3, 1) if p.cost_ns is not None else None,
        "max_cost_us": round(p.max_cost_ns / 1e3, 1) if p.max_cost_ns is not None else None,
    }
