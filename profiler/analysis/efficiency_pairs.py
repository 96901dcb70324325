"""Training efficiency across implementations: each cause's contribution, the facts a pair of
implementations gives the diagnoses, and the summary's ``efficiency`` section.

Place in the pipeline: analysis (pure), over the per-implementation figures of
``profiler.analysis.efficiency`` and a ``Study`` (which implementations, causes and pairs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from profiler.analysis.efficiency import (
    EfficiencyError,
    Impl,
    Run,
    Targets,
    _med,
    bias_multiplier,
    implementation_summary,
    spread,
    value_at,
)
from profiler.model.studies import (
    DEFAULT_TARGET_EXCESS,
    PRINTED_EVAL,
    PRINTED_NONE,
    PRINTED_RUNNING_MEAN,
    Cause,
    Study,
)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or b <= 0:
        return None
    return a / b


def _compare(present: Impl, removed: Impl, axis: str, x: float) -> dict[str, Any]:
    """Both sides' excess at ``axis = x``, medians over seeds, and the per-seed ratio."""
    p, r = present.by_seed(), removed.by_seed()
    seeds = sorted(set(p) & set(r))
    pv = [value_at(p[s].axis(axis), p[s].excess, x) for s in seeds]
    rv = [value_at(r[s].axis(axis), r[s].excess, x) for s in seeds]
    ratios = [_ratio(a, b) for a, b in zip(pv, rv, strict=True)]
    rs = spread(ratios)
    return {
        "x": x,
        "present": _med(pv),
        "removed": _med(rv),
        "ratio": rs["median"],
        "ratio_min": rs["min"],
        "ratio_max": rs["max"],
    }


def _to_target(present: Impl, removed: Impl, axis: str, target: float) -> dict[str, Any]:
    a = present.crossing(target)[axis]
    b = removed.crossing(target)[axis]
    return {
        "present": a["median"],
        "removed": b["median"],
        "ratio": _ratio(a["median"], b["median"]),
    }


def cause_contribution(cause: Cause, impls: Mapping[str, Impl], t: Targets) -> dict[str, Any]:
    """One cause's measured contribution: ``present`` against ``removed`` at equal samples, at
    equal updates, in work to the target, and at the end of their common budget (the floor)."""
    row: dict[str, Any] = {
        "id": cause.id,
        "label": cause.label,
        "present": cause.present,
        "removed": cause.removed,
        "status": "ok",
        "at_samples": None,
        "at_updates": None,
        "samples_to_target": None,
        "updates_to_target": None,
        "floor": None,
    }
    if cause.present not in impls or cause.removed not in impls:
        missing = [n for n in (cause.present, cause.removed) if n not in impls]
        row["status"] = f"not measured: {', '.join(missing)} did not run"
        return row
    p, r = impls[cause.present], impls[cause.removed]
    common = min(p.runs[0].samples[-1], r.runs[0].samples[-1])
    row.update(
        at_samples=_compare(p, r, "samples", t.ref_samples),
        at_updates=_compare(p, r, "updates", t.ref_updates),
        samples_to_target=_to_target(p, r, "samples", t.target_excess),
        updates_to_target=_to_target(p, r, "updates", t.target_excess),
        floor=_compare(p, r, "samples", common),
    )
    return row


# --- facts for the diagnoses (one pair of implementations) -----------------------------------


def pair_facts(a: Impl, b: Impl, t: Targets) -> dict[str, Any]:
    """Flat facts about ``a`` (the loop in question) against ``b`` (the reference).

    Every number comes from the runs; a fact that cannot be measured is None, and the rules
    that need it stay silent (``profiler.diagnoses``).
    """
    f: dict[str, Any] = {"name": f"{a.name} vs {b.name}", "a": a.name, "b": b.name}
    f["target"] = t.target_excess
    f["samples_ref"] = t.ref_samples
    f["updates_ref"] = t.ref_updates

    # Units: what one epoch is worth in samples, updates and time, the bigger epoch first.
    tpu_a, tpu_b = a.time_per_update_ns(), b.time_per_update_ns()
    big, small = (b, a) if b.samples_per_epoch >= a.samples_per_epoch else (a, b)
    tpu_big, tpu_small = (tpu_b, tpu_a) if big is b else (tpu_a, tpu_b)
    f["big"], f["small"] = big.name, small.name
    f["epoch_samples_ratio"] = big.samples_per_epoch / small.samples_per_epoch
    f["epoch_updates_ratio"] = big.updates_per_epoch / small.updates_per_epoch
    f["epoch_time_ratio"] = _ratio(
        tpu_big * big.updates_per_epoch if tpu_big else None,
        tpu_small * small.updates_per_epoch if tpu_small else None,
    )

    # Coverage and batch reuse of a, at the equal-samples point and at the end.
    def coverage(impl: Impl, x: float) -> float | None:
        d = _med(impl.at("samples", x, "distinct"))
        return d / t.n if d is not None else None

    passes = a.reuse_passes()
    batch = a.work.get("batch_size") or a.work["samples_per_step"]
    f["reuse_a"] = passes
    f["reuse_epochs_a"] = passes * batch / a.samples_per_epoch if passes is not None else None
    f["reuse_b"] = b.reuse_passes()
    f["coverage_a"] = coverage(a, t.ref_samples)
    f["coverage_b"] = coverage(b, t.ref_samples)
    f["epochs_a_ref"] = _med(a.at("samples", t.ref_samples, "epochs"))
    common = min(a.runs[0].samples[-1], b.runs[0].samples[-1])
    f["samples_end"] = common
    f["coverage_end_a"] = coverage(a, common)
    f["floor_a"] = _med(a.at("samples", common))
    f["floor_b"] = _med(b.at("samples", common))

    # The bias correction's counter against the update count (counters are seed-independent).
    base = a.runs[0]
    ref_i = next((i for i, u in enumerate(base.updates) if u >= t.ref_updates), None)
    if ref_i is not None and base.counter[ref_i] > 0:
        f["counter_a"] = base.counter[ref_i]
        f["updates_a"] = base.updates[ref_i]
        f["mult_a"] = bias_multiplier(base.counter[ref_i], base.updates[ref_i])
    mults = [
        (bias_multiplier(c, u), c, u)
        for c, u in zip(base.counter, base.updates, strict=True)
        if c > 0 and u > 0
    ]
    if mults:
        f["mult_min_a"], f["counter_min_a"], f["updates_min_a"] = min(mults)

    # What the printed loss means, when exactly one side prints fit's running mean.
    kinds = {a.name: a.printed, b.name: b.printed}
    running = [x for x in (a, b) if x.printed == PRINTED_RUNNING_MEAN]
    if len(running) == 1:
        side, other = running[0], (b if running[0] is a else a)
        gaps = side.printed_gaps(t.n)
        at3 = [g for g in gaps if g[0] == 3] or [g for g in gaps if g[0] == 1]
        if gaps and at3:
            f["printed_side"], f["other_side"] = side.name, other.name
            f["other_printed"] = {
                PRINTED_EVAL: "the loss on all the data (the evaluation loss itself)",
                PRINTED_NONE: "nothing",
                PRINTED_RUNNING_MEAN: "a running mean too",
            }[kinds[other.name]]
            f["printed_epoch"] = at3[0][0]
            f["printed_value"] = _med(g[1] for g in at3)
            f["eval_value"] = _med(g[2] for g in at3)
            f["printed_gap"] = _med(g[3] for g in at3)
            gs = spread([g[3] for g in gaps])
            f["printed_gap_min"], f["printed_gap_max"] = gs["min"], gs["max"]

    # Initial state: per-seed ratio of initial losses (same data seed on both sides).
    pa, pb = a.by_seed(), b.by_seed()
    seeds = sorted(set(pa) & set(pb))
    if seeds:
        ratios = spread([_ratio(pb[s].loss[0], pa[s].loss[0]) for s in seeds])
        f["init_a"] = _med(pa[s].loss[0] for s in seeds)
        f["init_b"] = _med(pb[s].loss[0] for s in seeds)
        f["init_ratio"] = ratios["median"]
        f["init_ratio_min"], f["init_ratio_max"] = ratios["min"], ratios["max"]
        f["initializer_a"], f["initializer_b"] = a.initializer, b.initializer

    # Time per update against the arithmetic it does, the slower side first.
    if tpu_a and tpu_b:
        slow, fast = (b, a) if tpu_b >= tpu_a else (a, b)
        ts, tf_ = max(tpu_a, tpu_b), min(tpu_a, tpu_b)
        f["slow"], f["fast"] = slow.name, fast.name
        f["slow_us"], f["fast_us"] = ts / 1e3, tf_ / 1e3
        f["slow_flops"], f["fast_flops"] = slow.flops_per_update, fast.flops_per_update
        f["time_ratio"] = ts / tf_
        f["flops_ratio"] = slow.flops_per_update / fast.flops_per_update
        f["slow_mflops"] = slow.flops_per_update / ts * 1e3  # flops per ns = Gflop/s; x1e3: Mflop/s

    # Work to the target on every axis (medians over seeds; None when not reached by most).
    for suffix, impl in (("a", a), ("b", b)):
        cross = impl.crossing(t.target_excess)
        for axis, key in (
            ("samples", "ts"),
            ("updates", "tu"),
            ("epochs", "te"),
            ("wall_ms", "tw"),
        ):
            f[f"{key}_{suffix}"] = cross[axis]["median"]
    return f


# --- the summary section ---------------------------------------------------------------------


def _impls(raw: Mapping[str, Any], study: Study) -> tuple[dict[str, Impl], list[dict[str, Any]]]:
    """Implementations with at least one good run, and one status row per implementation."""
    declared = {i.name: i for i in study.implementations}
    impls: dict[str, Impl] = {}
    status = []
    for name, entry in raw.get("runs", {}).items():
        runs, errors = [], []
        for s in entry.get("seeds", []):
            if s.get("status") != "ok":
                errors.append(f"seed {s.get('seed')}: {s.get('error', '')}")
                continue
            try:
                runs.append(Run.from_raw(s))
            except (EfficiencyError, KeyError, TypeError, ValueError) as exc:
                errors.append(f"seed {s.get('seed')}: {exc}")
        state = "ok" if runs and not errors else ("partial" if runs else "failed")
        status.append({"name": name, "status": state, "errors": errors})
        if runs and entry.get("work"):
            impls[name] = Impl(
                name=name,
                framework=str(entry.get("framework", "")),
                runs=tuple(runs),
                work=entry["work"],
                initializer=str(entry.get("initializer") or ""),
                printed=declared[name].printed if name in declared else PRINTED_NONE,
                role=declared[name].role if name in declared else "",
                budget_samples=int(entry.get("budget_samples", runs[0].samples[-1])),
            )
    return impls, status


def summarize(raw: Mapping[str, Any], study: Study) -> dict[str, Any]:
    """The summary's ``efficiency`` section from ``efficiency.json`` (plus the process's
    ``status`` and ``error``): implementations, causes, pair facts and diagnoses."""
    from profiler.diagnoses import efficiency as efficiency_rules
    from profiler.diagnoses import engine

    spec = raw.get("spec", {})
    t = Targets(
        n=int(spec.get("n", 4160)),
        ref_samples=int(spec.get("ref_samples", study.ref_samples)),
        ref_updates=int(spec.get("ref_updates", study.ref_updates)),
        target_excess=float(spec.get("target_excess", DEFAULT_TARGET_EXCESS)),
    )
    impls, status = _impls(raw, study)
    errors = {s["name"]: s for s in status}
    implementations = []
    for name in raw.get("runs", {}):
        entry = implementation_summary(impls[name], t) if name in impls else {"name": name}
        entry["status"] = errors[name]["status"]
        entry["errors"] = errors[name]["errors"]
        implementations.append(entry)
    facts = [
        pair_facts(impls[a], impls[b], t)
        for a, b in study.diagnosed_pairs
        if a in impls and b in impls
    ]
    found = engine.evaluate(efficiency_rules.RULES, efficiency_rules.SUBJECT, facts)
    pairs = [{"a": f["a"], "b": f["b"], "facts": f} for f in facts]
    # The floor is a property of each seed's data, the same for every implementation.
    floors = list({r.seed: r.floor for i in impls.values() for r in i.runs}.values())
    return {
        "status": raw.get("status", "ok"),
        "error": raw.get("error", ""),
        "spec": {
            "seeds": list(spec.get("seeds", [])),
            "n": t.n,
            "budgets": dict(spec.get("budgets", {})),
            "points": int(spec.get("points", 0)),
            "ref_samples": t.ref_samples,
            "ref_updates": t.ref_updates,
            "target_excess": t.target_excess,
        },
        "noise_floor": spread(floors) if floors else None,
        "implementations": implementations,
        "causes": [cause_contribution(c, impls, t) for c in study.causes],
        "pairs": pairs,
        "diagnoses": [d.to_json() for d in found],
        "wall_s": raw.get("wall_s"),
    }
