"""The analysis of a run, computed once: everything the outputs need, as typed objects.

Place in the pipeline: capture (the workloads' traces, the experiments' and the efficiency
process's raw results) -> **analyse** -> the summary (``profiler.reports.summary``, the one
place that converts nanoseconds) and every renderer (HTML, text, TensorBoard, Chrome trace,
flame graph, line tables), which only format what this returns. Pure: no I/O, no printing.

Per workload (``WorkloadAnalysis``): step statistics of every window, each phase's slow-down,
the one-off costs, what the samples say, the attribution (``profiler.analysis.attribution``),
the line tables and the attribution's cross-checks. Per run (``RunAnalysis``): the experiments
and efficiency sections (with the attribution's predictions) and the diagnoses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from profiler.analysis import attribution, lines, sampling, stats, whatif
from profiler.analysis.attribution import Attribution
from profiler.capture.loop import Params, WorkloadSpec
from profiler.model import OK, WorkloadTrace, median_ns
from profiler.model.records import FrameworkData, LinesData, ThreadCpu

#: Cross-check tolerances (``checks``).
KERNEL_CHECK_TOLERANCE = 0.5
SWEEP_CHECK_POINTS = 0.15


class Outcome(Protocol):
    """What a measured workload left (``profiler.processes.launch.WorkloadOutcome``)."""

    spec: WorkloadSpec
    slug: str
    status: str
    trace: WorkloadTrace | None
    error: str
    wall_ns: int
    params: Params | None


@dataclass(frozen=True)
class Check:
    """One cross-check of the attribution against an independent measurement."""

    name: str
    value: float
    reference: float
    tolerance: str
    ok: bool


@dataclass(frozen=True)
class WorkloadAnalysis:
    """What one workload's trace says.

    Attributes:
        outcome: the workload as measured (spec, status, trace, ...).
        timed: the timed window's step statistics (None without one).
        windows: per phase with a window, its step statistics.
        inflation: per instrumented phase, its median step over its uninstrumented
            neighbours' (a script's reference blocks), else over the timed window's.
        one_off: build and warm-up costs beyond the steady state.
        sampling: the sampled phase's stacks, counted and classified.
        sampled_mean_inflation: the sampled window's mean step over the timed window's.
        attribution: every timed step split into categories.
        line_tables: the lines phase's tables (``profiler.analysis.lines.tables``).
        lines_inflation_vs_warmup: the lines window's median step over the warm-up's.
        checks: the attribution's cross-checks.
        distribution: the timed window's spread (tail, outliers).
        series: every window's step times in step order (thinned).
        epochs: what each epoch boundary costs (a loop with epochs: Keras ``fit``).
        whatifs: the fixes applied to a script's loop, measured against their predictions.
        drift: how much the machine's speed varied across a script's run (its reference
            blocks), or None.
    """

    outcome: Any
    timed: stats.StepStats | None = None
    windows: Mapping[str, stats.StepStats | None] = field(default_factory=dict)
    inflation: Mapping[str, float] = field(default_factory=dict)
    one_off: stats.OneOff | None = None
    sampling: sampling.Analysis | None = None
    sampled_mean_inflation: float | None = None
    attribution: Attribution | None = None
    line_tables: list[dict[str, Any]] = field(default_factory=list)
    lines_inflation_vs_warmup: float | None = None
    checks: list[Check] = field(default_factory=list)
    distribution: stats.Distribution | None = None
    series: stats.Series | None = None
    epochs: stats.EpochCost | None = None
    whatifs: tuple[whatif.WhatIf, ...] = ()
    drift: stats.Drift | None = None

    @property
    def name(self) -> str:
        return str(self.outcome.spec.name)

    @property
    def trace(self) -> WorkloadTrace | None:
        return self.outcome.trace  # type: ignore[no-any-return]


@dataclass(frozen=True)
class RunAnalysis:
    """The whole run's analysis (see the module docstring)."""

    workloads: tuple[WorkloadAnalysis, ...]
    experiments: dict[str, Any] | None = None
    efficiency: dict[str, Any] | None = None
    diagnoses: tuple[Any, ...] = ()
    job: Any = None

    def workload(self, name: str) -> WorkloadAnalysis | None:
        return next((w for w in self.workloads if w.name == name), None)


def analyse_workload(outcome: Outcome) -> WorkloadAnalysis:
    """The analysis of one workload (its attribution only if it ran to completion)."""
    trace = outcome.trace
    if trace is None:
        return WorkloadAnalysis(outcome)
    w = trace.work
    timed = trace.phase("timed")
    timed_stats = stats.window_stats(timed.window, w) if timed and timed.window else None
    windows = {
        p.name: stats.window_stats(p.window, w) for p in trace.phases if p.window is not None
    }
    drift = stats.drift(trace)
    inflation = {i.phase: i.ratio for i in stats.inflation(trace, drift)}
    one_off = None
    if timed_stats is not None and timed is not None and timed.window is not None:
        one_off = stats.one_off(trace, median_ns(timed.window.durations_ns()))
    samples = None
    mean_inflation = None
    rec = trace.phase("sampled")
    if rec is not None and rec.status == OK:
        samples = sampling.analyse(rec.samples)
        if rec.window is not None and timed is not None and timed.window is not None:
            mean_inflation = sampling.mean_ratio(
                rec.window.durations_ns(), timed.window.durations_ns()
            )
    att = attribution.attribute(trace, samples, drift) if outcome.status == OK else None
    tables: list[dict[str, Any]] = []
    lines_vs_warmup = None
    lrec = trace.phase("lines")
    if lrec is not None and isinstance(lrec.data, LinesData):
        tables = lines.tables(lrec.lines, lrec.data.steps_profiled)
        durations = lrec.window.durations_ns() if lrec.window is not None else ()
        warm = trace.warmup.durations_ns()
        if durations and warm:
            from profiler.capture.schedule import typical_step_ns

            lines_vs_warmup = round(median_ns(list(durations)) / typical_step_ns(warm), 3)
    return WorkloadAnalysis(
        outcome=outcome,
        timed=timed_stats,
        windows=windows,
        inflation=inflation,
        one_off=one_off,
        sampling=samples,
        sampled_mean_inflation=mean_inflation,
        attribution=att,
        line_tables=tables,
        lines_inflation_vs_warmup=lines_vs_warmup,
        distribution=stats.distribution(
            timed.window, w, timed.data if isinstance(timed.data, ThreadCpu) else None
        )
        if timed and timed.window
        else None,
        series=stats.series(trace),
        epochs=_epochs(trace),
        whatifs=tuple(whatif.analyse(trace.data("whatif"), att, w.units_per_step)),
        drift=drift,
    )


def _epochs(trace: WorkloadTrace) -> stats.EpochCost | None:
    """Epoch boundaries' cost, for a Keras ``fit`` (a script's, or a registered workload's)."""
    fit = (trace.script or {}).get("fit") or {}
    if trace.script and not fit:
        return None
    if not trace.script and trace.work.steps_per_epoch < 2:
        return None
    per_epoch = int(fit.get("steps_per_epoch") or trace.work.steps_per_epoch)
    return stats.epoch_cost(trace, per_epoch, int(fit.get("first_step") or 0))


def kernel_check(trace: WorkloadTrace, att: Attribution) -> Check | None:
    """``compute`` against the kernel time ``step_stats`` measured (TF1): within ±50%."""
    fw: FrameworkData | None = trace.data("framework")
    table = fw.op_table if fw is not None else None
    if table is None or table.source != "step_stats":
        return None
    ref = table.kernel_ns_per_step / trace.work.units_per_step
    value = att.typical["compute"]
    return Check(
        name="compute vs step_stats kernel time",
        value=value / 1e3,
        reference=ref / 1e3,
        tolerance=f"±{KERNEL_CHECK_TOLERANCE:.0%}",
        ok=ref > 0 and abs(value - ref) <= KERNEL_CHECK_TOLERANCE * ref,
    )


def sweep_check(att: Attribution, fit: Mapping[str, Any], n: int) -> Check:
    """``compute`` share against the share the size sweep implies, b·n / (a + b·n): within
    ±15 points (numpy only: there the per-sample cost is the arithmetic itself; a TF step's
    also holds feed conversion and copies)."""
    implied = fit["b_ns_per_sample"] * n / (fit["a_us"] * 1e3 + fit["b_ns_per_sample"] * n)
    value = att.share("compute")
    return Check(
        name="compute share vs the size sweep's b·n / (a + b·n)",
        value=value,
        reference=implied,
        tolerance=f"±{SWEEP_CHECK_POINTS * 100:.0f} points",
        ok=abs(value - implied) <= SWEEP_CHECK_POINTS,
    )


def _checks(wa: WorkloadAnalysis, experiments: Mapping[str, Any] | None) -> list[Check]:
    out: list[Check] = []
    trace, att = wa.trace, wa.attribution
    if trace is None or att is None:
        return out
    check = kernel_check(trace, att)
    if check is not None:
        out.append(check)
    fit = (((experiments or {}).get("sweep") or {}).get(wa.name) or {}).get("fit")
    params = wa.outcome.params
    if fit and params is not None and wa.outcome.spec.framework == "numpy":
        out.append(sweep_check(att, fit, params.n))
    return out


def analyse(
    outcomes: Sequence[Outcome],
    experiments_raw: dict[str, Any] | None = None,
    efficiency_raw: dict[str, Any] | None = None,
) -> RunAnalysis:
    """The analysis of a whole run (see the module docstring)."""
    from dataclasses import replace

    from profiler.analysis import efficiency_pairs
    from profiler.analysis import experiments as exp
    from profiler.analysis import job as job_mod
    from profiler.diagnoses import performance
    from profiler.workloads import casestudy

    per = [analyse_workload(o) for o in outcomes]
    atts = {w.name: w.attribution for w in per if w.attribution is not None}

    def predict(baseline: str, removes: tuple[str, ...]) -> int | None:
        att = atts.get(baseline)
        return attribution.removal_ns(att, removes) if att is not None else None

    x_section = (
        exp.summarize(experiments_raw, casestudy.PAIRS, predict, casestudy.CROSSOVER)
        if experiments_raw is not None
        else None
    )
    per = [replace(w, checks=_checks(w, x_section)) for w in per]
    eff = (
        efficiency_pairs.summarize(efficiency_raw, casestudy.EFFICIENCY)
        if efficiency_raw is not None
        else None
    )
    workers = [
        (int(info["index"]), w.name, w.trace, w.attribution)
        for w in per
        if (info := job_mod.worker_of(w.trace)) is not None
    ]
    job = job_mod.analyse(workers)
    found = performance.diagnose(per, x_section, job)
    return RunAnalysis(tuple(per), x_section, eff, tuple(found), job)
