"""The first screen of a run of the user's own code: where its step goes, and what to change.

Place in the pipeline: part of the view model (``profiler.reports.viewmodel``), computed from
the summary. For every workload that is a user's script (or, in a run without the case study's
questions, every workload), ``focus`` gives: the step's time in words (median and mean, the
slow steps a median hides), its split into categories (largest first, "not measured" where no
phase measured one, with the phase that would), the costliest findings with their fixes, and
the phases that got no steps. The terminal (``profiler.reports.text.answer``) and the HTML page
show the same figures.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from profiler.analysis import before_steps
from profiler.analysis.whatif import LOWER_BOUND, verdict_words
from profiler.diagnoses.performance import WHATIF_FOR
from profiler.model import CATEGORIES
from profiler.reports import charts

#: Findings shown per workload on the first screen.
TOP_FINDINGS = 3
#: The finding that names ``other``'s time as the steps' sleep (``profiler.diagnoses.waiting``).
SLEEP_RULE = "sleep_in_steps"
#: The findings that name ``other``'s time, and what the verdict calls it.
OTHER_NAMED = {
    SLEEP_RULE: "asleep in time.sleep",
    "waits_for_workers": "waiting for a Pool's worker processes",
}

LABELS = {
    "compute": "compute (kernels)",
    "dispatch": "dispatch",
    "feed_fetch": "feed/fetch",
    "python": "Python",
    "tracing": "tracing",
    "communication": "communication",
    "other": "other (unexplained)",
}


def duration(us: float | None) -> str:
    """``us`` for people: ``14.0 µs``, ``1.25 ms``, ``2.10 s``."""
    if us is None:
        return "–"
    if us >= 1e6:
        return f"{us / 1e6:,.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:,.2f} ms"
    return f"{us:,.1f} µs"


def _split(att: Mapping[str, Any], wait: float | None = None) -> list[dict[str, Any]]:
    typical, share = att["typical_us"], att["share"]
    missing = att.get("not_measured") or {}
    intervals = att.get("share_interval") or {}
    rows = [
        {
            "category": c,
            "label": LABELS[c],
            "us": typical[c],
            "share": share[c],
            "measured": c not in missing,
            "why": missing.get(c, ""),
            "interval": intervals.get(c),
            "pm": _pm(share[c], intervals.get(c)),
            "detail": (
                _gc_detail(att)
                if c == "python"
                else _wait_detail(wait)
                if c == "other" and share[c] >= WAIT_SAID
                else ""
            ),
        }
        for c in CATEGORIES
    ]
    return sorted(rows, key=lambda r: (not r["measured"], -(r["us"] or 0.0)))


def _gc_detail(att: Mapping[str, Any]) -> str:
    """Python's named part held by the garbage collector, as a share of the step."""
    gc_us = (att.get("parts_us") or {}).get("python.gc")
    ref = att.get("reference_us")
    if not gc_us or not ref or gc_us < 0.005 * ref:  # under half a percent: not worth a word
        return ""
    return f"the garbage collector {100 * gc_us / ref:.0f}%"


def _wait_detail(wait: float | None) -> str:
    """What of ``other`` the script's thread's wait for a core may be, where it is worth a word."""
    if wait is None or wait < WAIT_SAID:
        return ""
    return f"the script's thread waited for a core {100 * wait:.0f}% of the timed window"


#: The share of the timed window the script's thread waited for a core from which it is said.
WAIT_SAID = 0.05
#: ... and said in the verdict beside an unexplained share where it is this much of it.
WAIT_OF_OTHER = 0.5
#: ... and beside slow steps holding most of the time where it is this much of their share.
WAIT_SLOW = 0.25


def _sentence(w: Mapping[str, Any]) -> str:
    st, dist = w.get("step_time") or {}, w.get("distribution") or {}
    median = st.get("median_us")
    steps = int(st.get("steps") or 0)
    text = f"A step of {w['label']} takes {duration(median)} (the median of {steps:,} timed steps"
    mean = dist.get("mean_us")
    if mean and median and mean > 1.2 * median and dist.get("outliers"):
        text += (
            f"; the mean is {duration(mean)}: {dist['outliers']} "
            f"step{'s' if dist['outliers'] != 1 else ''} over "
            f"{dist['outlier_factor']:g}× the median hold {100 * dist['outlier_share']:.0f}% "
            "of the time"
        )
    ref = (w.get("attribution") or {}).get("reference_us")
    if ref and median and abs(ref - median) >= SPLIT_OF * median:
        # The split sums to the typical step, not the median: said, or its parts read larger
        # than the step (gradient accumulation's update every 4th step: "takes 11.90 ms" over
        # "87% of the 14,424 µs step", "up to 12,507 µs less per step").
        text += (
            f"; the split below is of a typical step, {duration(ref)}: the mean of the timed "
            "steps between their 10th and 90th percentiles, its slower steps among them"
        )
    elif ref and median and abs(ref - median) >= SPLIT_SAID * median:
        # Near the median, the sum said all the same: a conv net's "takes 47.21 ms" over
        # parts summing to 47.94 ms, and beside a busy process "83.90 ms" over a compute
        # part of 85.71 ms, read as parts that do not add up.
        text += (
            f"; the split below sums to {duration(ref)}, the mean of the timed steps between "
            "their 10th and 90th percentiles"
        )
    others, cores = dist.get("others_cores"), int(dist.get("cores") or 0)
    wait = dist.get("wait_share")
    waited = (
        f"the script's thread waited for a core {100 * wait:.0f}% of the timed window"
        if wait is not None and wait >= WAIT_SAID
        else ""
    )
    if others is not None and cores and others >= BUSY_OTHERS_CORES:
        # Said whether or not slow steps stand out: beside a busy process every step can be
        # slower (a numpy net's 10 ms step read 416 ms, its BLAS threads waiting for a core).
        text += (
            f"; other processes kept {others:.1f} of this machine's {cores} cores busy "
            f"meanwhile: {waited or 'a step that waits for a core is slow too'}"
        )
    elif waited:
        # Its own threads took the cores (an input pipeline's, BLAS's).
        text += f"; {waited}, its own threads and other processes sharing the cores"
    return text + ")."


#: The findings that name a step compute- or overhead-bound.
BOUND_RULES = ("compute_bound", "overhead_bound")
#: The typical step the split sums to is said where it is this far from the median step.
SPLIT_OF = 0.1
#: ... and its sum said where it is this far from the median.
SPLIT_SAID = 0.01
#: Other processes' load (cores) beside the timed window above which slow steps may be waits
#: for a core, and the step sentence says so.
BUSY_OTHERS_CORES = 0.5


#: The rise from the first step to the last said as the phases' where they added this share
#: of it, and this many MB (a fit called 80 times in a loop: 547 -> 695 MB under the profiler,
#: 544 -> 551 MB without it, unsaid).
PHASES_ADDED_SHARE = 0.25
PHASES_ADDED_MB = 20.0


#: Parts of the time before the first step the budget line names: at least this share of it,
#: the largest ``BEFORE_PARTS`` of them.
BEFORE_SHARE = 0.1
BEFORE_PARTS = 3
#: ... or the script's own code holding this many seconds of it (word2vec's skip-gram pairs
#: made in a Python loop, 0.53 s, 9% of a start-up most of which was imports, went unsaid).
BEFORE_OWN_S = 0.5


def _before(before: Mapping[str, Any] | None) -> str:
    """``importing modules 2.1 s; make_data (train.py line 42) in its own code 1.9 s``, or
    ``imports, data, model`` when the time before the first step was not sampled."""
    parts = [
        p
        for p in (before or {}).get("parts", [])
        if (
            p["share"] >= BEFORE_SHARE
            or (p["kind"] == before_steps.OWN and p["seconds"] >= BEFORE_OWN_S)
        )
        and p["kind"] != before_steps.WATCHED
    ]
    if not parts:
        return "imports, data, model"
    return "; ".join(
        f"{before_steps.label(p['kind'], p['function'], p['file'], p['line'], p['inside'])} "
        f"{p['seconds']:,.1f} s"
        for p in parts[:BEFORE_PARTS]
    )


#: The steps' span is split when steady steps (all at the median) would take under this share
#: of it: the rest is the first steps' one-off work and the slow ones.
STEADY_SHARE = 0.5
#: ... and the first steps' one-off excess is at least this share of it.
FIRST_SHARE = 0.1


def _steady(
    span_s: float,
    n: int,
    median_us: float | None,
    one_off: Mapping[str, Any] | None,
    long_rows: Sequence[Mapping[str, Any]] = (),
    phases: tuple[float, int] = (0.0, 0),
    fit: Mapping[str, Any] | None = None,
) -> str:
    """``; at the median step they would take 5.5 s: the first 3 took 6.0 s more ...``: the
    steps' span against steady steps, where those are under ``STEADY_SHARE`` of it (a
    transfer-learning tutorial's 48 steps: 5.5 s of a 25.5 s span, the rest its traces after
    each compile and its validations)."""
    if not median_us or not n or span_s <= 0:
        return ""
    steady = n * median_us / 1e6
    first_n = int((one_off or {}).get("warmup_steps") or 0)
    first_s = float((one_off or {}).get("warmup_excess_ms") or 0.0) / 1e3
    if steady >= STEADY_SHARE * span_s:
        if first_n and first_s >= FIRST_SHARE * span_s:
            # Steady steps most of the span, a one-off still worth saying (TF's DeepDream
            # tutorial: its first call's trace, ~4 s of a 10.3 s span of 6 calls, unsaid).
            first = "the first step" if first_n == 1 else f"the first {first_n:,}"
            return (
                f"; {first} took {first_s:,.1f} s more than steps at the median (tracing, "
                "compiling and first calls, paid once)"
            )
        return ""
    one_off_part = first_s >= FIRST_SHARE * span_s
    rest = max(span_s - steady - (first_s if one_off_part else 0.0), 0.0)
    head = (
        f"; at the median step they would take {steady:,.1f} s: the first {first_n:,} took "
        f"{first_s:,.1f} s more (tracing, compiling and first calls, paid once), the others "
        f"{rest:,.1f} s more (slow steps and the time between steps: "
        if one_off_part
        # Without a one-off part worth saying, the rest is the profiler's own phases (a fit's
        # what-if blocks and their variants' traces: 10 s of a 20 s span of 1.5 ms steps) as
        # much as the script's (the imbalanced-data tutorial's four fits of new models read
        # "41.8 s ... (1,380 steps)" with 6.4 s of steady steps, and nothing of the rest).
        else f"; at the median step they would take {steady:,.1f} s, the other {rest:,.1f} s "
        "are slow steps and the time between steps ("
    )
    fits, inside = _fit_parts(fit, median_us, rest, first_n if one_off_part else 0, long_rows)
    if fits:
        # fit's own parts timed, those inside the phases' spans among them: the phases' part
        # is what their steps took beyond steps at the median, less those.
        ours = _phases_part(phases, median_us, rest - sum(s for s, _ in fits), inside=inside)
        return head + f"{_told(ours, fits, rest)})"
    ours = _phases_part(phases, median_us, rest, span_s, n)
    if not one_off_part:
        return head + (
            f"{ours[1]}; the rest: epoch ends, validations, the script's other calls and "
            "later traces, not told apart)"
            if ours
            else "epoch ends, validations, the script's other calls, later traces, and the "
            "profiler's own phases, not told apart)"
        )
    return (
        head
        + (
            f"{ours[1]}; the rest: epoch ends, validations and later traces, not told apart"
            if ours
            else "epoch ends, validations, later traces, and the profiler's own phases, not "
            "told apart"
        )
        + f"{_long_part(long_rows, first_n, rest)})"
    )


def _told(ours: tuple[float, str] | None, fits: Sequence[tuple[float, str]], rest_s: float) -> str:
    """The parts of the slow steps' and between-steps' time told apart (fit's validations,
    its callbacks' epoch ends, later fits' first steps, then the profiler's phases) and what
    is left of it, not told apart."""
    parts = [*fits, *([ours] if ours else [])]
    left = max(rest_s - sum(s for s, _ in parts), 0.0)
    return "; ".join(w for _, w in parts) + (
        f"; the rest {left:,.1f} s, not told apart" if left >= 0.05 else ""
    )


#: fit's own parts of the time between steps said from this share of it.
FIT_PART_SHARE = 0.05


def _fit_parts(
    fit: Mapping[str, Any] | None,
    median_us: float | None,
    room_s: float,
    first_n: int,
    long_rows: Sequence[Mapping[str, Any]] = (),
) -> tuple[list[tuple[float, str]], float]:
    """(seconds, words) of a Keras fit's own time between its batches, each timed as the run
    went (``script.fit``): its validations (the first of each new model apart: its test
    function's trace), its callbacks' epoch ends (the costliest named), and the later fits'
    first steps (a new model's train function built and traced), each where it holds
    ``FIT_PART_SHARE`` of the time, together at most ``room_s``; and the seconds of them that
    fell inside the instrumented phases' spans. TF's "Overfit and underfit" tutorial fits
    three models for 60 epochs of 20 batches each: 92 s of its 111 s span were "slow steps and
    the time between steps ... not told apart", of which 16 s were validations, 7 s epoch ends
    (6.6 s TensorBoard's) and 10.7 s the later fits' first steps."""
    if not fit or room_s <= 0 or not median_us:
        return [], 0.0
    out: list[tuple[float, str]] = []
    room, inside = room_s, 0.0

    def take(seconds: float, words: str, within: float) -> None:
        nonlocal room, inside
        seconds = min(seconds, room)
        if seconds >= FIT_PART_SHARE * room_s:
            out.append((seconds, words.format(s=seconds)))
            room -= seconds
            inside += min(within, seconds)

    # The last validation and epoch end follow the last batch: outside the steps' span.
    vals = [int(v) for v in fit.get("validations_ns") or ()][:-1]
    if vals:
        firsts = [int(i) for i in fit.get("first_validations") or () if 0 <= int(i) < len(vals)]
        first_s = sum(vals[i] for i in firsts) / 1e9
        apart = (
            f"; the first of each of its {len(firsts)} models {first_s:,.1f} s, its test "
            "function traced"
            if len(firsts) > 1 and first_s >= FIT_PART_SHARE * room_s
            else ""
        )
        altered = {int(i) for i in fit.get("validations_altered") or ()}
        within = sum(v for i, v in enumerate(vals) if i in altered) / 1e9
        take(sum(vals) / 1e9, f"fit's {len(vals):,} validations {{s:,.1f}} s{apart}", within)
    ends = list(fit.get("epoch_ends") or ())
    k = len(fit.get("callbacks") or ())
    if k and len(ends) % k == 0:
        ends = ends[:-k]
    if ends:
        by: dict[str, float] = {}
        for name, ms, *_ in ends:
            by[str(name)] = by.get(str(name), 0.0) + float(ms) / 1e3
        top = max(by, key=lambda name: by[name])
        total = sum(by.values())
        named = f" ({top} {by[top]:,.1f} s)" if len(by) > 1 and by[top] >= 0.5 * total else ""
        within = sum(float(e[1]) for e in ends if len(e) > 2 and e[2]) / 1e3
        take(total, f"the callbacks' epoch ends {{s:,.1f}} s{named}", within)
    starts = {int(c) for c in list(fit.get("call_steps") or ())[1:] if int(c) >= first_n}
    rows = [r for r in long_rows if int(r.get("step", -1)) in starts]
    if rows:
        excess = [max(float(r["us"]) - median_us, 0.0) / 1e6 for r in rows]
        within = sum(
            x for x, r in zip(excess, rows, strict=True) if r.get("phase") not in ("", "timed")
        )
        which = (
            "the later fit's first step"
            if len(rows) == 1
            else f"{len(rows)} later fits' first steps"
        )
        # A new model's train function traces at its first fit; one model fit again and again
        # pays the set-up only (a stateful LSTM's 400 fit calls on one model read "a new
        # model's train function traced").
        one = fit.get("models") == 1
        why = "fit's set-up" if one else "fit's set-up, a new model's train function traced"
        take(sum(excess), f"{which} {{s:,.1f}} s ({why})", within)
    return out, inside


#: The instrumented phases' excess is said within the slow steps' time from this share of it.
PHASES_PART_SHARE = 0.1


def _phases_part(
    phases: tuple[float, int],
    median_us: float | None,
    rest_s: float,
    span_s: float = 0.0,
    n: int = 0,
    inside: float | None = None,
) -> tuple[float, str] | None:
    """(seconds, words): what the steps the instrumented phases held (what-if blocks among
    them) took beyond steps at the median, less the script's own slow steps: those timed
    inside them (``inside``: a fit's validations, epoch ends and later fits' first steps),
    else at the rate the other steps had them (an evaluation every 20 batches falls in the
    phases' steps too), where it is at least ``PHASES_PART_SHARE`` of ``rest_s``; None
    otherwise. An autoencoder's XLA what-if blocks (~0.5 s a step) sat "not told apart" in
    36.9 s of its 49.3 s span."""
    seconds, steps = phases
    if not median_us or rest_s <= 0 or not seconds:
        return None
    median_s = median_us / 1e6
    if inside is not None:
        excess = min(max(seconds - steps * median_s - inside, 0.0), rest_s)
    else:
        others = n - steps
        # The other steps' own excess a step (0 where none are left to tell it from).
        own = max((span_s - seconds) - others * median_s, 0.0) / others if others > 0 else 0.0
        excess = min(max(seconds - steps * (median_s + own), 0.0), rest_s)
    if excess < PHASES_PART_SHARE * rest_s:
        return None
    return excess, (
        f"the profiler's phases {excess:,.1f} s, their {steps:,} steps' time beyond steps at "
        "the median (the what-ifs' blocks and the instruments)"
    )


#: Long steps after the first ones said within "the others" where they hold this share of it.
LONG_PART_SHARE = 0.2


def _long_part(rows: Sequence[Mapping[str, Any]], first_n: int, rest_s: float) -> str:
    """``; of them, step 8 alone took 19.0 s more than the median``: the steps after the first
    ones the run's long-step record holds (``script.long_steps``), where they are a fifth of
    the rest (the transfer-learning tutorial's fine-tuning fit, its first step after the
    recompile 19.8 s against 0.86 s: "the others 30.5 s more ... not told apart")."""
    later = [r for r in rows if int(r.get("step", 0)) >= first_n]
    excess = sum(max(float(r["us"]) - float(r["median_us"]), 0.0) for r in later) / 1e6
    if not later or rest_s <= 0 or not LONG_PART_SHARE * rest_s <= excess <= rest_s:
        return ""  # too little to say, or more than the rest (their median is another's)
    steps = ", ".join(f"{int(r['step']):,}" for r in later[:3]) + (
        ", ..." if len(later) > 3 else ""
    )
    which = f"step {steps} alone" if len(later) == 1 else f"{len(later)} steps ({steps})"
    return (
        f"; of them, {which} took {excess:,.1f} s more than the median step (a later trace "
        "such as a recompiled model's, an evaluation, or a phase's switch)"
    )


def _budget(
    script: Mapping[str, Any],
    before: Mapping[str, Any] | None = None,
    median_us: float | None = None,
    one_off: Mapping[str, Any] | None = None,
) -> str:
    """Where the script's wall time went around its steps, when the steps are not most of it
    (the time before the first step in its sampled parts, ``analysis.before_steps``), or when
    steady steps are not most of the steps' span (``_steady``)."""
    t = script.get("time") or {}
    wall = float(script.get("wall_s") or 0.0)
    steps_s = t.get("steps_s")
    if not wall or steps_s is None:
        return ""
    n = int(script.get("steps") or 0)
    # The loop's iterations watched before its first step are steps of the script all the same.
    watched = int((script.get("auto_step") or {}).get("watched_iterations") or 0)
    watched_s = float(t.get("watched_s") or 0.0) if watched else 0.0
    long_rows = (script.get("long_steps") or {}).get("steps") or ()
    phases = (float(t.get("phases_s") or 0.0), int(t.get("phases_steps") or 0))
    steady = _steady(
        float(steps_s) + watched_s,
        n + watched,
        median_us,
        one_off,
        long_rows,
        phases,
        script.get("fit"),
    )
    if float(steps_s) + watched_s >= 0.8 * wall and not steady:
        return ""
    count = f"{n + watched:,} step{'s' if n + watched != 1 else ''}"
    if watched:
        count += f", the first {watched:,} watched to find the loop"
    count += steady
    return (
        f"The script ran {wall:,.1f} s: {t['before_s'] - watched_s:,.1f} s before its first "
        f"step ({_before(before)}), {steps_s + watched_s:,.1f} s from its first step to its "
        f"last ({count}), {t['after_s']:,.1f} s after it."
    )


def size_text(b: float) -> str:
    """``b`` bytes for people: ``17 bytes``, ``4.7 KB``, ``1.4 MB`` (binary units)."""
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if abs(b) >= size:
            return f"{b / size:,.1f} {unit}"
    return f"{b:,.0f} bytes"


#: Why growth per step has no figure although memory was sampled (``analysis.memory.analyse``).
GROWTH_NOT_MEASURED = (
    "growth per step not measured (too few samples in the steps after the warm-up that no "
    "phase instrumented)"
)


def growth_text(m: Mapping[str, Any]) -> str:
    """The growth per step after the warm-up with its interval, in words (the summary's
    ``memory``): ``grows by 17 bytes a step after the warm-up (95%: 8 bytes to 41 bytes)``."""
    g, iv = m.get("growth_bytes_per_step"), m.get("growth_interval")
    if g is None or not iv:
        return GROWTH_NOT_MEASURED
    span = f"95%: {size_text(iv[0])} to {size_text(iv[1])}"
    if m.get("grows") and _early_only(m):
        return f"rose by {size_text(g)} a step in the early steps only ({span})"
    if m.get("grows"):
        return f"grows by {size_text(g)} a step after the warm-up ({span})"
    jumps = m.get("jumps") or ()
    if jumps:
        # A buffer's churn (d2l's shuffle buffer of the whole data set refilled each epoch:
        # ~175 MB up and down at epoch ends) read as growth per step.
        most = max(abs(float(j["mb"])) for j in jumps)
        return (
            f"no growth per step measured between its {len(jumps)} jumps ({span}); it moved "
            f"in those, up and down, by up to {most:,.0f} MB at once (a buffer made anew, the "
            "allocator taking and giving back memory), not step by step"
        )
    return f"no growth per step measured ({span})"


def _early_only(m: Mapping[str, Any]) -> bool:
    """Growth measured only in the first half of the steps after the warm-up, with no cause
    seen (``late`` false): an allocator filling up rises early and levels off, so it is not
    called growth (``profiler.diagnoses.memory``'s finding says the same). A Keras fit's
    process read "grows by 597 KB a step" beside a busy process and "no growth" quiet."""
    return m.get("late") is False and not m.get("causes")


def _caches_in_memory(script: Mapping[str, Any]) -> bool:
    """Whether a tf.data pipeline the script iterated has a ``.cache()`` without a file name."""
    return any(
        st.get("kind") == "cache" and st.get("detail") == "memory"
        for p in script.get("pipelines") or ()
        for st in p.get("stages") or ()
    )


def memory_not_measured(script: Mapping[str, Any]) -> str:
    """Why a script's run has no memory figures: the record's own reason, else none sampled."""
    record = script.get("memory") or {}
    why = str(record.get("why") or "") if isinstance(record, Mapping) else ""
    return why or "no resident-memory samples in this run"


def memory_line(w: Mapping[str, Any]) -> str:
    """The process's resident memory over the steps and its growth with its interval, as the
    terminal, the report, the notebook magic and the Keras callback print it (one line); a
    script whose memory was not sampled says so; "" for a workload that is not a script."""
    m = w.get("memory")
    if not m:
        script = w.get("script")
        return f"Memory: not measured ({memory_not_measured(script)})." if script else ""
    own = m.get("own_peak_mb")
    during = (
        f", while the {m['peak_phase']} phase instrumented the loop: its own memory; outside "
        f"the phases' windows {own:,.0f} MB at most, {m['own_peak_step']:,} steps in"
        if m.get("peak_phase") and own is not None
        else f", while the {m['peak_phase']} phase instrumented the loop: its own memory"
        if m.get("peak_phase")
        else ""
    )
    added = m.get("phases_added_mb")
    rise = m["last_mb"] - m["first_mb"]
    theirs = (
        f", {added:,.0f} MB of the rise kept from while the profiler's phases ran (its tracer's "
        "buffers, the what-ifs' compiled variants), not the script's steps"
        if added and rise > 0 and added >= PHASES_ADDED_SHARE * rise and added >= PHASES_ADDED_MB
        else ""
    )
    recorder = float(m.get("recorder_mb") or 0.0)
    if rise > 0 and recorder >= PHASES_ADDED_MB and recorder >= PHASES_ADDED_SHARE * rise:
        # A long run's record of every step's end (a per-sample loop of 8 million steps: 68 MB
        # of its 164 MB rise, read as the script's).
        theirs += (
            f", {recorder:,.0f} MB of it the profiler's record of every step's end (9 bytes a step)"
        )
    text = (
        f"Memory: {m['first_mb']:,.0f} MB resident at the first step, {m['last_mb']:,.0f} MB at "
        f"the last{theirs} (peak {m['peak_mb']:,.0f} MB, {m['peak_step']:,} steps in{during})"
    )
    g, iv = m.get("growth_bytes_per_step"), m.get("growth_interval")
    if g is not None and iv and m.get("grows") and _early_only(m):
        cache = (
            ", or from the in-memory `.cache()` of the script's tf.data pipeline, which fills "
            "during the first pass over its data and then stays that size"
            if _caches_in_memory(w.get("script") or {})
            else ""
        )
        return (
            f"{text}; it rose by {size_text(g)} a step after the warm-up (95%: "
            f"{size_text(iv[0])} to {size_text(iv[1])}) in the early steps only: no steps "
            "later in the run were free of the phases to tell growth from an allocator "
            f"filling up, which rises early and levels off{cache}."
        )
    if g is not None and iv and m.get("grows"):
        return (
            f"{text}; it grows by {size_text(g)} a step after the warm-up (95%: "
            f"{size_text(iv[0])} to {size_text(iv[1])}), {size_text(g * m['steps'])} over "
            f"{m['steps']:,} steps."
        )
    return f"{text}; {growth_text(m)}."


def memory_chart(
    card: Mapping[str, Any], w: Mapping[str, Any], series: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The card's chart of resident memory over the steps (``charts.memory_series``): the
    script record's samples, the phases' windows from the step-time series, the growth line
    named as ``growth_text`` words it."""
    m = w.get("memory")
    return charts.memory_series(
        card["memory_chart_id"],
        card["label"],
        dict(w["script"]["memory"]),
        dict(m) if m else None,
        charts.phase_windows(dict(series) if series else None),
        growth_text(m) if m else GROWTH_NOT_MEASURED,
    )


def _samples_note(phases: list[Mapping[str, Any]]) -> str:
    """How far the sampled phase's shares can be trusted: its samples, and a share's widest
    95% interval from that many."""
    p = next((p for p in phases if p.get("name") == "sampled" and p.get("status") == "ok"), None)
    data = (p or {}).get("data") or {}
    n, pts = data.get("samples_in_steps"), data.get("share_interval_pts")
    if not n or pts is None:
        return ""
    return (
        f"The sampled shares come from {n:,} samples inside steps ({data.get('rate_hz')} Hz): "
        f"each within ±{pts:g} points (95%)."
    )


def _pm(share: float | None, interval: list[float] | None) -> float | None:
    """A share's 95% interval as ± points (its wider side), or None without one."""
    if share is None or not interval:
        return None
    return round(100 * max(share - interval[0], interval[1] - share), 1)


def _pct(row: Mapping[str, Any]) -> str:
    """``58%`` or, with its interval, ``58% ±6``."""
    pm = row.get("pm")
    # Half a point rounds to "±0", read as no uncertainty at all: at least ±1.
    return f"{100 * row['share']:.0f}%" + (
        f" ±{max(round(pm), 1)}" if pm is not None and pm >= 0.5 else ""
    )


#: The shares at which the diagnoses call a step compute-bound (compute) and overhead-bound
#: (everything but compute and communication): ``profiler.diagnoses.performance``'s
#: ``compute_bound`` and ``overhead_bound*`` rules, read here only to say when the interval
#: of the step's compute share reaches across one of them.
COMPUTE_BOUND = 0.60
OVERHEAD_BOUND = 0.40
#: The rules (ids starting so) the first sentence does not quote as the top fix when the
#: compute share's interval reaches across their thresholds (another run could fire the other).
BOUND_RULES = ("compute_bound", "overhead_bound")


def _bound(rule: object) -> bool:
    return str(rule or "").startswith(BOUND_RULES)


#: A finding whose cost is this many times the best measured what-if's saving leads the verdict;
#: ``BIGGER_MOST`` times where it holds at least ``MOST_OF_STEP`` of the step (a line computing
#: its loss on all 60,000 rows for a log line, 94% of the step read, 93% without the profiler,
#: gave way to float32's measured 43%).
BIGGER_FINDING = 3.0
BIGGER_MOST = 2.0
MOST_OF_STEP = 0.5


#: A finding with a fix leads the verdict over a costlier compute-bound one (whose "fix" is what
#: a step of kernels leaves) when it costs at least this share of the step.
FIX_OVER_COMPUTE = 0.1


def _top_finding(card: Mapping[str, Any], noise: str) -> Mapping[str, Any] | None:
    """The costliest finding the first sentence may quote: within the noise, not one of the
    compute- or overhead-bound verdicts another run could swap; a compute-bound one gives way
    to the costliest finding with a fix worth ``FIX_OVER_COMPUTE`` of the step (a PyDataset's
    Python batches, 27% of a conv net's step, went unsaid behind "compute is 70%")."""
    eligible = [
        f
        for f in card["findings"]
        # Not refuted (its advice was measured on the loop and did not help), with a cost of
        # the step (a one-off trace has no fix to lead with).
        if not f.get("refuted")
        and not ("cost_us" in f and f["cost_us"] is None)
        and not (noise and _bound(f.get("rule")))
    ]
    if not eligible:
        return None
    if str(eligible[0].get("rule") or "").startswith("compute_bound"):
        step = sum(r["us"] or 0.0 for r in card["split"] if r["measured"])
        for f in eligible[1:]:
            if f.get("fix") and step and (f.get("cost_us") or 0.0) >= FIX_OVER_COMPUTE * step:
                return f
    return eligible[0]


def _within_noise(card: Mapping[str, Any]) -> str:
    """Which verdict thresholds the compute share's interval reaches across: "" for none,
    else the words for the verdicts it cannot tell apart."""
    rows = {r["category"]: r for r in card["split"]}
    compute = rows.get("compute")
    if compute is None or not compute["measured"] or not compute.get("interval"):
        return ""
    lo, hi = compute["interval"]
    comm = rows.get("communication") or {}
    comm_share = (comm.get("share") or 0.0) if comm.get("measured") else 0.0
    # Overhead-bound at overhead >= 40%: compute + communication <= 60%.
    over_at = 1 - OVERHEAD_BOUND - comm_share
    if lo < COMPUTE_BOUND <= hi or lo <= over_at < hi:
        return "compute- and overhead-bound are within the noise"
    return ""


def _finding_leads(
    finding: Mapping[str, Any], best: Mapping[str, Any], w: Mapping[str, Any]
) -> bool:
    """Whether the costliest finding leads the verdict before the best measured what-if: its
    cost is ``BIGGER_FINDING`` times the what-if's saving and no what-if of its own measured
    it (an input-bound step, 78% waiting for a py_function map, whose only measured what-if
    saves 4% of it). Its own what-ifs inconclusive are no measurement of it (a two-input fit
    beside a busy process: steps_per_execution inconclusive, and XLA's 0.2 ms, 1.1x, led over
    its 1.4 ms of per-batch overhead; steps_per_execution=16 cut training 38% without the
    profiler); a finding its what-ifs refuted never leads."""
    fix = str(finding["fix"]).split(". ")[0].rstrip(".")
    cost = finding.get("cost_us") or 0.0
    mine = set(WHATIF_FOR.get(str(finding.get("rule")), ()))
    # An inconclusive one whose interval rules out half its prediction is a measurement too
    # (a multi-input fit: steps_per_execution=4 at most 2.0 ms less where 7.2 ms was predicted,
    # and the verdict led with the finding's 9.5 ms predicted over XLA's measured 5.1 ms).
    own = [
        x
        for x in w.get("whatif") or []
        if x.get("id") in mine
        and (x.get("verdict") not in ("inconclusive", "failed") or _rules_out_half(x))
    ]
    step = float((w.get("step_time") or {}).get("median_us") or 0.0)
    most = bool(step) and cost >= MOST_OF_STEP * step
    return (
        bool(fix)
        and not own
        and not finding.get("refuted")
        and cost > (BIGGER_MOST if most else BIGGER_FINDING) * sure_saving(best)
    )


def _rules_out_half(x: Mapping[str, Any]) -> bool:
    """Whether a what-if's interval ends under half the saving it predicted."""
    iv, predicted = x.get("interval_us"), x.get("predicted_saving_us")
    return bool(iv and predicted and float(iv[1]) < float(predicted) / 2)


def sure_saving(x: Mapping[str, Any]) -> float:
    """A measured what-if's saving it is sure of: its interval's lower end where it has one
    (beside a busy process an input-bound fit's XLA blocks read 0.14-9.5 ms less per step,
    "4.8× faster", where XLA gave nothing without the profiler: the variant's compile let the
    input pipeline run ahead), else its point figure."""
    iv = x.get("interval_us")
    m = float(x.get("measured_saving_us") or 0.0)
    return min(float(iv[0]), m) if iv else m


#: A saving whose interval's lower end is under this share of its point figure is quoted with
#: its interval in the verdict, not as a point and a speed-up.
WIDE_SAVING = 0.5


def verdict_rule(card: Mapping[str, Any], w: Mapping[str, Any]) -> str:
    """What opens the answer, as an id: a measured what-if (``whatif:<id>``) unless it measured
    the costliest finding's own fix or that finding leads the sentence (then that finding's
    rule), the costliest finding's rule (within the noise: not a compute- or overhead-bound
    one), ``within_noise`` (the compute share's interval reaches across a verdict's threshold
    and no other finding fired), ``no_fix``, or ``not_measured`` (no cause of the step was
    measured)."""
    split = [r for r in card["split"] if r["measured"] and r["us"] and r["category"] != "other"]
    if not split:
        return "not_measured"
    outside = _script_lead(card)
    if outside is not None:
        return str(outside.get("rule") or "")
    fixes = [x for x in w.get("whatif") or [] if _saves(x) and x.get("measured_saving_us")]
    noise = _within_noise(card)
    top = _top_finding(card, noise)
    if fixes:
        best = max(fixes, key=sure_saving)
        if top is not None and (
            _finding_leads(top, best, w) or best["id"] in WHATIF_FOR.get(str(top.get("rule")), ())
        ):
            # The finding leads the sentence, or the what-if measured the finding's own fix
            # (XLA for compute-bound, steps_per_execution=4 or 16 for fit's per-batch cost):
            # one verdict, whichever of its what-ifs the machine's noise let show a saving.
            return str(top.get("rule") or "")
        return "whatif:" + str(best["id"])
    if top is not None:
        return str(top.get("rule") or "")
    return "within_noise" if noise else "no_fix"


def _unmeasured(card: Mapping[str, Any]) -> str:
    """The phases that would measure the categories this run did not, in a few words."""
    why = sorted({r["why"] for r in card["split"] if not r["measured"] and r["why"]})
    return f"; {' and '.join(why)} would measure the rest" if why else ""


#: Slow steps holding this share of the time or more: the verdict's split is of a typical step.
SLOW_HOLD = 0.5
#: The finding of a later fit of another model, slower than the fits the phases measured.
LATER_FIT = "later_fit_slower"
#: Findings that name what the slow steps run, by what the verdict calls it: where one holds
#: SLOW_HOLD of the mean step or more, the verdict leads with it, not the typical step's split
#: (a tabular fit: "dispatch is 48% of a typical step" where the epochs' boundaries were 94%).
SLOW_CAUSES = {
    "per_epoch_cost": "the work at each epoch's boundary",
    "periodic_slow_steps": "the work of the periodic slow steps",
    "slow_steps_update": "the slow steps' training update",
}
#: A finding about time outside the steps holding this share of the script's time or more
#: leads the verdict, not the training step's split.
SCRIPT_HOLD = 0.5
#: A measured fix is named beside a leading finding only where it makes the mean step at
#: least this much faster.
MEAN_GAIN_MIN = 1.1


def _mean_gain(best: Mapping[str, Any], w: Mapping[str, Any]) -> float | None:
    """How much faster the mean step would be with the fix, its slow steps as they are; None
    where the mean step is not much longer than the median (``_speed``'s test)."""
    base = best.get("baseline_us")
    st, dist = w.get("step_time") or {}, w.get("distribution") or {}
    median, mean = st.get("median_us"), dist.get("mean_us")
    if not base or best.get("block_mean") or not (mean and median and mean > 1.2 * median):
        return None
    # The saving at the timed window's speed (the blocks ran at their own).
    saving = float(best.get("measured_saving_us") or 0.0) * median / base
    return mean / (mean - saving) if saving < mean else None


#: The one-BLAS-thread what-if's saving, of its blocks' step as written, from which the
#: kernels' time is said to be mostly BLAS's threads waiting.
BLAS_WAIT_SHARE = 0.5


def _blas_waits(head: str, top: Mapping[str, Any], best: Mapping[str, Any]) -> str:
    """The verdict's kernels named as BLAS's threads waiting where numpy's BLAS on one thread
    measured most of the step away: Karpathy's pg-pong beside other work read "compute
    (kernels) is 98% of a typical step", which reads as nothing to do, where one BLAS thread
    made its frames 6.0x faster (about 9x without the profiler)."""
    base = float(best.get("baseline_us") or 0.0)
    if (
        top.get("category") != "compute"
        or best.get("id") != "numpy_blas_one_thread"
        or not base
        or sure_saving(best) <= 0
        or float(best["measured_saving_us"]) < BLAS_WAIT_SHARE * base
    ):
        return head
    return head.replace(
        f"Verdict: {top['label']} is",
        f"Verdict: {top['label']}, most of it numpy's BLAS threads waiting for one another "
        "and for cores, is",
        1,
    )


def _kernels_refuted(card: Mapping[str, Any]) -> bool:
    """Whether the compute-bound finding says a what-if refuted its kernels (the whole step
    measured less than them, or a fix that leaves them saved a share of the step)."""
    return any(
        f.get("rule") in (*BOUND_RULES, "compute_bound_peak")
        and str(f.get("fix") or "").startswith("Not the advice here:")
        for f in card["findings"]
    )


def _speed(best: Mapping[str, Any], w: Mapping[str, Any]) -> str:
    """The best what-if's speed-up for the verdict: on the median step, as measured (its blocks'
    medians), and where slow steps make the mean step much longer (epoch boundaries, garbage
    collections) on the mean step as well, with its slow steps as they are: a k-fold fit with
    70-batch epochs read "2.6× faster" on the median step, 1.3× on its mean step, 3.5 ms."""
    base, var = best.get("baseline_us"), best.get("variant_us")
    if not base or not var:
        return ""
    text = f", {base / var:.1f}× faster"
    if best.get("block_mean"):
        # Its blocks' mean steps: the slow steps are in them.
        return f"{text} on the mean step"
    if int(best.get("group") or 1) > 1 and best.get("id") == "predict_direct":
        # Each figure a mean over the steps one call comes with: the slow steps (the calls')
        # are in it (a GAN read "2.6x faster on the median step (1.7x on the mean step ...
        # if its slow steps stay as they are)" where the fix removes those slow steps).
        return text
    dist = w.get("distribution") or {}
    gain = _mean_gain(best, w) if dist.get("outliers") else None
    if gain is None:
        return text
    return (
        f"{text} on the median step ({gain:.1f}× on the mean step, "
        f"{duration(dist['mean_us'])}, if its slow steps stay as they are)"
    )


def _verdict(card: Mapping[str, Any], w: Mapping[str, Any]) -> str:
    """The answer's first sentence, always: the dominant cost and its share with its interval
    (most of the step unexplained says so, with the largest measured part), then the top fix
    measured on the loop, else the costliest finding's, else that no fix was found (with the
    compute share, and its rate against this machine's peak where it was counted). Where the
    compute share's interval reaches across a verdict's threshold (compute-bound at 60%,
    overhead-bound at 40% overhead), it says so and quotes no compute- or overhead-bound
    finding that another run of the same script could swap for the other."""
    split = [r for r in card["split"] if r["measured"] and r["us"] and r["category"] != "other"]
    if not split:
        return (
            "Verdict: no cause of the step was measured, only its time"
            f"{_unmeasured(card) or ' (no phase that splits a step ran)'}."
        )
    top = split[0]
    other = next((r for r in card["split"] if r["category"] == "other"), None)
    sleep = next((f for f in card["findings"] if f.get("rule") == SLEEP_RULE), None)
    named = next(
        (OTHER_NAMED[f["rule"]] for f in card["findings"] if f.get("rule") in OTHER_NAMED), None
    )
    if other is not None and other["us"] and other["share"] > top["share"] and named:
        head = (
            f"Verdict: {_pct(other)} of the step is {named}, booked as other "
            f"(the largest part at work: {top['label']} {_pct(top)}{_unmeasured(card)})"
        )
    elif other is not None and other["us"] and other["share"] > top["share"]:
        wait = (w.get("distribution") or {}).get("wait_share")
        waited = ""
        if wait is not None and wait >= WAIT_OF_OTHER * other["share"]:
            # Measured in the same window as the step, not another phase's (a hyperparameter
            # grid beside a busy process: "73% of the step is unexplained").
            waited = (
                f", the script's thread waiting for a core {100 * wait:.0f}% of the timed window"
            )
        head = (
            f"Verdict: {_pct(other)} of the step is unexplained{waited} (the largest measured "
            f"part: {top['label']} {_pct(top)}{_unmeasured(card)})"
        )
    else:
        head = f"Verdict: {top['label']} is {_pct(top)} of the step"
        dist = w.get("distribution") or {}
        if float(dist.get("outlier_share") or 0.0) >= SLOW_HOLD and dist.get("outliers"):
            # The split is of a typical step, a minority of the time (a tabular fit: "feed/fetch
            # is 61% of the step" where 5 slow steps held 98% of its time).
            n = int(dist["outliers"])
            wait = dist.get("wait_share")
            # Slow steps beside other work are often waits for a core (a numpy loop of
            # 200x200 matmuls: 210 slow steps held 81% of its time, its thread waiting for a
            # core 45% of the window).
            waited = (
                f"; the script's thread waited for a core {100 * wait:.0f}% of the timed window"
                if wait is not None and wait >= WAIT_SLOW * float(dist["outlier_share"])
                else ""
            )
            head = (
                f"Verdict: {top['label']} is {_pct(top)} of a typical step ({n} slow "
                f"step{'s' if n != 1 else ''} over {dist.get('outlier_factor', 3):g}× the median "
                f"hold {100 * float(dist['outlier_share']):.0f}% of the time{waited})"
            )
            cause = _slow_cause(card, float(dist.get("mean_us") or 0.0))
            if cause:
                head = f"Verdict: {cause} (a typical step: {top['label']} {_pct(top)})"
        if top["category"] == "compute" and _kernels_refuted(card):
            # The tracer's kernels more than a fixed step took (a TensorBoard guide's fit
            # beside a busy process: "compute (kernels) is 76% of the step" where 16 batches
            # a call ran the whole step in 3.83 ms against 6.71 ms of kernels read).
            head += (
                " as the framework phase's tracer read the kernels, but a fix measured on "
                "your loop shows overhead to remove (the compute-bound finding below)"
            )
        if any(f.get("rule") == LATER_FIT for f in card["findings"]):
            # The phases measured the first models' steps (the overfitting tutorial's tiny
            # model: "dispatch 45%", where its large one, 60-72% of the time, is kernels).
            head += ", in the earlier fits' steps (a later model's fit, slower, is below)"
        if sleep is not None and f"booked as {top['label']}." in str(sleep.get("message")):
            # Without native frames a sleep is its line's Python (a TensorFlow script).
            head += ", most of it asleep in time.sleep"
    fixes = [x for x in w.get("whatif") or [] if _saves(x) and x.get("measured_saving_us")]
    outside = _script_lead(card)
    if outside is not None:
        # Most of the script's time is outside its steps (Keras's character LSTM: "compute is
        # 55% of the step" led where its predict calls, one a character, took 55% of the
        # script and its training steps 49%): that leads, with its fix, the step's split after.
        head = f"Verdict: {outside['lead']} (a training step: {top['label']} {_pct(top)})"
        fix = _first_fix(str(outside["fix"]))
        if outside.get("rule") == LATER_FIT:
            # Not measured here: how to measure it, nothing about the earlier fits' steps.
            head = head.replace("(a training step:", "(the earlier fits' steps:")
            return f"{head}; {fix[0].lower()}{fix[1:]}."
        if fixes:
            best = max(fixes, key=sure_saving)
            return (
                f"{head}; the top fix, predicted from this run's figures: {fix}; in the steps, "
                f"measured on your loop: {best['title']}, {duration(best['measured_saving_us'])} "
                f"less per step{_speed(best, w)}."
            )
        return f"{head}; the top fix, predicted from this run's figures: {fix}."
    noise = _within_noise(card)
    finding = _top_finding(card, noise)
    if noise and finding is None:
        # Said only where no other finding leads: beside one (summaries written every step,
        # 91% of the kernels) the bound verdicts it cannot tell apart are not the answer.
        compute = next(r for r in card["split"] if r["category"] == "compute")
        what = f"compute {_pct(compute)}" if top["category"] != "compute" else ""
        head += f" ({what}: {noise})" if what else f": {noise}"
    if fixes:
        best = max(fixes, key=sure_saving)
        speed = _speed(best, w)
        head = _blas_waits(head, top, best)
        measured = f"{best['title']}, {duration(best['measured_saving_us'])} less per step{speed}"
        iv = best.get("interval_us")
        if iv and sure_saving(best) < WIDE_SAVING * float(best["measured_saving_us"]):
            # Its blocks varied more than the saving is sure of: the range, no speed-up.
            measured = (
                f"{best['title']}, between {duration(iv[0])} and {duration(iv[1])} less per "
                f"step (95%; its {best.get('pairs') or 0} pairs of blocks varied widely)"
            )
        if finding is not None and _finding_leads(finding, best, w):
            fix = _first_fix(str(finding["fix"]))
            cost = finding.get("cost_us") or 0.0
            size = f"up to {duration(cost)} a step"
            if finding.get("script_pct") is not None:
                # Time outside the steps, said as the script's share it is, not spread over
                # the steps (a quickstart's data made before training, 7.1 s once: "up to
                # 3.78 ms a step").
                size = f"{float(finding['script_pct']):.0f}% of the script's time"
            gain = _mean_gain(best, w)
            if gain is not None and gain < MEAN_GAIN_MIN:
                # Its saving is lost among the slow steps the finding names (a tabular fit's
                # epoch boundaries, 96% of its time: steps_per_execution=4 read "1.9x faster
                # on the median step (1.0x on the mean step)" in the verdict; no gain without
                # the profiler): the finding's fix alone.
                return f"{head}; the top fix, predicted from this run's figures: {fix} ({size})."
            return (
                f"{head}; the top fix, predicted from this run's figures: {fix} ({size}); "
                f"another fix, measured on your loop: {measured}."
            )
        larger = _larger_fix(fixes, best)
        if larger is not None:
            iv = larger.get("interval_us") or (larger["measured_saving_us"],) * 2
            return (
                f"{head}; the top fix, measured on your loop: {measured}; another, less sure "
                f"but larger: {larger['title']}, {duration(larger['measured_saving_us'])} less "
                f"per step{_speed(larger, w)} (95%: {duration(iv[0])} to {duration(iv[1])})."
            )
        return f"{head}; the top fix, measured on your loop: {measured}."
    if finding is not None:
        fix = str(finding["fix"]).split(". ")[0].rstrip(".")
        if not str(finding.get("rule") or "").startswith("compute_bound"):
            fix = _first_fix(str(finding["fix"]))
        if fix and str(finding.get("rule") or "").startswith("compute_bound"):
            # Not a fix: what a step of kernels leaves (its alternatives are unmeasured).
            return f"{head}; {fix[0].lower()}{fix[1:]}."
        if fix:
            return f"{head}; the top fix, predicted from this run's figures: {fix}."
        return f"{head}; the costliest finding: {str(finding['message']).split(': ', 1)[-1]}"
    if noise:
        return f"{head}; no other finding fired."
    compute = next((r for r in card["split"] if r["category"] == "compute"), None)
    if compute is None or not compute["measured"]:
        return f"{head}; no fix found (compute was not measured)."
    fw = next(
        (p.get("data") or {} for p in w.get("phases") or [] if p.get("name") == "framework"), {}
    )
    peak = ""
    flops, gpeak = fw.get("flops_per_step"), fw.get("peak_gflops")
    if flops and gpeak and compute["us"]:
        peak = (
            f" at {100 * flops / compute['us'] / 1e3 / gpeak:.0f}% of this machine's measured peak"
        )
    return f"{head}; no fix found: compute is {_pct(compute)} of the step{peak}."


def _script_lead(card: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The finding about time outside the steps holding ``SCRIPT_HOLD`` of the script's time or
    more (the largest), with a fix and not refuted, else None."""
    held = [
        f
        for f in card["findings"]
        if f.get("lead")
        and f.get("fix")
        and not f.get("refuted")
        and float(f.get("script_pct") or 0.0) >= 100 * SCRIPT_HOLD
    ]
    return max(held, key=lambda f: float(f["script_pct"]), default=None)


def _slow_cause(card: Mapping[str, Any], mean_us: float) -> str:
    """'<what> is N% of the loop's time' for the finding of SLOW_CAUSES holding SLOW_HOLD of
    the mean step or more, else ''."""
    for f in card["findings"]:
        what, cost = SLOW_CAUSES.get(str(f.get("rule") or "")), f.get("cost_us")
        if what and cost and mean_us > 0 and cost >= SLOW_HOLD * mean_us:
            return f"{what} is {100 * min(cost / mean_us, 1.0):.0f}% of the loop's time"
    return ""


def _larger_fix(
    fixes: list[Mapping[str, Any]], best: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """A measured fix whose saving is at least ``LARGER_FIX`` times the top one's, less sure
    (the top is ranked by what it is sure of): said beside it. A multi-input Keras model's
    verdict quoted steps_per_execution=4 at 1.80 ms (1.1x) alone, its XLA what-if 5.31 ms (95%:
    0.2-10.4 ms) in the list below; without the profiler XLA saved 13.3 ms, 4 batches a call 1.9."""
    others = [
        x
        for x in fixes
        if x is not best
        and float(x["measured_saving_us"]) >= LARGER_FIX * float(best["measured_saving_us"])
    ]
    return max(others, key=lambda x: float(x["measured_saving_us"]), default=None)


#: How much larger another measured fix's saving must be to be said beside the top one.
LARGER_FIX = 2.0


def _first_fix(text: str) -> str:
    """A finding's fix for the verdict: its first sentence, and of a list of fixes (clauses
    joined by "; " outside brackets) the first, with how many more its finding names (a fit's
    epoch-boundary fix, five clauses, made a 100-word verdict)."""
    sentence = text.split(". ")[0].rstrip(".")
    clauses, depth, start = [], 0, 0
    for i, ch in enumerate(sentence):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0 and sentence.startswith("; ", i):
            clauses.append(sentence[start:i])
            start = i + 2
    clauses.append(sentence[start:])
    if len(clauses) == 1:
        return sentence
    more = len(clauses) - 1
    return f"{clauses[0]} (and {more} more {'fix' if more == 1 else 'fixes'} in its finding)"


#: A what-if is a fix when it saves at least this share of the step as written: a BLAS
#: setting measured 4.4 µs less on a 982 µs step (0.5%) read "another fix ... 1.0× faster"
#: on a quiet run and inconclusive beside a busy process.
MIN_FIX_SHARE = 0.02


def _saves(x: Mapping[str, Any]) -> bool:
    return x.get("verdict") in ("holds", "misses", "not predicted") and not _too_small(x)


def _not_applied(x: Mapping[str, Any]) -> bool:
    """A what-if that could not be applied, or measured nothing (its row says which)."""
    return x.get("status") in ("failed", "partial") and x.get("measured_saving_us") is None


def _too_small(x: Mapping[str, Any]) -> bool:
    """A measured saving under ``MIN_FIX_SHARE`` of the step as written."""
    m, base = x.get("measured_saving_us"), x.get("baseline_us")
    if m is None or not base:
        return False
    return bool(0 <= m < MIN_FIX_SHARE * base)


def _runs_note(script: Mapping[str, Any], phases: list[Mapping[str, Any]]) -> str:
    """When the script ran more than once for the phases it missed: which phases each run
    measured, and the wall time of all of them."""
    runs = script.get("runs") or []
    if len(runs) < 2:
        return ""
    by_runs: dict[tuple[int, ...], list[str]] = {}
    for p in phases:
        if p.get("status") == "ok":
            by_runs.setdefault(_phase_runs(p), []).append(str(p["name"]))
    parts = [f"{', '.join(names)} in {_runs_words(r)}" for r, names in sorted(by_runs.items())]
    spent = sum(float(x.get("wall_s") or 0.0) for x in runs)
    return (
        f"Measured over {len(runs)} runs of the script ({spent:,.1f} s in all, the phases each "
        f"missed run again): {'; '.join(parts)}."
    )


def _phase_runs(p: Mapping[str, Any]) -> tuple[int, ...]:
    """The runs a phase's measurements come from: its own, and those whose artefacts were
    added to it (``repeat-N/``: a thin sampled phase adds later runs' samples)."""
    runs = {int(p.get("repeat") or 0)}
    for a in p.get("artefacts") or ():
        head = str(a).split("/", 1)[0]
        if head.startswith("repeat-") and head[7:].isdigit():
            runs.add(int(head[7:]))
    # A what-if phase writes no files: the what-ifs a later run added say so in its reason
    # (``processes.launch._whatifs_merged``).
    runs.update(int(r) for r in re.findall(r"in repeat (\d+) of the script", p.get("reason") or ""))
    return tuple(sorted(runs))


def _runs_words(runs: tuple[int, ...]) -> str:
    """``the first``, ``run 3``, ``runs 1, 3 and 4`` (runs counted from 1)."""
    if runs == (0,):
        return "the first"
    names = [str(r + 1) for r in runs]
    if len(names) == 1:
        return f"run {names[0]}"
    return f"runs {', '.join(names[:-1])} and {names[-1]}"


#: A block of steps this many times slower or faster than the timed window gets a note.
BLOCK_RATIO = 1.5
#: A finding's fix line where it offers none (its cause was not seen in the run's figures).
NO_FIX = "none offered: this run's figures do not show what causes it"


def _blocks_note(script: Mapping[str, Any], median_us: float | None) -> str:
    """When the run's last block of steps (an epoch of fit, a tenth of the run) ran at another
    speed than the timed window: the windows measured steps unlike the rest of the run."""
    every = script.get("blocks") or []
    # Blocks inside an instrumented window run slower for it: only the others compare.
    rows = [every[0], *(r for r in every[1:] if not r.get("instrumented"))] if every else []
    if len(rows) < 2 or not median_us:
        return ""
    last = rows[-1]
    ratio = last["median_us"] / median_us
    if 1 / BLOCK_RATIO < ratio < BLOCK_RATIO:
        return ""
    unit = last.get("unit")  # older runs: an epoch wherever fit said its length
    if unit is None:
        unit = "epoch" if (script.get("fit") or {}).get("steps_per_epoch") else "tenth"
    what = "epoch" if unit == "epoch" else "tenth of the run"
    speed = f"{1 / ratio:.1f}× faster" if ratio < 1 else f"{ratio:.1f}× slower"
    first = rows[0]
    return (
        f"The steps changed speed during the run: the last uninstrumented {what}'s (steps "
        f"{last['from_step']:,}–{last['to_step']:,}) took a median {duration(last['median_us'])}, "
        f"{speed} than the timed window's {duration(median_us)} (the first {what}'s: "
        f"{duration(first['median_us'])}); the findings below describe the timed steps."
    )


def _drift_note(d: Mapping[str, Any] | None, blocks: Any = None) -> str:
    """When the machine's speed varied beyond its blocks' own noise during the run: by how
    much, between which step times, and how wide it makes the shares. Where the run's blocks'
    CPU time a step varied about as much as their wall time, the steps' work varied, not only
    the machine's speed, and it says so."""
    if not d or not d.get("large"):
        return ""
    # The run of the script the ratio comes from (runs are compared within themselves).
    medians = [b["median_us"] for b in d.get("blocks") or [] if b["repeat"] == d.get("repeat", 0)]
    if len(medians) < 2:
        return ""
    lo, hi = d["interval"]
    pts = d.get("share_pts")
    # Under half a point rounds to "±0 points", read as no uncertainty at all.
    widened = (
        f": shares are ±{max(round(pts), 1)} points for it"
        if pts and pts >= 0.5
        else ": the shares move by under a point for it"
        if pts
        else ""
    )
    # A few blocks far apart give a bootstrap upper end in the thousands of percent: said as
    # a lower bound only.
    span = (
        f"95%: {100 * (lo - 1):.0f}–{100 * (hi - 1):.0f}%"
        if hi - 1 <= 2
        else f"95%: {100 * (lo - 1):.0f}% or more"
    )
    if round(100 * (hi - 1)) == round(100 * (lo - 1)):
        # Two blocks give no spread to bootstrap: "137% (95%: 137–137%)" read as certain.
        span = f"from {len(medians)} blocks, too few for an interval"
        # Nor then for the shares: no figure for how far it moves them.
        widened = ": how far it moves the shares is not measured"
    work = _work_varied(blocks)
    if work:
        return (
            f"The steps' time varied by {100 * (d['ratio'] - 1):.0f}% during the run ({span}; "
            f"uninstrumented blocks {duration(min(medians))}–{duration(max(medians))} a step), "
            f"{work}{widened}."
        )
    return (
        f"The machine's speed varied by {100 * (d['ratio'] - 1):.0f}% during the run "
        f"({span}; uninstrumented blocks "
        f"{duration(min(medians))}–{duration(max(medians))} a step){widened}."
    )


def _work_varied(blocks: Any) -> str:
    """Words for the run's blocks (``script.blocks``) whose CPU time a step varied at least
    ``WORK_VARIED`` of as much as their wall time (by their largest over their smallest), and
    by a factor of 2 or more: '' otherwise. TensorFlow's actor-critic tutorial: its episodes
    grow from ~10 to 500 steps as it learns, its blocks' CPU a step 13-113 ms with their wall
    16-104 ms, and "the machine's speed varied by 883%" was said of it. Blocks a phase
    instrumented are left out: the instruments' own CPU is not the steps' work (word2vec's TF1
    loop: its first tenth, every phase in it, 4.33 ms of CPU a step, the others 2.14-3.45 ms,
    read "an episode or a sequence that grows" for the same work every step)."""
    plain = [b for b in blocks or [] if not b.get("instrumented")]
    rows = [
        (float(b["median_us"]), float(b["cpu_us"]))
        for b in plain
        if b.get("median_us") and b.get("cpu_us")
    ]
    if len(rows) < 3:
        return ""
    paired = [
        (float(b["cpu_us"]), float(b["others_cores"]))
        for b in plain
        if b.get("cpu_us") and b.get("others_cores") is not None
    ]
    if len(paired) >= 3 and _rank_corr(paired) >= WORK_OTHERS_CORR:
        # The CPU time rose with the other processes' load: threads spinning while they wait
        # for a core (BLAS's) raise it with the wall time without more work.
        return ""
    walls, cpus = [r[0] for r in rows], [r[1] for r in rows]
    wall_x, cpu_x = max(walls) / min(walls), max(cpus) / min(cpus)
    if cpu_x < 2 or cpu_x < WORK_VARIED * wall_x:
        return ""
    if abs(_rank_corr(list(enumerate(cpus)))) < WORK_TREND_CORR:
        # Work that varies does so with the run (episodes that grow as a policy learns, a
        # later model): CPU a step up and down from block to block is threads spinning as
        # they wait (a cs231n spiral net's two BLAS threads beside other work: 430 µs to
        # 2.23 ms a step, in no order, for the same arithmetic every step).
        return ""
    return (
        f"the steps' work with it: their CPU time a step ran from {duration(min(cpus))} to "
        f"{duration(max(cpus))} over the run (an episode or a sequence that grows, a model that "
        "changes), not the machine's speed alone"
    )


#: A run's blocks' CPU a step varying this share of their wall time's spread, or more: work.
WORK_VARIED = 0.5
#: ... unless the blocks' CPU a step and the other processes' load rank together this much.
WORK_OTHERS_CORR = 0.5
#: ... and only where the blocks' CPU a step ranks with their order in the run this much
#: (either way).
WORK_TREND_CORR = 0.5


def _rank_corr(pairs: list[tuple[float, float]]) -> float:
    """Spearman's rank correlation of the pairs (ties share their mean rank); 0 where either
    side is constant."""

    def ranks(xs: list[float]) -> list[float]:
        return [sum(1 for y in xs if y < x) + (sum(1 for y in xs if y == x) - 1) / 2 for x in xs]

    a, b = ranks([p[0] for p in pairs]), ranks([p[1] for p in pairs])
    n = len(pairs)
    ma, mb = sum(a) / n, sum(b) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True))
    va = sum((x - ma) ** 2 for x in a)
    vb = sum((y - mb) ** 2 for y in b)
    return cov / (va * vb) ** 0.5 if va and vb else 0.0


def _whatif_row(x: Mapping[str, Any]) -> dict[str, Any]:
    """One what-if in words: what it changed, what it saved, against the prediction."""
    m, p, res = x["measured_saving_us"], x["predicted_saving_us"], x["resolution_us"]
    share = x.get("removes_share", 1.0)
    removes = ", ".join(x["removes"])
    if share < 1:
        removes = f"{share:.0%} of {removes}"
    if x["status"] == "partial" and m is None:
        text = "not measured: the script ended during its blocks"
    elif x["status"] == "failed" or m is None:
        text = f"could not be applied: {x['error'] or 'no steps measured'}"
    elif x["verdict"] in ("inconclusive", "slower"):
        iv = x.get("interval_us")
        span = (
            f"the saving's 95% interval runs from {_signed(iv[0])} to {_signed(iv[1])} per step"
            if iv
            else "one pair of blocks: no interval"
        )
        if x["verdict"] == "slower" and iv and iv[1] >= 0:
            # Slower in every pair, by 1.5x or more, where one pair's outlier block (a
            # compile of seconds) stretched the interval over zero.
            text = (
                f"measured: slower on this loop in each of its {x['pairs']} pairs of blocks "
                f"({duration(x['baseline_us'])} → {duration(x['variant_us'])}, the blocks' "
                f"{'means' if x.get('block_mean') else 'medians'}): not a fix on this loop"
            )
        elif x["verdict"] == "slower":
            text = (
                f"measured: slower on this loop ({duration(abs(m))} more per step; "
                f"{duration(x['baseline_us'])} → {duration(x['variant_us'])}; {span}): "
                "not a fix on this loop"
            )
        else:
            # The interval first: the blocks' medians alone ("72.62 ms → 12.20 ms") read as a
            # 6x win where the interval ran from -43 ms to +102 ms.
            spans = f"{span}, which spans no change" if iv else "one pair of blocks, no interval"
            text = (
                f"inconclusive: {spans} (blocks' {'means' if x.get('block_mean') else 'medians'}: "
                f"{duration(x['baseline_us'])} as written, {duration(x['variant_us'])} with it): "
                "not shown to be a fix on this loop"
            )
    else:
        speed = (
            f", {x['baseline_us'] / x['variant_us']:.1f}× faster"
            if x["variant_us"] and x["baseline_us"] and m > 0
            else ""
        )
        iv = x.get("interval_us")
        spread = (
            f" (95%: {duration(iv[0])}–{duration(iv[1])})"
            if iv
            else (f" ±{duration(res)}" if res is not None else "")
        )
        small = (
            f" (under {100 * MIN_FIX_SHARE:.0f}% of the step: too little to count as a fix)"
            if _too_small(x)
            else ""
        )
        text = (
            f"{duration(abs(m))}{spread} "
            f"{'less' if m >= 0 else 'more'} per step{small} ({duration(x['baseline_us'])} → "
            f"{duration(x['variant_us'])}, the blocks' "
            # The saving is the pairs' (each variant block against the blocks as written beside
            # it), the figures the blocks' own: "3.10 ms less per step (6.67 ms -> 5.37 ms)" read
            # as a sum that does not add up.
            f"{'means' if x.get('block_mean') else 'medians'}{speed}); "
            + (
                f"predicted {duration(p)} ({100 * (x.get('predicted_share') or 0):.0f}% of the "
                f"step: {removes}): "
                + verdict_words(
                    x["verdict"], x.get("measured_saving_us"), p, x.get("id") in LOWER_BOUND
                )
                if p is not None
                else "not predicted (what it removes spans the split's categories)"
                if not x["removes"]
                else "not predicted (a category it removes was not measured)"
            )
        )
    kept = "results kept" if x["keeps_results"] else "results may change"
    check = x.get("results_check") or ""
    checked = f"checked: {check}" if check else "not compared on this loop"
    return {
        "title": x["title"],
        "text": text,
        "verdict": x["verdict"],
        "results": f"{kept}: {x['results_note']}; {checked}",
        "blocks": f"{x['pairs']} pair{'s' if x['pairs'] != 1 else ''} of "
        f"{x['block_steps']}-step blocks",
    }


def _signed(us: float) -> str:
    return f"{'-' if us < 0 else '+'}{duration(abs(us))}"


def _biggest(split: list[dict[str, Any]]) -> str:
    measured = [r for r in split if r["measured"] and r["category"] != "other" and r["us"]]
    if not measured:
        return "No phase measured what the step is made of."
    top = measured[0]
    return f"Most of it is {top['label']}: {duration(top['us'])} ({_pct(top)})."


def focus(summary: Mapping[str, Any], answered: bool) -> list[dict[str, Any]]:
    """The first-screen cards (see the module docstring); ``answered``: the case study's
    questions are answered on this page already (then only scripts get a card)."""
    findings = list(summary.get("diagnoses") or [])
    out = []
    for w in summary.get("workloads", []):
        script = w.get("script") or {}
        if answered and not script:
            continue
        att = w.get("attribution")
        card: dict[str, Any] = {
            "label": w["label"],
            "slug": w["slug"],
            "status": w["status"],
            "message": script.get("message", ""),
            "verdict": "",
            "missed": list(script.get("missed") or []),
            "sentence": "",
            "budget": _budget(
                script,
                w.get("before_steps"),
                (w.get("step_time") or {}).get("median_us"),
                w.get("one_off"),
            ),
            "runs": _runs_note(script, w.get("phases") or []),
            "samples": _samples_note(w.get("phases") or []),
            "memory": memory_line(w),
            "drift": _drift_note(w.get("drift"), script.get("blocks")),
            "blocks": "",
            "biggest": "",
            "split": [],
            "overhead_share": None,
            "findings": [],
            # Fixes: what-ifs that measured a saving; the rest (no measurable change, slower,
            # failed) are said apart, never under what would fix it.
            "whatifs": [_whatif_row(x) for x in w.get("whatif") or [] if _saves(x)],
            "not_fixes": [
                _whatif_row(x)
                for x in w.get("whatif") or []
                if not _saves(x) and not _not_applied(x)
            ],
            # Tried and not measured (it failed, or the script ended in its blocks): not "not
            # a fix" (a numpy net's float32, 2x faster without the profiler, read as measured
            # and not shown to be a fix, where it could not be applied).
            "not_measured": [_whatif_row(x) for x in w.get("whatif") or [] if _not_applied(x)],
        }
        if att and w.get("step_time"):
            card["sentence"] = _sentence(w)
            card["blocks"] = _blocks_note(script, (w.get("step_time") or {}).get("median_us"))
            card["split"] = _split(att, (w.get("distribution") or {}).get("wait_share"))
            card["biggest"] = _biggest(card["split"])
            card["overhead_share"] = att.get("overhead_share")
        card["findings"] = [
            {
                "message": d["message"],
                "fix": d["fix"],
                # What the terminal and the report print under it: a finding whose cause was
                # not seen offers no fix, and says so (a blank "fix:" line read as a bug).
                "fix_text": d["fix"] or NO_FIX,
                "cost_us": d.get("cost_us"),
                "rule": d.get("rule"),
                "refuted": bool(d.get("refuted")),
                "script_pct": d.get("script_pct"),
                "lead": d.get("lead") or "",
            }
            for d in findings
            if d.get("name") == w["name"]
        ][:TOP_FINDINGS]
        noise = _within_noise(card) if card["split"] else ""
        if noise:
            # The verdict says the bound is within the noise: the bound finding says so too
            # (a text classifier beside a busy process: "within the noise" over "1. ... is
            # compute-bound ... little overhead to remove").
            lo, hi = next(r["interval"] for r in card["split"] if r["category"] == "compute")
            for d in card["findings"]:
                if str(d.get("rule") or "").startswith(BOUND_RULES):
                    d["message"] = (
                        f"{d['message']} On this run {noise}: the compute share's 95% "
                        f"interval is {100 * lo:.0f}–{100 * hi:.0f}%."
                    )
        card["verdict"] = _verdict(card, w) if card["split"] else ""
        card["verdict_rule"] = verdict_rule(card, w) if card["split"] else ""
        out.append(card)
    return out
