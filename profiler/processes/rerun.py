"""Runs of a script again for the phases it missed: the budget, and what the run says of it.

Place in the pipeline: the runner (``profiler.processes.launch.run_workload_process``) asks
these pure functions whether another run of a user's script fits, what to print when it starts
one, and what the script's record says at the end. A short script ends before every phase got
its window; with no options it is run again, the missing phases fitted into the steps the first
run counted, as long as the whole profiling stays within a budget that grows with the script:

* under ``SHORT_S`` (30 s) of its own time: at most 3x that time + 20 s in all;
* from ``SHORT_S`` on: 1.5x + 15 s, but never less than a script just under ``SHORT_S`` gets
  (110 s: a 35 s script of 18 long steps had no room for the second run its framework phase
  needed, and its answer was "100% unexplained"); beyond ~63 s that leaves no room for a
  second run: the phases that did not fit are named, with the ``--repeat`` that would measure
  them.

The script's own time is estimated from its first run: the time before its first step and after
its last as measured, and its steps at the uninstrumented (timed) window's mean step, since
the instrumented windows ran slower than the script alone would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from profiler.model import OK, WorkloadTrace

#: Scripts shorter than this (s, alone) get the generous budget.
SHORT_S = 30.0
#: The budget's factor and constant (s) for a short script and for a longer one.
SHORT_BUDGET = (3.0, 20.0)
LONG_BUDGET = (1.5, 15.0)
#: At most this many runs of a script in all, whatever the budget.
MAX_RUNS = 5
#: The phases that attribute a step on their own beside the timed window (the sampled phase:
#: every category but the kernels'; framework: the kernels). A run for one of them still missing
#: may go past the budget by ``CORE_EXTRA_S``: without them most of the step is "not measured".
#: A 331-step TF1 course script beside other work (4.4 s alone) took 8.7 s and 12.3 s a run;
#: its 33 s budget held the sampled phase only, and its answer read "83% of the step is
#: unexplained ... the framework phase (kernel time) would measure the rest".
CORE = ("sampled", "framework")
CORE_EXTRA_S = 20.0
#: And for a script of up to ``CORE_LONGEST_S`` alone, a run for them fits while the whole stays
#: within ``CORE_FACTOR`` times the script's time + ``CORE_EXTRA_S``: the 1.5x + 15 s of a
#: longer script leaves no room for a second run. TensorFlow's transfer-learning tutorial
#: (72.6 s alone, 16 fit batches of ~0.5 s) took 82 s profiled; its second run did not fit the
#: 144 s, and its answer read "85% of the step is unexplained". 3.5: TF's RNN text classifier
#: (59 s alone, 15 steps of 1.2 s beside other work) took 103 s profiled, a second run for its
#: kernels expected as long did not fit 2.5x + 20 s (169 s), and its answer read "99% of the
#: step is unexplained ... no fix found".
CORE_FACTOR = 3.5
CORE_LONGEST_S = 120.0


def alone_s(trace: WorkloadTrace) -> float | None:
    """The script's own time without the profiler, estimated from its first run (s); None
    when the run recorded no time."""
    script = trace.script
    t = script.get("time") or {}
    steps = int(script.get("steps") or 0)
    wall = float(script.get("wall_s") or 0.0) or None
    timed = next(
        (p for p in trace.phases if p.name == "timed" and p.status == OK and p.window), None
    )
    if t and steps and timed is not None and timed.window is not None:
        durations = list(timed.window.durations_ns())
        if durations:
            # The mean, not the median: a checkpoint every 10th step (2 ms against 14 µs)
            # makes the steps' time 15x what the median step says.
            step_s = sum(durations) / len(durations) / 1e9
            est = float(t["before_s"]) + steps * step_s + float(t["after_s"])
            # Never more than the instrumented run took: the text generation tutorial's 78
            # fit batches of 0.48 s were followed by 300 one-character calls of 0.9 ms, steps
            # too, and read "the script's 188.1 s" where it ran 45 s (82 s profiled); its
            # budget let the runs take 228 s.
            return min(est, wall) if wall else est
    return wall


def same_steps(trace: WorkloadTrace) -> dict[str, Any]:
    """What a later run is told so that its steps are the first run's from its start: the loop
    the first run chose as its steps (``--step-line`` on it: no second search, whose watching
    took the loop's first iterations), and the steps to fit into (those the first run counted,
    and the iterations it watched before it chose)."""
    script = trace.script
    steps = int(script.get("steps") or 0)
    auto = script.get("auto_step") or {}
    line = auto.get("chosen_line")
    if not line or script.get("marks") or auto.get("calls"):
        return {"expected_steps": steps} if steps else {}
    return _loop_option(auto, line, str(auto.get("chosen_file") or ""), steps)


def restart(trace: WorkloadTrace) -> dict[str, Any]:
    """For a first run that detected no steps but watched a loop that ended before it was
    chosen (its iterations too short and too few to fill the watching time): the options of a
    run that takes that loop's iterations as its steps, from its first (``--step-line`` on
    it), and measures every phase; else ``{}``."""
    script = trace.script
    auto = script.get("auto_step") or {}
    line = auto.get("candidate_line")
    if int(script.get("steps") or 0) or script.get("marks") or not line:
        return {}
    return _loop_option(auto, line, str(auto.get("candidate_file") or ""), 0)


def _loop_option(auto: dict[str, Any], line: Any, file: str, steps: int) -> dict[str, Any]:
    """The option that takes the loop at ``line`` of ``file`` ("": the script) as the steps
    (``--step-line``, or ``step_loop`` for a module of the script's folder, which has no
    ``--step-line``), and the steps to fit: ``steps`` and the loop's iterations watched."""
    watched = sum(
        int(x.get("iterations") or 0)
        for x in auto.get("loops") or []
        if x.get("line") == line and (x.get("file") or "") == file
    )
    where = {"step_loop": [file, int(line)]} if file else {"step_line": int(line)}
    return {**where, "expected_steps": steps + watched}


def restart_line(
    name: str, line: int | str, iterations: int, spent_ns: int, budget: float | None
) -> str:
    """The one line printed when the script starts again because its steps were not found."""
    where = f"(run 2; {spent_ns / 1e9:,.0f} s so far"
    where += f" of a {budget:,.0f} s budget)" if budget is not None else ")"
    return (
        f"profiling {name} again: its loop at line {line} ended ({iterations:,} iterations) "
        f"before it was chosen as the steps; this run takes its iterations as the steps {where}"
    )


def budget_s(alone: float) -> float:
    """The whole profiling's wall-time budget for a script of ``alone`` seconds."""
    factor, extra = SHORT_BUDGET if alone < SHORT_S else LONG_BUDGET
    floor = SHORT_BUDGET[0] * SHORT_S + SHORT_BUDGET[1] if alone >= SHORT_S else 0.0
    return max(factor * alone + extra, floor)


#: A run measuring only the what-ifs runs the script's own steps and the what-ifs' blocks, none
#: of the instrumented phases: at most this factor of the script's time alone, plus
#: ``WHATIF_RUN_S`` (an LSTM fit of 13.6 s alone: its first run 31.5 s, its what-ifs' run 21.2 s;
#: expected as long as the first, it stopped 2 s short of its 61 s budget).
WHATIF_RUN_FACTOR = 1.6
WHATIF_RUN_S = 5.0


def expected_ns(missing: Sequence[str], last_ns: int, alone: float | None) -> int:
    """How long the next run is expected to take (ns): as long as the last, or for a run of the
    what-ifs alone, at most ``WHATIF_RUN_FACTOR`` times the script's own time plus
    ``WHATIF_RUN_S``."""
    if alone is None or list(missing) != ["whatif"]:
        return last_ns
    return min(last_ns, int((WHATIF_RUN_FACTOR * alone + WHATIF_RUN_S) * 1e9))


def another(
    given: int | None, done: int, spent_ns: int, next_ns: int, budget: float | None
) -> bool:
    """Whether to run the script once more: ``given`` runs more at most (``--repeat N``), else
    while the next run (expected to take ``next_ns``, as the last did) keeps the whole within
    the budget, and at most ``MAX_RUNS`` runs in all."""
    if given is not None:
        return done < given
    if budget is None or done >= MAX_RUNS - 1:
        return False
    return (spent_ns + next_ns) / 1e9 <= budget


def budget_for(
    missing: Sequence[str], budget: float | None, alone: float | None = None
) -> float | None:
    """The budget a run for ``missing`` is held to: while a phase of ``CORE`` is among them,
    ``CORE_EXTRA_S`` more, and for a script of up to ``CORE_LONGEST_S`` alone at least
    ``CORE_FACTOR`` times its time + ``CORE_EXTRA_S``."""
    if budget is None or not any(m in CORE for m in missing):
        return budget
    core = budget + CORE_EXTRA_S
    if alone is not None and alone <= CORE_LONGEST_S:
        core = max(core, CORE_FACTOR * alone + CORE_EXTRA_S)
    return core


def _budget_words(alone: float | None, budget: float | None) -> str:
    if alone is None or budget is None:
        return ""
    factor, extra = SHORT_BUDGET if alone < SHORT_S else LONG_BUDGET
    if budget > factor * alone + extra + 0.5:
        return f"{budget:,.0f} s: the least a script of {SHORT_S:g} s or more gets"
    return f"{budget:,.0f} s: {factor:g}x the script's {alone:,.1f} s + {extra:g} s"


def _them(phases: Sequence[str]) -> str:
    return "them" if len(phases) > 1 else "it"


def again_line(
    name: str,
    missing: Sequence[str],
    expected_steps: int,
    repeat: int,
    spent_ns: int,
    budget: float | None,
    thin: Sequence[str] = (),
) -> str:
    """The one line printed when the script starts again, and why (``thin``: phases measured
    on too few steps or samples to be right, which this run adds to)."""
    none = [m for m in missing if m not in thin]
    said = []
    if none:
        said.append(
            f"{' and '.join(none)} got no steps in its {expected_steps:,} steps (it ended first)"
        )
    if thin:
        said.append(f"{' and '.join(thin)} got {_few(thin)} to be right")
    where = f"(run {repeat + 1}; {spent_ns / 1e9:,.0f} s so far"
    if budget is not None and any(m in CORE for m in missing):
        where += (
            f" of a {budget:,.0f} s budget, more than the other phases get while the kernels "
            "or the samples are missing)"
        )
    elif budget is not None:
        where += f" of a {budget:,.0f} s budget)"
    else:
        where += ")"
    return (
        f"profiling {name} again: {'; '.join(said)}; this run fits "
        f"{_them(missing)} into those steps {where}"
    )


def _few(thin: Sequence[str]) -> str:
    """What a thin phase got too little of: samples for the sampled phase, else steps."""
    return "too few samples" if list(thin) == ["sampled"] else "too few steps or samples"


def message(
    base: str,
    missed: Sequence[str],
    thin: Sequence[str],
    alone: float | None,
    last_wall_ns: int,
    budget: float | None,
    no_room: Sequence[str] = (),
) -> str:
    """The script's message at the end: how it ended, and the phases still missing (``thin``:
    measured, on fewer steps than they need to be right) with the ``--repeat`` that would
    measure them (a re-run measures every phase it still misses). ``no_room``: the phases a
    run of their own still measured nothing of: another run would not either (word2vec's 60
    steps, 3 a fit epoch, left no room for its what-ifs in a run of theirs, and the message
    said "--repeat 1 measures it")."""
    if not missed:
        return base
    if no_room and set(missed) <= set(no_room):
        tail = (
            f"{' and '.join(missed)} got no steps, even in a run of the script measuring only "
            f"{_them(missed)}: the script's steps leave no room for {_them(missed)} (a longer "
            "run of the script, more steps or epochs, would)"
        )
        return f"{base}; {tail}" if base else tail
    words = _budget_words(alone, budget)
    if words and any(m in CORE for m in missed):
        more_s = (budget_for(CORE, budget, alone) or 0.0) - (budget or 0.0)
        words += f", and {more_s:,.0f} s more while the kernels or the samples are missing"
    if words and (last_wall_ns / 1e9) > 0:
        more = (
            f"--repeat 1 measures {_them(missed)} in another run of the script (about "
            f"{last_wall_ns / 1e9:,.0f} s more, past this run's budget for all its runs, {words})"
        )
    else:
        more = f"--repeat 1 measures {_them(missed)} in another run of the script"
    none = [m for m in missed if m not in thin]
    said = []
    if none:
        said.append(f"{' and '.join(none)} got no steps")
    if thin:
        said.append(f"{' and '.join(thin)} got {_few(thin)} to be right")
    tail = f"{'; '.join(said)}: {more}"
    return f"{base}; {tail}" if base else tail


def record(
    given: int | None, alone: float | None, budget: float | None, spent_ns: int
) -> dict[str, Any]:
    """The summary's ``script.rerun``: how the number of runs was chosen, and the figures."""
    return {
        "mode": "auto" if given is None else "given",
        "repeat": given,
        "alone_s": round(alone, 3) if alone is not None else None,
        "budget_s": round(budget, 3) if budget is not None and given is None else None,
        "spent_s": round(spent_ns / 1e9, 3),
    }
