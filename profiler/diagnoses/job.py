"""Diagnoses of a multi-worker job: the straggler the others wait for, and an all-reduce that
costs a large share of every worker's step.

Place in the pipeline: analysis (pure), part of the performance diagnoses
(``profiler.diagnoses.performance.diagnose``), over ``profiler.analysis.job.JobAnalysis``.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.job import REASON_WORDS, JobAnalysis
from profiler.diagnoses.engine import Diagnosis, Rule, evaluate

#: A worker whose communication (outside compute) is this share of its step is waiting or
#: transferring for much of it.
COMMUNICATION_PCT = 20

#: What to do about a straggler, by its reason.
STRAGGLER_FIX = {
    "feed_fetch": "Give worker {straggler} a faster input: its pipeline (or its storage) is "
    "slower than the others'. Parallel maps and a prefetch (num_parallel_calls=tf.data.AUTOTUNE, "
    ".prefetch(tf.data.AUTOTUNE)), or a shard of the data that is as cheap to read as theirs.",
    "compute": "Worker {straggler}'s kernels take longer than the others': a slower or busier "
    "machine, or a larger share of the batch. Balance the per-worker batch, or move the job off "
    "the contended host.",
    "python": "Worker {straggler} runs more Python around each step than the others (a callback, "
    "logging, a sleep, work only this task does): move it out of the step, or do it on every "
    "worker at once, less often.",
    "dispatch": "Worker {straggler} spends longer in the framework's per-call and per-op work: "
    "run several steps per call (steps_per_execution, a loop inside tf.function).",
    "tracing": "Worker {straggler} retraces its step function: give it a stable input signature.",
    "other": "Profile worker {straggler} with its phases (run --workers on one machine, or run "
    "its script under the profiler) to tell its Python from its input.",
}


def job_facts(job: JobAnalysis) -> list[dict[str, Any]]:
    """Facts of the job (``subject`` ``job``) and of each of its workers (``job_worker``)."""
    out: list[dict[str, Any]] = []
    if job.straggler is not None:
        w = next(x for x in job.workers if x.index == job.straggler)
        others = [x for x in job.workers if x.index != job.straggler]
        waits = [x.communication_ns for x in others if x.communication_ns is not None]
        f: dict[str, Any] = {
            "subject": "job",
            "name": w.workload,
            "straggler": job.straggler,
            "workers": len(job.workers),
            "excess_us": (job.excess_ns or 0) / 1e3,
            "step_us": (w.step_ns or 0) / 1e3,
            "steps": len(job.steps),
            "straggler_steps": w.straggler_steps,
            "reason": job.reason,
        }
        f["excess_pct"] = 100 * f["excess_us"] / f["step_us"] if f["step_us"] else 0.0
        f["others_wait_us"] = (sum(waits) / len(waits) / 1e3) if waits else None
        if job.reason is not None:
            f["reason_words"] = REASON_WORDS[job.reason]
            f["reason_us"] = (job.reason_ns or 0) / 1e3
            f["fix"] = STRAGGLER_FIX[job.reason].format(straggler=job.straggler)
        out.append(f)
    for w in job.workers:
        if w.communication_ns is None or not w.step_ns:
            continue
        g: dict[str, Any] = {
            "subject": "job_worker",
            "name": w.workload,
            "index": w.index,
            "communication_us": w.communication_ns / 1e3,
            "step_us": w.step_ns / 1e3,
            "straggler": job.straggler,
            "overlap_pct": None if w.overlap_share is None else 100 * w.overlap_share,
        }
        g["communication_pct"] = 100 * g["communication_us"] / g["step_us"]
        out.append(g)
    return out


RULES = (
    Rule(
        id="straggler",
        subject="job",
        needs=(
            "name",
            "straggler",
            "workers",
            "excess_us",
            "excess_pct",
            "straggler_steps",
            "steps",
            "reason_words",
            "reason_us",
            "others_wait_us",
            "fix",
        ),
        when=lambda f: True,
        message="Worker {straggler} is the straggler of the {workers} workers: in "
        "{straggler_steps} of {steps} captured steps the others waited for it in the all-reduce. "
        "Its steps take {excess_us:,.0f} µs more than theirs outside communication "
        "({excess_pct:.0f}% of its step), most of it in {reason_words} ({reason_us:,.0f} µs a "
        "step more than the others'); they wait {others_wait_us:,.0f} µs a step in "
        "communication.",
        fix="{fix}",
        cost="excess_us",
    ),
    Rule(
        id="straggler_unexplained",
        subject="job",
        needs=(
            "name",
            "straggler",
            "workers",
            "excess_us",
            "excess_pct",
            "straggler_steps",
            "steps",
        ),
        when=lambda f: f.get("reason") is None,
        message="Worker {straggler} is the straggler of the {workers} workers (in "
        "{straggler_steps} of {steps} captured steps): its steps take {excess_us:,.0f} µs more "
        "than theirs outside communication ({excess_pct:.0f}% of its step), in no category its "
        "attribution measured.",
        fix="Compare its phases' figures with the other workers' in the report.",
        cost="excess_us",
    ),
    Rule(
        id="communication_bound",
        subject="job_worker",
        needs=("name", "index", "communication_us", "communication_pct", "step_us"),
        when=lambda f: f["communication_pct"] >= COMMUNICATION_PCT and f["straggler"] is None,
        message="Worker {index} spends {communication_us:,.0f} µs of each {step_us:,.0f} µs step "
        "({communication_pct:.0f}%) in collective ops outside compute, with no straggler to "
        "wait for: the all-reduce itself.",
        fix="Synchronise less often per sample: larger per-worker batches, several steps per "
        "call, or fewer (larger) gradient tensors to reduce.",
        cost="communication_us",
    ),
)


def diagnose(job: JobAnalysis | None) -> list[Diagnosis]:
    """The job's findings (none for a run that is not a job)."""
    if job is None:
        return []
    found = job_facts(job)
    out = []
    for subject in ("job", "job_worker"):
        out += evaluate(RULES, subject, [f for f in found if f["subject"] == subject])
    return out
